/*
 * fabric: see fabric.h. The call sequence and the reasons behind it are in
 * shared/research/engineering.md §1: one CQ with FI_WAIT_FD for both
 * directions, uv_poll on its fd, fi_trywait in a uv_prepare before each
 * sleep (any non-success, including -FI_ENOENT after a peer died, means
 * "drain and do not sleep"), EAGAIN retried from a short timer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "fabric.h"
#include "log.h"

#define CQ_BATCH	16
#define RETRY_MS	1
#define N_HANDLES	5
/* The longest fabric_close waits for a body chunk half received. */
#define QUIESCE_MS	2000

enum { OP_IDLE, OP_POSTED, OP_QUEUED };

struct fabric {
	uv_loop_t		*loop;
	struct fi_info		*info;
	struct fid_fabric	*fabric;
	struct fid_domain	*domain;
	struct fid_av		*av;
	struct fid_cq		*cq;
	struct fid_ep		*ep;
	int			need_mr;
	int			fd;

	uv_poll_t		poll;
	uv_prepare_t		prepare;
	uv_idle_t		idle;
	uv_timer_t		retry;
	uv_timer_t		quiesce;
	int			handles_open;
	/* fabric_close was called; its handles close (uv_is_closing on poll)
	 * once no body receive is left (see fabric_close). */
	int			closing;
	void			(*close_cb)(void *);
	void			*close_arg;

	fabric_frame_cb		frame_cb;
	void			*frame_arg;
	struct fabric_op	*pool;
	uint8_t			*pool_mem;
	unsigned		pool_n;
	size_t			frame_size;

	/* Ops the provider holds, and ops waiting for a retry. */
	struct fabric_op	*posted;
	struct fabric_op	*queue_head, *queue_tail;

	/* Addresses to remove once the provider holds no op for them. */
	fi_addr_t		*doomed;
	size_t			ndoomed, doomed_cap;
};

static void on_retry(uv_timer_t *h);

static void
list_add(struct fabric_op **head, struct fabric_op *op)
{
	op->prev = NULL;
	op->next = *head;
	if (*head != NULL)
		(*head)->prev = op;
	*head = op;
}

static void
list_del(struct fabric_op **head, struct fabric_op *op)
{
	if (op->prev != NULL)
		op->prev->next = op->next;
	else
		*head = op->next;
	if (op->next != NULL)
		op->next->prev = op->prev;
	op->prev = op->next = NULL;
}

static void
queue_append(struct fabric *f, struct fabric_op *op)
{
	op->next = NULL;
	op->prev = f->queue_tail;
	if (f->queue_tail != NULL)
		f->queue_tail->next = op;
	else
		f->queue_head = op;
	f->queue_tail = op;
	op->where = OP_QUEUED;
}

static void
queue_del(struct fabric *f, struct fabric_op *op)
{
	if (op == f->queue_tail)
		f->queue_tail = op->prev;
	list_del(&f->queue_head, op);
	op->where = OP_IDLE;
}

static int
map_err(ssize_t rc)
{
	int e = (int)(rc < 0 ? -rc : rc);

	if (e == FI_ETRUNC || e == FI_ETOOSMALL)
		return -EMSGSIZE;
	if (e >= FI_ERRNO_OFFSET)
		return -EIO;
	return -e;
}

static void
op_release_mr(struct fabric_op *op)
{
	if (op->mr != NULL) {
		fi_close(&op->mr->fid);
		op->mr = NULL;
	}
	if (op->mr2 != NULL) {
		fi_close(&op->mr2->fid);
		op->mr2 = NULL;
	}
}

/* Register buf for op's direction where the provider wants it. */
static ssize_t
op_reg(struct fabric *f, const struct fabric_op *op, void *buf, size_t len,
    struct fid_mr **mr)
{
	uint64_t acc = (op->kind == FABRIC_OP_SEND ||
	    op->kind == FABRIC_OP_TSEND) ? FI_SEND : FI_RECV;

	if (!f->need_mr || *mr != NULL || len == 0)
		return 0;
	return fi_mr_reg(f->domain, buf, len, acc, 0, 0, 0, mr, NULL);
}

/* Try to hand op to the provider once; returns 0, -FI_EAGAIN or an error. */
static ssize_t
post_once(struct fabric *f, struct fabric_op *op)
{
	void *desc = NULL, *descs[2];
	struct iovec iov[2];
	ssize_t rc;

	if ((rc = op_reg(f, op, op->buf, op->len, &op->mr)) != 0 ||
	    (rc = op_reg(f, op, op->buf2, op->len2, &op->mr2)) != 0)
		return rc;
	if (op->mr != NULL)
		desc = fi_mr_desc(op->mr);
	switch (op->kind) {
	case FABRIC_OP_SEND:
		rc = fi_send(f->ep, op->buf, op->len, desc, op->addr, op);
		break;
	case FABRIC_OP_TSEND:
		rc = fi_tsend(f->ep, op->buf, op->len, desc, op->addr, op->tag,
		    op);
		break;
	case FABRIC_OP_TRECV:
		if (op->len2 == 0) {
			rc = fi_trecv(f->ep, op->buf, op->len, desc,
			    FI_ADDR_UNSPEC, op->tag, 0, op);
			break;
		}
		iov[0] = (struct iovec){ op->buf, op->len };
		iov[1] = (struct iovec){ op->buf2, op->len2 };
		descs[0] = desc;
		descs[1] = op->mr2 != NULL ? fi_mr_desc(op->mr2) : NULL;
		rc = fi_trecvv(f->ep, iov, descs, 2, FI_ADDR_UNSPEC, op->tag, 0,
		    op);
		break;
	case FABRIC_OP_POOL:
		rc = fi_recv(f->ep, op->buf, op->len, desc, FI_ADDR_UNSPEC, op);
		break;
	default:
		rc = -FI_EINVAL;
	}
	if (rc == 0) {
		op->where = OP_POSTED;
		list_add(&f->posted, op);
	}
	return rc;
}

int
fabric_post(struct fabric *f, struct fabric_op *op)
{
	ssize_t rc;

	if (f->closing)
		return -ECANCELED;
	op->where = OP_IDLE;
	rc = post_once(f, op);
	if (rc == -FI_EAGAIN) {
		queue_append(f, op);
		if (!uv_is_active((uv_handle_t *)&f->retry))
			uv_timer_start(&f->retry, on_retry, RETRY_MS, RETRY_MS);
		return 0;
	}
	if (rc != 0) {
		op_release_mr(op);
		return map_err(rc);
	}
	return 0;
}

static int
addr_busy(const struct fabric *f, fi_addr_t addr)
{
	for (const struct fabric_op *op = f->posted; op != NULL; op = op->next) {
		if (op->kind != FABRIC_OP_POOL && op->addr == addr)
			return 1;
	}
	return 0;
}

/* A body receive is with the provider (see fabric_close). */
static int
receiving(const struct fabric *f)
{
	for (const struct fabric_op *op = f->posted; op != NULL; op = op->next) {
		if (op->kind == FABRIC_OP_TRECV)
			return 1;
	}
	return 0;
}

static ssize_t
doomed_find(const struct fabric *f, fi_addr_t addr)
{
	for (size_t i = 0; i < f->ndoomed; i++) {
		if (f->doomed[i] == addr)
			return (ssize_t)i;
	}
	return -1;
}

static void
doomed_drop(struct fabric *f, size_t i)
{
	f->doomed[i] = f->doomed[--f->ndoomed];
}

static void
av_remove_now(struct fabric *f, fi_addr_t addr)
{
	int rc = fi_av_remove(f->av, &addr, 1, 0);

	if (rc != 0)
		log_debug("fabric: fi_av_remove: %s", fi_strerror(-rc));
}

/* The last op for a doomed address completed: now it may go. */
static void
doomed_check(struct fabric *f, fi_addr_t addr)
{
	ssize_t i;

	if (f->ndoomed == 0 || addr == FI_ADDR_UNSPEC || (i = doomed_find(f, addr)) < 0 ||
	    addr_busy(f, addr))
		return;
	doomed_drop(f, (size_t)i);
	av_remove_now(f, addr);
}

static void
complete_op(struct fabric *f, struct fabric_op *op, int status, size_t len)
{
	if (op->where == OP_POSTED) {
		list_del(&f->posted, op);
		if (op->kind != FABRIC_OP_POOL && !f->closing)
			doomed_check(f, op->addr);
	}
	op->where = OP_IDLE;
	op_release_mr(op);
	if (op->kind != FABRIC_OP_POOL) {
		op->cb(op, status, len);
		return;
	}
	f->frame_cb(f->frame_arg, status == 0 ? op->buf : NULL, len, status);
	if (!f->closing && fabric_post(f, op) != 0)
		log_warn("fabric: cannot repost a receive buffer");
}

static void close_handles(struct fabric *f);

static void
complete(struct fabric *f, struct fabric_op *op, int status, size_t len)
{
	int body = op->kind == FABRIC_OP_TRECV;

	complete_op(f, op, status, len);
	/* The last body receive is back: fabric_close goes on. */
	if (f->closing && body && !receiving(f))
		close_handles(f);
}

static void
drain(struct fabric *f)
{
	struct fi_cq_tagged_entry ent[CQ_BATCH];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	for (;;) {
		n = fi_cq_read(f->cq, ent, CQ_BATCH);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(f->cq, &err, 0) != 1)
				return;
			if (err.op_context != NULL)
				complete(f, err.op_context,
				    map_err(err.err ? err.err : FI_EIO),
				    err.len);
			continue;
		}
		if (n < 0) {
			log_warn("fabric: fi_cq_read: %s", fi_strerror((int)-n));
			return;
		}
		for (i = 0; i < n; i++)
			if (ent[i].op_context != NULL)
				complete(f, ent[i].op_context, 0, ent[i].len);
	}
}

static void
on_poll(uv_poll_t *h, int status, int events)
{
	struct fabric *f = h->data;

	(void)status;
	(void)events;
	drain(f);
}

static void
on_idle(uv_idle_t *h)
{
	(void)h;
}

static void
on_prepare(uv_prepare_t *h)
{
	struct fabric *f = h->data;
	struct fid *fids[1] = { &f->cq->fid };

	if (uv_is_closing((uv_handle_t *)&f->poll))
		return;
	if (fi_trywait(f->fabric, fids, 1) != FI_SUCCESS) {
		drain(f);
		/* A completion callback may have closed us meanwhile. */
		if (!uv_is_closing((uv_handle_t *)&f->poll))
			uv_idle_start(&f->idle, on_idle);
	} else
		uv_idle_stop(&f->idle);
}

static void
on_retry(uv_timer_t *h)
{
	struct fabric *f = h->data;
	struct fabric_op *op, *last;
	ssize_t rc;

	drain(f);
	if (f->closing)
		return;
	/* Each op queued now gets one try; later arrivals wait a tick. */
	last = f->queue_tail;
	while ((op = f->queue_head) != NULL) {
		queue_del(f, op);
		rc = post_once(f, op);
		if (rc == -FI_EAGAIN)
			queue_append(f, op);
		else if (rc != 0) {
			op_release_mr(op);
			if (op->kind == FABRIC_OP_POOL)
				log_warn("fabric: receive buffer lost: %s",
				    fi_strerror((int)-rc));
			else
				op->cb(op, map_err(rc), 0);
		}
		if (op == last)
			break;
	}
	if (f->queue_head == NULL && !f->closing)
		uv_timer_stop(&f->retry);
}

int
fabric_cancel(struct fabric *f, struct fabric_op *op)
{
	ssize_t rc;

	if (op->where == OP_QUEUED) {
		queue_del(f, op);
		op_release_mr(op);
		return 1;
	}
	if (op->where != OP_POSTED)
		return -ENOENT;
	rc = fi_cancel(&f->ep->fid, op);
	return rc == 0 ? 0 : map_err(rc);
}

int
fabric_insert(struct fabric *f, const char *host, const char *port,
    fi_addr_t *out, struct errbuf *err)
{
	int rc;

	ssize_t i;

	rc = fi_av_insertsvc(f->av, host, port, out, 0, NULL);
	if (rc != 1)
		return errbuf_set(err, rc < 0 ? map_err(rc) : -EHOSTUNREACH,
		    "cannot resolve %s:%s: %s", host, port,
		    rc < 0 ? fi_strerror(-rc) : "no address");
	/* Back before its old entry could go: keep the entry. */
	if ((i = doomed_find(f, *out)) >= 0)
		doomed_drop(f, (size_t)i);
	return 0;
}

void
fabric_remove(struct fabric *f, fi_addr_t addr)
{
	struct fabric_op *op, *next;

	/* A queued post must never reach the provider with a dead address. */
	for (op = f->queue_head; op != NULL; op = next) {
		next = op->next;
		if ((op->kind == FABRIC_OP_SEND || op->kind == FABRIC_OP_TSEND) &&
		    op->addr == addr) {
			queue_del(f, op);
			op_release_mr(op);
			op->cb(op, -ECANCELED, 0);
		}
	}
	if (f->queue_head == NULL && !f->closing)
		uv_timer_stop(&f->retry);
	/*
	 * With FI_AV_REMOVE_CLEANUP, rxm tears the peer's connection down at
	 * once, and an op still in flight on it (a cancelled rendezvous read,
	 * say) then crashes inside the provider. So the entry goes only when
	 * the provider holds no op for it: now, or at the last completion.
	 */
	if (!addr_busy(f, addr)) {
		av_remove_now(f, addr);
		return;
	}
	if (doomed_find(f, addr) >= 0)
		return;
	if (f->ndoomed == f->doomed_cap) {
		size_t cap = f->doomed_cap ? 2 * f->doomed_cap : 8;
		fi_addr_t *d = realloc(f->doomed, cap * sizeof(*d));

		if (d == NULL) {
			log_warn("fabric: out of memory; keeping a dead peer's address");
			return;
		}
		f->doomed = d;
		f->doomed_cap = cap;
	}
	f->doomed[f->ndoomed++] = addr;
}


static void free_fabric(struct fabric *f);

static int
open_provider(struct fabric *f, const struct fabric_params *p,
    struct errbuf *err)
{
	struct fi_info *hints;
	const char *prov;
	int rc;

	if (p->provider == NULL || strcmp(p->provider, "tcp") == 0)
		prov = "tcp;ofi_rxm";
	else if (strcmp(p->provider, "verbs") == 0)
		prov = "verbs;ofi_rxm";
	else
		return errbuf_set(err, -EINVAL, "unknown provider \"%s\" "
		    "(use tcp or verbs)", p->provider);
	if ((hints = fi_allocinfo()) == NULL)
		return errbuf_set(err, -ENOMEM, "out of memory");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
	    FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	rc = fi_getinfo(FI_VERSION(1, 17), p->host, p->port, FI_SOURCE, hints,
	    &f->info);
	fi_freeinfo(hints);
	if (rc != 0) {
		f->info = NULL;
		if (rc == -FI_ENODATA)
			return errbuf_set(err, -ENODEV, "libfabric provider %s "
			    "is not available for %s:%s%s", prov, p->host,
			    p->port, strncmp(prov, "verbs", 5) == 0 ?
			    " (no RDMA device on this host?)" : "");
		return errbuf_set(err, map_err(rc), "fi_getinfo(%s, %s:%s): %s",
		    prov, p->host, p->port, fi_strerror(-rc));
	}
	f->need_mr = (f->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
	return 0;
}

static int
open_endpoint(struct fabric *f, const struct fabric_params *p,
    struct errbuf *err)
{
	struct fi_av_attr av_attr;
	struct fi_cq_attr cq_attr;
	const char *what;
	int rc;

	what = "fi_fabric";
	if ((rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)) != 0)
		goto out;
	what = "fi_domain";
	if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL)) != 0)
		goto out;
	memset(&av_attr, 0, sizeof(av_attr));
	av_attr.type = FI_AV_TABLE;
	what = "fi_av_open";
	if ((rc = fi_av_open(f->domain, &av_attr, &f->av, NULL)) != 0)
		goto out;
	memset(&cq_attr, 0, sizeof(cq_attr));
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj = FI_WAIT_FD;
	cq_attr.wait_cond = FI_CQ_COND_NONE;
	what = "fi_cq_open";
	if ((rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL)) != 0)
		goto out;
	what = "fi_endpoint";
	if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)) != 0)
		goto out;
	what = "fi_ep_bind(av)";
	if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0)) != 0)
		goto out;
	what = "fi_ep_bind(cq)";
	if ((rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
		goto out;
	what = "fi_enable";
	if ((rc = fi_enable(f->ep)) != 0)
		goto out;
	what = "fi_control(FI_GETWAIT)";
	rc = fi_control(&f->cq->fid, FI_GETWAIT, &f->fd);
out:
	if (rc != 0) {
		rc = map_err(rc);
		if (rc == -EADDRINUSE)
			return errbuf_set(err, rc, "cannot listen on %s:%s: "
			    "address in use", p->host, p->port);
		return errbuf_set(err, rc, "%s (listen %s:%s): %s", what,
		    p->host, p->port, strerror(-rc));
	}
	return 0;
}

int
fabric_open(uv_loop_t *loop, const struct fabric_params *p,
    fabric_frame_cb frame_cb, void *arg, struct fabric **out,
    struct errbuf *err)
{
	struct fabric *f;
	unsigned i;
	int rc;

	/* Read by libfabric at its first call; the user's values win. */
	setenv("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000", 0);
	setenv("FI_AV_REMOVE_CLEANUP", "1", 0);
	if (p->frame_size == 0 || p->rx_depth == 0)
		return errbuf_set(err, -EINVAL, "fabric: bad frame pool size");
	f = xcalloc(1, sizeof(*f));
	f->loop = loop;
	f->frame_cb = frame_cb;
	f->frame_arg = arg;
	f->fd = -1;
	if ((rc = open_provider(f, p, err)) != 0)
		goto fail;
	if ((rc = open_endpoint(f, p, err)) != 0)
		goto fail;
	f->frame_size = p->frame_size;
	f->pool_n = p->rx_depth;
	f->pool = xcalloc(f->pool_n, sizeof(*f->pool));
	f->pool_mem = malloc(f->frame_size * f->pool_n);
	if (f->pool_mem == NULL) {
		rc = errbuf_set(err, -ENOMEM, "fabric: out of memory");
		goto fail;
	}
	for (i = 0; i < f->pool_n; i++) {
		f->pool[i].kind = FABRIC_OP_POOL;
		f->pool[i].buf = f->pool_mem + i * f->frame_size;
		f->pool[i].len = f->frame_size;
		if ((rc = fabric_post(f, &f->pool[i])) != 0) {
			errbuf_set(err, rc, "fabric: cannot post receives: %s",
			    strerror(-rc));
			goto fail;
		}
	}
	uv_poll_init(loop, &f->poll, f->fd);
	uv_prepare_init(loop, &f->prepare);
	uv_idle_init(loop, &f->idle);
	uv_timer_init(loop, &f->retry);
	uv_timer_init(loop, &f->quiesce);
	f->poll.data = f->prepare.data = f->idle.data = f->retry.data = f;
	f->quiesce.data = f;
	f->handles_open = N_HANDLES;
	uv_poll_start(&f->poll, UV_READABLE, on_poll);
	uv_prepare_start(&f->prepare, on_prepare);
	*out = f;
	return 0;
fail:
	free_fabric(f);
	return rc;
}

/* Close the libfabric objects; ops still in flight get -ECANCELED. */
static void
free_fabric(struct fabric *f)
{
	struct fabric_op *op;

	if (f->ep != NULL)
		fi_close(&f->ep->fid);
	while ((op = f->queue_head) != NULL || (op = f->posted) != NULL) {
		if (op->where == OP_QUEUED)
			queue_del(f, op);
		else {
			list_del(&f->posted, op);
			op->where = OP_IDLE;
		}
		op_release_mr(op);
		if (op->kind != FABRIC_OP_POOL)
			op->cb(op, -ECANCELED, 0);
	}
	if (f->cq != NULL)
		fi_close(&f->cq->fid);
	if (f->av != NULL)
		fi_close(&f->av->fid);
	if (f->domain != NULL)
		fi_close(&f->domain->fid);
	if (f->fabric != NULL)
		fi_close(&f->fabric->fid);
	if (f->info != NULL)
		fi_freeinfo(f->info);
	free(f->pool_mem);
	free(f->pool);
	free(f->doomed);
	free(f);
}

static void
on_handle_closed(uv_handle_t *h)
{
	struct fabric *f = h->data;
	void (*cb)(void *) = f->close_cb;
	void *arg = f->close_arg;

	if (--f->handles_open > 0)
		return;
	free_fabric(f);
	if (cb != NULL)
		cb(arg);
}

static void
close_handles(struct fabric *f)
{
	if (uv_is_closing((uv_handle_t *)&f->poll))
		return;
	/* Never close the CQ's fd while uv_poll still watches it. */
	uv_poll_stop(&f->poll);
	uv_close((uv_handle_t *)&f->poll, on_handle_closed);
	uv_close((uv_handle_t *)&f->prepare, on_handle_closed);
	uv_close((uv_handle_t *)&f->idle, on_handle_closed);
	uv_close((uv_handle_t *)&f->retry, on_handle_closed);
	uv_close((uv_handle_t *)&f->quiesce, on_handle_closed);
}

static void
on_quiesce(uv_timer_t *h)
{
	struct fabric *f = h->data;

	log_warn("fabric: closing with a message still arriving after %d ms",
	    QUIESCE_MS);
	close_handles(f);
}

/*
 * libfabric 1.17's tcp provider, when a connection closes in the middle of
 * a rendezvous read, reports that read twice, the second time with no
 * context, and rxm dereferences it: a SIGSEGV in fi_close (tests/
 * test_fabric). So the endpoint closes only once no body receive is with
 * the provider: those no message matched yet are cancelled, and those
 * being read are given QUIESCE_MS to finish. Frames and sends cannot be
 * such reads; they are cancelled by fi_close as before.
 */
void
fabric_close(struct fabric *f, void (*cb)(void *arg), void *arg)
{
	struct fabric_op *op;

	if (f->closing)
		return;
	f->closing = 1;
	f->close_cb = cb;
	f->close_arg = arg;
	uv_timer_stop(&f->retry);
	if (!receiving(f)) {
		close_handles(f);
		return;
	}
	for (op = f->posted; op != NULL; op = op->next) {
		if (op->kind == FABRIC_OP_TRECV)
			(void)fi_cancel(&f->ep->fid, op);
	}
	uv_timer_start(&f->quiesce, on_quiesce, QUIESCE_MS, 0);
}
