/*
 * transport: what the daemon talks to for peer traffic. It owns the peers
 * table and the per-peer protocol on top of fabric (endpoint), wire
 * (layout) and session (crypto): the handshake on first use, the queue of
 * messages waiting for it, sequence numbers, chunked bodies for big
 * messages, acknowledgements, deadlines, the rejection and byte counters.
 *
 * A send completes (callback status 0) when the receiver acknowledged it,
 * i.e. it passed every check there and the receiver's application handled
 * it (the ACK follows the handler, so a reply goes out first). Every
 * operation has a deadline: op_timeout_ms plus the time its payload takes
 * at TRANSPORT_MIN_RATE, counted from its start or
 * from the peer's last progress (an ACK, or a message from it), whichever
 * is later, so a backlog to a live peer drains while a silent peer is
 * given up after one timeout; deadlines run on a clock that leaves out
 * the time this loop stood still, which no peer is to blame for. Bodies
 * in flight between two peers are held to twice max_message_size: a
 * receiver refuses announcements beyond that (oversize), and a sender
 * queues its messages to stay within it, so peers that agree on
 * max_message_size never trip it.
 *
 * A HELLO unanswered for 1 s is sent again (then after 2 s, 4 s...),
 * since one can be lost with its connection while nothing fails.
 * When a deadline of a peer passes (or the handshake's), the peer is
 * declared unreachable: all its operations fail
 * (-ETIMEDOUT, or -EHOSTUNREACH when the provider reported an error), they
 * are cancelled in the fabric, its sessions are wiped, its address leaves
 * the address vector and peer_down is called. The next send to it starts
 * over with a new handshake, so a restarted peer is picked up again.
 *
 * Peers are named "HOST:PORT" as they listen (use numeric addresses: that
 * is what a peer announces and what its traffic is matched against).
 * The calls are the loop thread's; nothing here is thread-safe. A big
 * message is cut into chunks that are sealed, sent, received and opened
 * side by side: the loop thread and the transport's idle workers
 * (workers.h) seal a body's chunks together, each posted as soon as it
 * is sealed, and a worker opens each chunk that lands while the loop
 * thread goes on receiving (the loop opens it itself when none is idle).
 */
#ifndef GD_TRANSPORT_H
#define GD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "proto.h"
#include "util.h"
#include "wire.h"

#define TRANSPORT_DEFAULT_TIMEOUT_MS	10000
#define TRANSPORT_DEFAULT_MAX_MESSAGE	((uint64_t)256 << 20)
/* Deadlines grow by one second per this many payload bytes. */
#define TRANSPORT_MIN_RATE		((uint64_t)32 << 20)

struct transport;

struct transport_params {
	const char	*listen;	/* "HOST:PORT" to bind and announce */
	const char	*provider;	/* "tcp" (default) or "verbs" */
	const uint8_t	*key;		/* the 32-byte job key */
	const char	*job;		/* job name, hashed into every header */
	uint64_t	self_id;	/* this peer's id, nonzero */
	uint64_t	max_message_size; /* 0: TRANSPORT_DEFAULT_MAX_MESSAGE */
	unsigned	op_timeout_ms;	/* 0: TRANSPORT_DEFAULT_TIMEOUT_MS */
	/* Threads that seal and open bodies: 0 workers_default_count(),
	 * -1 none (the loop thread does it, between its other work). */
	int		threads;
};

/* A peer stopped making progress; status is -ETIMEDOUT or -EHOSTUNREACH. */
typedef void (*transport_peer_down_cb)(void *arg, const char *addr,
    uint64_t id, int status);

/*
 * Bind the endpoint and start serving on loop. Returns 0 or a negative
 * errno with the reason in err (-ENODEV: provider unavailable, e.g. verbs
 * without an RDMA device; -EADDRINUSE; -EINVAL: bad parameters).
 */
int transport_open(uv_loop_t *loop, const struct transport_params *p,
    transport_peer_down_cb peer_down, void *arg, struct transport **out,
    struct errbuf *err);

/*
 * Route the application types of p (WIRE_TYPE_APP_MIN..MAX) to recv(arg,
 * ...) and name them in the counters. p must outlive t. -EINVAL for a
 * range outside the application types, -EEXIST where it overlaps a
 * registered one. A message of a type nobody registered is acknowledged,
 * logged (debug) and dropped.
 */
int transport_register(struct transport *t, const struct proto *p, proto_recv_fn recv,
    void *arg, struct errbuf *err);

/*
 * Queue a message of an application type to peer "HOST:PORT". The payload
 * is copied or sealed before the call returns. cb (may be NULL) is called
 * exactly once, never from inside transport_send. Returns 0, or -EINVAL
 * (bad address or type), -EMSGSIZE (len > max_message_size), -ESHUTDOWN
 * (closing); then cb is not called.
 */
int transport_send(struct transport *t, const char *peer, uint8_t type,
    const void *payload, size_t len, proto_sent_cb cb, void *arg);

/*
 * Fail every pending send with -ECANCELED, close the endpoint and all
 * handles, wipe all keys; cb runs once everything is closed and t freed.
 */
void transport_close(struct transport *t, void (*cb)(void *arg), void *arg);

/* Counters. */
uint64_t transport_bytes_sent(const struct transport *t);
uint64_t transport_bytes_received(const struct transport *t);
/*
 * Add to obj: "rejected": {reason: n, ..., "total": n},
 * "bytes_sent"/"bytes_received": {type name: n, ..., "total": n},
 * "messages_sent"/"messages_received": totals of application messages.
 */
int transport_stats_json(const struct transport *t, json_t *obj);

#endif
