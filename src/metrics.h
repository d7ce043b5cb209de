/*
 * metrics: the Prometheus text exposition (format 0.0.4) of a peer's
 * counters and gauges, for `gossipctl metrics` and scrapers. It renders
 * the same JSON objects that `status` and `stats` return, so a number
 * cannot be in one and missing from the other: every numeric field of
 * status is a gauge (or a counter for the byte and exchange totals), and
 * every numeric leaf of stats becomes a metric named after its path, with
 * the per-reason and per-type maps of the transport as labels.
 */
#ifndef GD_METRICS_H
#define GD_METRICS_H

#include <jansson.h>

/* A malloc'd NUL-terminated text, or NULL without memory. */
char *metrics_render(json_t *status, json_t *stats);

#endif
