/*
 * httpd: the HTTP listener that Prometheus scrapes (--metrics-listen). It
 * owns one TCP listener on the loop and its connections, and answers
 * GET and HEAD /metrics with the text its owner renders at that moment;
 * it knows nothing of what the text says. Everything else gets an error
 * status, and every reply closes its connection (no keep-alive state to
 * keep). A port open to the network gets garbage, huge and slow requests:
 * httpd.c says how each costs bounded memory and time and never holds up
 * the loop.
 */
#ifndef GD_HTTPD_H
#define GD_HTTPD_H

#include <jansson.h>
#include <uv.h>

#include "util.h"

struct httpd;

/* The body of a 200 reply: a malloc'd NUL-terminated text, NULL on failure
 * (answered 500). Runs on the loop thread. */
typedef char *(*httpd_render_fn)(void *arg);

/* Listen on addr, "HOST:PORT" with a numeric IPv4 or bracketed IPv6 host. */
int httpd_open(uv_loop_t *loop, const char *addr, httpd_render_fn render, void *arg,
    struct httpd **out, struct errbuf *err);
/* Closes the listener and every connection; frees itself once libuv has
 * closed them all. NULL-safe. */
void httpd_close(struct httpd *h);
/* Adds "http": {requests by status code, closed_slow, evicted} to obj. */
int httpd_stats_json(const struct httpd *h, json_t *obj);

#endif
