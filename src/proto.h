/*
 * proto: what a protocol module and the transport agree on. Each module
 * (membership, gossip, the model pull) owns a range of application message
 * types and describes it once in a `const struct proto`: the range and the
 * names the counters show. The daemon registers that description with the
 * transport together with the receive callback that feeds the module, and
 * the transport routes every message by its type; nothing routes by hand.
 * The modules themselves stay free of I/O: they send through a
 * proto_send_fn they are given, which is the transport's shape, so one
 * send and one completion type serve every module and the tests' fakes.
 */
#ifndef GD_PROTO_H
#define GD_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Outcome of one send: 0 (the receiver acknowledged it) or a negative
 * errno. */
typedef void (*proto_sent_cb)(void *arg, int status);

/* Send one message to "HOST:PORT"; the payload is copied before it
 * returns. cb (may be NULL) runs exactly once if it returns 0, never from
 * inside the call. */
typedef int (*proto_send_fn)(void *arg, const char *addr, uint8_t type, const void *buf,
    size_t len, proto_sent_cb cb, void *cbarg);

/* A message of the module's range passed every check of the transport:
 * the sender is authenticated; payload is valid during the call only. */
typedef void (*proto_recv_fn)(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len);

struct proto {
	const char *name;               /* the module, for error messages */
	uint8_t first, last;            /* its application types, inclusive */
	const char *const *type_names;  /* last - first + 1; NULL entries unnamed */
};

/* The name of type in p, or NULL. */
static inline const char *
proto_type_name(const struct proto *p, uint8_t type)
{
	if (p == NULL || type < p->first || type > p->last)
		return NULL;
	return p->type_names[type - p->first];
}

#endif
