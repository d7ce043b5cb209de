/*
 * metrics: see metrics.h. Names: gossipd_ + the JSON path with '.' as '_'
 * and anything outside [a-zA-Z0-9_] as '_'; counters end in _total as the
 * Prometheus conventions ask. Which leaves are counters is decided here,
 * in the tables below, because the JSON does not say.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util.h"

struct mbuf {
	char	*s;
	size_t	len, cap;
	int	oom;
};

static void
out(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
out(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	char *ns;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		ns = realloc(b->s, b->cap * 2 + (size_t)n);

		if (ns == NULL) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = b->cap * 2 + (size_t)n;
	}
}

static void
sanitize(char *dst, size_t cap, const char *src)
{
	size_t i;

	for (i = 0; src[i] != '\0' && i + 1 < cap; i++)
		dst[i] = isalnum((unsigned char)src[i]) ? src[i] : '_';
	dst[i] = '\0';
}

static void
head(struct mbuf *b, const char *name, const char *type, const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
value(struct mbuf *b, json_t *v)
{
	if (json_is_integer(v))
		out(b, "%lld\n", (long long)json_integer_value(v));
	else if (json_is_true(v) || json_is_false(v))
		out(b, "%d\n", json_is_true(v) ? 1 : 0);
	else
		out(b, "%.17g\n", json_number_value(v));
}

static int
numeric(json_t *v)
{
	return json_is_number(v) || json_is_boolean(v);
}

/* Status fields that only grow; every other numeric one is a gauge. */
static const char *const status_counters[] = {
	"bytes_sent", "bytes_received", "exchanges", "lag_wait_s", "lag_waits",
};
/* Membership leaves that are levels, not running totals. */
static const char *const member_gauges[] = {
	"alive", "suspect", "dead", "left", "incarnation", "local_health",
};

static int
listed(const char *const *v, size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], k) == 0)
			return 1;
	return 0;
}

static void
render_status(struct mbuf *b, json_t *status)
{
	const char *key;
	json_t *v;
	char name[160], k[128];

	json_object_foreach(status, key, v) {
		int counter;

		if (strcmp(key, "ok") == 0)
			continue;
		sanitize(k, sizeof(k), key);
		if (strcmp(key, "state") == 0 && json_is_string(v)) {
			head(b, "gossipd_state", "gauge",
			    "1 for the peer's current state (label state)");
			out(b, "gossipd_state{state=\"%s\"} 1\n", json_string_value(v));
			continue;
		}
		if (!numeric(v))
			continue;
		counter = listed(status_counters, GD_ARRAY_SIZE(status_counters), key);
		snprintf(name, sizeof(name), "gossipd_%s%s", k, counter ? "_total" : "");
		head(b, name, counter ? "counter" : "gauge", "status field");
		out(b, "%s ", name);
		value(b, v);
	}
}

/* A map of label value -> number, e.g. transport.rejected by reason. */
static void
render_map(struct mbuf *b, const char *name, const char *label, json_t *map,
    const char *help)
{
	const char *key;
	json_t *v;

	head(b, name, "counter", help);
	json_object_foreach(map, key, v) {
		if (!numeric(v) || strcmp(key, "total") == 0)
			continue;
		out(b, "%s{%s=\"", name, label);
		for (const char *c = key; *c; c++)
			out(b, "%s%c", *c == '"' || *c == '\\' ? "\\" : "",
			    *c == '\n' ? ' ' : *c);
		out(b, "\"} ");
		value(b, v);
	}
}

static void
render_section(struct mbuf *b, const char *section, json_t *obj)
{
	const char *key;
	json_t *v;
	char name[256], s[64], k[128], help[256];

	sanitize(s, sizeof(s), section);
	json_object_foreach(obj, key, v) {
		int counter = 0;

		sanitize(k, sizeof(k), key);
		if (json_is_object(v)) {
			snprintf(name, sizeof(name), "gossipd_%s_%s_total", s, k);
			snprintf(help, sizeof(help), "stats %s.%s by %s", section, key,
			    strcmp(key, "rejected") == 0 ? "reason" : "message type");
			render_map(b, name, strcmp(key, "rejected") == 0 ? "reason" :
			    "type", v, help);
			continue;
		}
		if (!numeric(v))
			continue;
		if (strcmp(section, "membership") == 0)
			counter = !listed(member_gauges, GD_ARRAY_SIZE(member_gauges), key);
		else if (strcmp(section, "train") == 0)
			counter = strcmp(key, "steps") == 0 ||
			    strcmp(key, "checkpoints") == 0;
		else if (strcmp(section, "transport") == 0)
			counter = 1;
		snprintf(name, sizeof(name), "gossipd_%s_%s%s", s, k,
		    counter ? "_total" : "");
		snprintf(help, sizeof(help), "stats %s.%s", section, key);
		head(b, name, counter ? "counter" : "gauge", help);
		out(b, "%s ", name);
		value(b, v);
	}
}

char *
metrics_render(json_t *status, json_t *stats)
{
	struct mbuf b = { NULL, 0, 4096, 0 };
	const char *key;
	json_t *v;

	if ((b.s = malloc(b.cap)) == NULL)
		return NULL;
	b.s[0] = '\0';
	if (json_is_object(status))
		render_status(&b, status);
	if (json_is_object(stats)) {
		json_object_foreach(stats, key, v) {
			if (json_is_object(v))
				render_section(&b, key, v);
		}
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}
