/*
 * transport_stats: see transport_stats.h.
 */
#include <errno.h>
#include <stdio.h>

#include "log.h"
#include "transport_stats.h"

int
tstats_register(struct tstats *s, const struct proto *p, proto_recv_fn recv,
    void *arg, struct errbuf *err)
{
	/* WIRE_TYPE_APP_MAX is the largest uint8_t */
	if (p->first < WIRE_TYPE_APP_MIN || p->first > p->last || recv == NULL)
		return errbuf_set(err, -EINVAL, "%s: types %u..%u are not application types",
		    p->name, p->first, p->last);
	for (unsigned i = p->first; i <= p->last; i++) {
		if (s->routes[i].proto != NULL)
			return errbuf_set(err, -EEXIST, "%s: type %u is %s's", p->name, i,
			    s->routes[i].proto->name);
	}
	for (unsigned i = p->first; i <= p->last; i++)
		s->routes[i] = (struct tstats_route){ p, recv, arg };
	return 0;
}

void
tstats_reject(struct tstats *s, enum wire_reject r, const char *why)
{
	s->rejected[r]++;
	log_debug("transport: rejected message (%s): %s", wire_reject_name(r),
	    why);
}

uint64_t
tstats_sum(const uint64_t by_type[256])
{
	uint64_t n = 0;

	for (int i = 0; i < 256; i++)
		n += by_type[i];
	return n;
}

static json_t *
bytes_json(const struct tstats *s, const uint64_t *v)
{
	json_t *o = json_object();
	uint64_t total = 0;
	char name[16];
	const char *n;
	int i;

	if (o == NULL)
		return NULL;
	for (i = 1; i < 256; i++) {
		if (v[i] == 0)
			continue;
		if ((n = proto_type_name(s->routes[i].proto, (uint8_t)i)) == NULL &&
		    (n = wire_type_name((uint8_t)i)) == NULL) {
			snprintf(name, sizeof(name), "type_%u", (unsigned)(uint8_t)i);
			n = name;
		}
		json_object_set_new(o, n, json_integer((json_int_t)v[i]));
		total += v[i];
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	return o;
}

int
tstats_json(const struct tstats *s, json_t *obj)
{
	json_t *rej = json_object(), *sent, *recv;
	uint64_t total = 0;
	int i;

	if (rej == NULL)
		return -ENOMEM;
	for (i = 0; i < WIRE_REJ_COUNT; i++) {
		json_object_set_new(rej, wire_reject_name(i),
		    json_integer((json_int_t)s->rejected[i]));
		total += s->rejected[i];
	}
	json_object_set_new(rej, "total", json_integer((json_int_t)total));
	sent = bytes_json(s, s->bytes_sent);
	recv = bytes_json(s, s->bytes_recv);
	if (sent == NULL || recv == NULL) {
		json_decref(rej);
		json_decref(sent);
		json_decref(recv);
		return -ENOMEM;
	}
	json_object_set_new(obj, "rejected", rej);
	json_object_set_new(obj, "bytes_sent", sent);
	json_object_set_new(obj, "bytes_received", recv);
	json_object_set_new(obj, "messages_sent",
	    json_integer((json_int_t)s->msgs_sent));
	json_object_set_new(obj, "messages_received",
	    json_integer((json_int_t)s->msgs_recv));
	return 0;
}
