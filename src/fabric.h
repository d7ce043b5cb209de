/*
 * fabric: one libfabric RDM endpoint (tcp;ofi_rxm, or verbs;ofi_rxm) driven
 * by a libuv loop. It owns the endpoint, its address vector, the single
 * completion queue whose wait fd libuv polls, a pool of posted receives
 * for untagged frames, and the queue of posts the provider answered with
 * EAGAIN. It knows nothing of peers, keys or message formats: callers hand
 * it operations (struct fabric_op, embedded in their own records) and get
 * each one back exactly once through its callback.
 *
 * Progress is manual (FI_PROGRESS_MANUAL): completions are read when the
 * fd fires, and before every sleep fi_trywait decides whether sleeping is
 * safe; when it is not, the CQ is drained and an idle handle makes libuv
 * poll without blocking for one more turn. EAGAIN posts are retried from a
 * 1 ms timer, never in a spin. Deadlines belong to the layer above, which
 * cancels what it gave up on.
 */
#ifndef GD_FABRIC_H
#define GD_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <uv.h>

#include "util.h"

struct fabric;

struct fabric_params {
	const char	*provider;	/* "tcp" (default) or "verbs" */
	const char	*host;		/* numeric address to bind */
	const char	*port;
	size_t		frame_size;	/* size of each posted frame buffer */
	unsigned	rx_depth;	/* frame buffers kept posted */
};

enum fabric_op_kind {
	FABRIC_OP_SEND,		/* untagged frame */
	FABRIC_OP_TSEND,	/* tagged body */
	FABRIC_OP_TRECV,	/* tagged body chunk into exactly sized buffers */
	FABRIC_OP_POOL,		/* internal: posted frame buffer */
};

struct fabric_op;
/* status is 0 or a negative errno (-ECANCELED after fabric_cancel or
 * fabric_close, -EMSGSIZE when a receive buffer was too small). */
typedef void (*fabric_op_cb)(struct fabric_op *op, int status, size_t len);

struct fabric_op {
	struct fi_context2	fctx;	/* first: libfabric returns its address */
	fabric_op_cb		cb;
	enum fabric_op_kind	kind;
	void			*buf;
	size_t			len;
	/* Where a message goes on past len bytes (TRECV only; len2 0:
	 * nowhere): a chunk's MAC lands apart from its text. */
	void			*buf2;
	size_t			len2;
	fi_addr_t		addr;
	uint64_t		tag;
	/* Owned by fabric while the op is in flight. */
	struct fid_mr		*mr, *mr2;
	struct fabric_op	*prev, *next;
	int			where;
};

/* A frame arrived (status 0) or failed to (status < 0, buf NULL); buf is
 * only valid during the call. */
typedef void (*fabric_frame_cb)(void *arg, const uint8_t *buf, size_t len,
    int status);

/*
 * Open the endpoint bound to host:port. Returns 0, or a negative errno
 * with the reason in err: -ENODEV when the provider is missing (verbs
 * without an RDMA device), -EADDRINUSE when the port is taken.
 */
int fabric_open(uv_loop_t *loop, const struct fabric_params *p,
    fabric_frame_cb frame_cb, void *arg, struct fabric **out,
    struct errbuf *err);

/* Address vector entries for peers known by host and port. Removing one
 * first completes the sends still queued for it with -ECANCELED. */
int fabric_insert(struct fabric *f, const char *host, const char *port,
    fi_addr_t *out, struct errbuf *err);
void fabric_remove(struct fabric *f, fi_addr_t addr);

/* Hand op to the provider (or to the retry queue on EAGAIN). 0, or a
 * negative errno if the provider refused it; then no callback comes. */
int fabric_post(struct fabric *f, struct fabric_op *op);

/*
 * Give up on op. Returns 1 if it was still queued here (now idle, no
 * callback), 0 if the provider was asked to cancel it (the callback comes
 * later, for sends possibly only at fabric_close), or a negative errno.
 */
int fabric_cancel(struct fabric *f, struct fabric_op *op);

/*
 * Cancel the body receives no message matched yet, let those being read
 * finish (at most 2 s; see fabric.c for why), then close all handles and
 * the endpoint, call every op still in flight with -ECANCELED, then cb.
 * The fabric is freed before cb runs. Ops may complete, with any status,
 * until then; fabric_post refuses new ones.
 */
void fabric_close(struct fabric *f, void (*cb)(void *arg), void *arg);

#endif
