/*
 * transport_stats: what the transport keeps per message type, the route
 * (which protocol module registered the type, and its receive callback)
 * and the bytes counted under the type's name, with the rejection and
 * message counters beside them, and the JSON the stats command shows of
 * them. Apart from the endpoint because it is a table that every layer's
 * traffic is counted into and nothing in it acts on the traffic: the
 * endpoint routes by it and adds to it, and only the names and the JSON
 * are worked out here.
 */
#ifndef GD_TRANSPORT_STATS_H
#define GD_TRANSPORT_STATS_H

#include <stdint.h>

#include <jansson.h>

#include "proto.h"
#include "util.h"
#include "wire.h"

struct tstats_route {
	const struct proto	*proto;	/* NULL: nobody registered */
	proto_recv_fn		recv;
	void			*arg;
};

struct tstats {
	uint64_t		rejected[WIRE_REJ_COUNT];
	uint64_t		bytes_sent[256];
	uint64_t		bytes_recv[256];
	uint64_t		msgs_sent, msgs_recv;
	struct tstats_route	routes[256];
};

/* As transport_register. */
int tstats_register(struct tstats *s, const struct proto *p, proto_recv_fn recv,
    void *arg, struct errbuf *err);
/* Count a frame rejected; why is for the log. */
void tstats_reject(struct tstats *s, enum wire_reject r, const char *why);
/* The total of a by-type counter. */
uint64_t tstats_sum(const uint64_t by_type[256]);
/* As transport_stats_json. */
int tstats_json(const struct tstats *s, json_t *obj);

#endif
