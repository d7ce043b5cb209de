/*
 * metrics: the Prometheus text exposition (format 0.0.4) of a peer's
 * counters and gauges, for `gossipctl metrics` and the HTTP listener
 * (--metrics-listen). It renders the same JSON objects that the `status`,
 * `stats` and `peers` commands return, so a number cannot be in one and
 * missing from the other: every numeric field becomes a metric with a
 * HELP text and a type, maps by reason or message type become labels, and
 * each member other than this peer gets its own series (labels peer and
 * addr).
 */
#ifndef GD_METRICS_H
#define GD_METRICS_H

#include <jansson.h>

/* A malloc'd NUL-terminated text, or NULL without memory. peers is the
 * array of the peers reply, or NULL. */
char *metrics_render(json_t *status, json_t *stats, json_t *peers);

#endif
