/*
 * control: see control.h. This file owns the connections: each client's
 * state machine (reading, line framing, deferred replies, EOF, the idle
 * deadline, eviction) and the server's life cycle; the system calls on
 * the socket's path and the kernel's socket options are control_sock's.
 *
 * Robustness rules, each from a way a control socket gets abused: a line
 * longer than GD_CONTROL_MAX_LINE gets an error and the connection is shut
 * (there is no way to find the next request boundary we can trust); bad
 * JSON or a missing "cmd" gets an error and the connection stays; a watcher
 * that does not read loses lines rather than growing our memory.
 *
 * Every request received gets its reply, deferred ones included, even when
 * the client shuts its writing side right after sending (printf | socat):
 * at EOF the client is shut down (which flushes queued writes) only once
 * its last deferred reply is out. A client that sends requests but does
 * not read its replies stops being read past CONTROL_MAX_QUEUE of unsent
 * replies, so it cannot grow our memory.
 *
 * Held-open connections cannot lock the operator out: a client that has
 * neither sent a byte nor been sent a reply for CONTROL_IDLE_S, or whose
 * partial request line is that old, is closed (one timer serves them all),
 * and when CONTROL_MAX_CLIENTS are connected a new one evicts the longest
 * idle, so a fresh `status` is always answered. Watchers and clients
 * waiting for a deferred reply are not idle.
 */
#include "control.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control_sock.h"
#include "gossipd/control.h"
#include "log.h"

#define CONTROL_MAX_CLIENTS 256
/* Unsent reply bytes past which a watcher misses lines and a client's
 * further requests wait unread. */
#define CONTROL_MAX_QUEUE (256 * 1024)
#define CONTROL_IDLE_S 5.0
/* How long a closing server lets clients drain their replies. */
#define CONTROL_DRAIN_MS 2000

struct control_client {
	uv_pipe_t pipe;           /* pipe.data points back here */
	struct control *ctl;
	uint64_t id;
	char *line;               /* the partial request line */
	size_t len;
	int watching;
	int pinned;               /* an attached trainer's: never idle */
	int deferred;             /* requests the handler will answer later */
	int eof;                  /* the client shut its writing side */
	int paused;               /* not read: too many replies unsent */
	int ending;               /* shutdown issued: flush, then close */
	int closing;
	double last;              /* last byte read or reply written */
	double line_start;        /* first byte of the partial line */
	struct control_client *prev, *next;
};

struct control {
	uv_loop_t *loop;
	uv_pipe_t listener;
	uv_timer_t closer;        /* runs the close one loop turn later */
	uv_timer_t deadline;      /* the earliest idle client's deadline */
	char *path;
	control_handler_fn fn;
	control_gone_fn gone;     /* a pinned client's connection ended */
	void *arg;
	struct control_client *clients;
	int nclients;
	uint64_t next_id;
	int open_handles;         /* listener, timers, clients not yet closed */
	int closing;
	int draining;             /* clients are being shut down */
	char rbuf[16384];
};

struct control_write {
	uv_write_t req;
	char *data;
};

/* The message may quote what the client sent (a command name, a value)
 * and is cut to a bounded size, so it is mended into valid UTF-8 first:
 * jansson refuses an invalid string, and a refused error is no reply. */
json_t *
control_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	util_utf8_fix(msg);
	return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

static void
control_maybe_free(struct control *ctl)
{
	if (ctl->closing && ctl->open_handles == 0) {
		free(ctl->path);
		free(ctl);
	}
}

static void control_handle_closed(uv_handle_t *h);
static void control_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void control_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void
control_client_closed(uv_handle_t *h)
{
	struct control_client *cl = h->data;
	struct control *ctl = cl->ctl;

	free(cl->line);
	free(cl);
	ctl->open_handles--;
	/* The last client drained: no need to wait out the deadline. */
	if (ctl->draining && ctl->clients == NULL && !uv_is_closing((uv_handle_t *)&ctl->closer))
		uv_close((uv_handle_t *)&ctl->closer, control_handle_closed);
	control_maybe_free(ctl);
}

static void
control_client_close(struct control_client *cl)
{
	struct control *ctl = cl->ctl;

	if (cl->closing)
		return;
	cl->closing = 1;
	if (cl->pinned && ctl->gone != NULL && !ctl->closing)
		ctl->gone(ctl, cl->id, ctl->arg);
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		ctl->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	ctl->nclients--;
	uv_close((uv_handle_t *)&cl->pipe, control_client_closed);
}

static void
control_write_done(uv_write_t *req, int status)
{
	struct control_write *w = (struct control_write *)req;
	struct control_client *cl = req->handle->data;
	uv_stream_t *s = req->handle;

	free(w->data);
	free(w);
	/* A cancelled write means the client is closing (it is freed later);
	 * a failed one, that it is gone (a half-closed watcher is not read,
	 * so this is how its hang-up shows). */
	if (cl->closing)
		return;
	if (status < 0) {
		control_client_close(cl);
		return;
	}
	cl->last = util_now();
	if (cl->paused && !cl->ending &&
	    uv_stream_get_write_queue_size(s) <= CONTROL_MAX_QUEUE / 2) {
		cl->paused = 0;
		cl->line_start = cl->last;
		uv_read_start(s, control_alloc, control_read);
	}
}

static void
control_send(struct control_client *cl, json_t *msg)
{
	struct control_write *w;
	uv_buf_t buf;
	char *s;
	size_t n;

	if (cl->closing)
		return;
	s = json_dumps(msg, JSON_COMPACT);
	if (s == NULL)
		return;
	n = strlen(s);
	w = xmalloc(sizeof(*w));
	w->data = xmalloc(n + 1);
	memcpy(w->data, s, n);
	w->data[n] = '\n';
	free(s);
	/* uv_write copies the buffer descriptors; only the bytes must live on. */
	buf = uv_buf_init(w->data, (unsigned)(n + 1));
	if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &buf, 1, control_write_done) < 0) {
		free(w->data);
		free(w);
		control_client_close(cl);
	}
}

static void
control_shutdown_done(uv_shutdown_t *req, int status)
{
	struct control_client *cl = req->handle->data;

	(void)status;
	free(req);
	control_client_close(cl);
}

/* Read no more; close once every queued reply is written (uv_shutdown
 * completes after the writes queued before it, where uv_close would
 * cancel them). */
static void
control_client_end(struct control_client *cl)
{
	uv_shutdown_t *req;

	if (cl->closing || cl->ending)
		return;
	cl->ending = 1;
	uv_read_stop((uv_stream_t *)&cl->pipe);
	req = xmalloc(sizeof(*req));
	if (uv_shutdown(req, (uv_stream_t *)&cl->pipe, control_shutdown_done) < 0) {
		free(req);
		control_client_close(cl);
	}
}

/* Send a last error, then close once it is flushed. */
static void
control_refuse(struct control_client *cl, json_t *msg)
{
	control_send(cl, msg);
	json_decref(msg);
	control_client_end(cl);
}

/* When the client is closed if it stays as it is; INFINITY if never. */
static double
control_client_due(const struct control_client *cl)
{
	if (cl->closing || cl->watching || cl->pinned || cl->deferred > 0)
		return INFINITY;
	/* A line cut short by our own pause is not the client's slowness. */
	if (cl->len > 0 && !cl->paused && cl->line_start < cl->last)
		return cl->line_start + CONTROL_IDLE_S;
	return cl->last + CONTROL_IDLE_S;
}

/* Close the clients past their deadline, then wait for the next one. */
static void
control_deadline_fire(uv_timer_t *t)
{
	struct control *ctl = t->data;
	struct control_client *cl, *next;
	double now = util_now(), first = INFINITY;

	for (cl = ctl->clients; cl != NULL; cl = next) {
		double due = control_client_due(cl);

		next = cl->next;
		if (due <= now) {
			log_debug("control: closing client %llu: idle for %.0f s",
			    (unsigned long long)cl->id, CONTROL_IDLE_S);
			control_client_close(cl);
		} else if (due < first) {
			first = due;
		}
	}
	if (first < INFINITY)
		util_timer_at(t, control_deadline_fire, first, now);
}

/* Deadlines only move later, so a timer already armed stays early enough:
 * it re-arms itself for whatever is due next. */
static void
control_deadline_arm(struct control *ctl)
{
	double now;

	if (ctl->closing || uv_is_active((uv_handle_t *)&ctl->deadline))
		return;
	now = util_now();
	util_timer_at(&ctl->deadline, control_deadline_fire, now + CONTROL_IDLE_S, now);
}

static struct control_client *
control_find(struct control *ctl, uint64_t id)
{
	for (struct control_client *cl = ctl->clients; cl; cl = cl->next) {
		if (cl->id == id)
			return cl;
	}
	return NULL;
}

/* A deferred reply went out: a client that hung up its writing side and
 * waits for nothing more is done. */
static void
control_replied(struct control_client *cl)
{
	cl->last = util_now();
	if (cl->deferred > 0 && --cl->deferred == 0) {
		if (cl->eof && !cl->watching)
			control_client_end(cl);
		else
			control_deadline_arm(cl->ctl);
	}
}

void
control_reply(struct control *ctl, uint64_t client, json_t *reply)
{
	struct control_client *cl = control_find(ctl, client);

	if (cl != NULL) {
		control_send(cl, reply);
		control_replied(cl);
	}
	json_decref(reply);
}

/* The fd rides on the line's first bytes: sendmsg takes what it can at
 * once (a reply line on an empty socket buffer, in practice all of it) and
 * libuv queues the rest. Only an empty write queue keeps the line's order,
 * and the requester of an attach waits for its reply, so it is empty. */
int
control_reply_fd(struct control *ctl, uint64_t client, json_t *reply, int fd)
{
	struct control_client *cl = control_find(ctl, client);
	uv_os_fd_t sock;
	uv_buf_t rest;
	char *s = NULL;
	size_t len;
	ssize_t n;
	int rc = -EPIPE;

	if (cl == NULL || cl->closing || cl->ending)
		goto out;
	rc = -EAGAIN;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) > 0 ||
	    uv_fileno((uv_handle_t *)&cl->pipe, &sock) < 0)
		goto out;
	s = json_dumps(reply, JSON_COMPACT);
	if (s == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	len = strlen(s) + 1;
	s[len - 1] = '\n';
	if ((n = control_sock_send_fd(sock, s, len, fd)) < 0) {
		rc = (int)n;
		goto out;
	}
	rc = 0;
	if ((size_t)n < len) {
		struct control_write *w = xmalloc(sizeof(*w));

		w->data = xmalloc(len - (size_t)n);
		memcpy(w->data, s + n, len - (size_t)n);
		rest = uv_buf_init(w->data, (unsigned)(len - (size_t)n));
		if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &rest, 1, control_write_done) < 0) {
			free(w->data);
			free(w);
			control_client_close(cl);
			goto out;
		}
	}
	control_replied(cl);
out:
	free(s);
	json_decref(reply);
	return rc;
}

void
control_pin(struct control *ctl, uint64_t client, int pinned)
{
	struct control_client *cl = control_find(ctl, client);

	if (cl == NULL)
		return;
	cl->pinned = pinned;
	cl->last = util_now();
	control_deadline_arm(ctl);
}

int
control_peer_pid(struct control *ctl, uint64_t client)
{
	struct control_client *cl = control_find(ctl, client);
	struct ucred cred;

	if (cl == NULL || control_sock_cred(&cl->pipe, &cred) < 0)
		return 0;
	return (int)cred.pid;
}

void
control_on_gone(struct control *ctl, control_gone_fn fn)
{
	ctl->gone = fn;
}

void
control_watch(struct control *ctl, uint64_t client)
{
	struct control_client *cl = control_find(ctl, client);

	if (cl != NULL)
		cl->watching = 1;
}

int
control_watchers(struct control *ctl)
{
	int n = 0;

	for (struct control_client *cl = ctl->clients; cl; cl = cl->next)
		n += cl->watching;
	return n;
}

void
control_broadcast(struct control *ctl, json_t *msg)
{
	for (struct control_client *cl = ctl->clients; cl; cl = cl->next) {
		if (!cl->watching)
			continue;
		if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) >
		    CONTROL_MAX_QUEUE)
			continue;
		control_send(cl, msg);
	}
}

static void
control_handle_line(struct control_client *cl, char *line, size_t len)
{
	struct control *ctl = cl->ctl;
	json_error_t jerr;
	json_t *req, *reply = NULL;
	const char *cmd;
	int rc;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return;
	req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (req == NULL) {
		reply = control_error("malformed JSON: %s", jerr.text);
		goto out;
	}
	if (!json_is_object(req)) {
		reply = control_error("request must be a JSON object");
		goto out;
	}
	cmd = json_string_value(json_object_get(req, "cmd"));
	if (cmd == NULL) {
		reply = control_error("request needs a \"cmd\" string");
		goto out;
	}
	/* Counted before the call: a deferring handler may answer at once. */
	cl->deferred++;
	rc = ctl->fn(ctl, cl->id, cmd, req, &reply, ctl->arg);
	if (rc == CONTROL_DEFERRED)
		goto out;
	if (control_find(ctl, cl->id) == cl)
		cl->deferred--;
	if (reply == NULL)
		reply = control_error("internal error: no reply to %s", cmd);
out:
	if (reply != NULL) {
		/* The handler may have closed us (leave) or we may be gone. */
		if (control_find(ctl, cl->id) == cl)
			control_send(cl, reply);
		json_decref(reply);
	}
	json_decref(req);
}

static void
control_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct control_client *cl = h->data;

	(void)suggested;
	buf->base = cl->ctl->rbuf;
	buf->len = sizeof(cl->ctl->rbuf);
}

static void
control_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct control_client *cl = s->data;
	uint64_t id = cl->id;
	struct control *ctl = cl->ctl;
	const char *p = buf->base, *end;

	if (nread == UV_EOF) {
		/* Requests read so far are answered first, deferred ones too; a
		 * watcher (printf '{"cmd":"watch"}\n' | socat) keeps streaming.
		 * A pinned client (an attached trainer) that hangs up its writing
		 * side sends no further step: it is gone now, not when its replies
		 * are out, or what it waits for would wait on it for good. */
		cl->eof = 1;
		uv_read_stop(s);
		if (cl->pinned) {
			cl->pinned = 0;
			if (ctl->gone != NULL && !ctl->closing)
				ctl->gone(ctl, id, ctl->arg);
			if (control_find(ctl, id) != cl || cl->closing)
				return;
		}
		if (cl->deferred == 0 && !cl->watching)
			control_client_end(cl);
		return;
	}
	if (nread < 0) {
		control_client_close(cl);
		return;
	}
	if (nread == 0)
		return;
	cl->last = util_now();
	if (cl->len == 0)
		cl->line_start = cl->last;
	end = p + nread;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t take = (size_t)((nl ? nl : end) - p);

		if (cl->len + take + 1 > GD_CONTROL_MAX_LINE) {
			control_refuse(cl, control_error("request line longer than %d bytes",
			    GD_CONTROL_MAX_LINE));
			return;
		}
		if (cl->line == NULL)
			cl->line = xmalloc(GD_CONTROL_MAX_LINE);
		memcpy(cl->line + cl->len, p, take);
		cl->len += take;
		p += take;
		if (nl == NULL)
			break;
		p++;
		cl->line[cl->len] = '\0';
		cl->len = 0;
		cl->line_start = cl->last;
		control_handle_line(cl, cl->line, strlen(cl->line));
		/* A handler may close this client or the whole server. */
		if (ctl->closing || control_find(ctl, id) != cl || cl->closing)
			return;
	}
	/* Lines already read are answered; further ones wait for the client
	 * to take its replies. */
	if (!cl->paused && !cl->ending &&
	    uv_stream_get_write_queue_size(s) > CONTROL_MAX_QUEUE) {
		cl->paused = 1;
		uv_read_stop(s);
	}
}

static int
control_peer_allowed(uv_pipe_t *pipe)
{
	struct ucred cred;

	if (control_sock_cred(pipe, &cred) < 0)
		return 0;
	return cred.uid == getuid() || cred.uid == 0;
}

/* The table is full: the newcomer stays and the longest-idle client goes,
 * one that is not waiting for anything if there is one. */
static void
control_evict(struct control *ctl, struct control_client *keep)
{
	struct control_client *victim = NULL;
	double vdue = INFINITY;

	for (struct control_client *cl = ctl->clients; cl != NULL; cl = cl->next) {
		double due = control_client_due(cl);

		if (cl == keep)
			continue;
		if (victim == NULL || due < vdue ||
		    (due == INFINITY && vdue == INFINITY && cl->last < victim->last)) {
			victim = cl;
			vdue = due;
		}
	}
	if (victim == NULL)
		return;
	log_debug("control: %d connections: closing the longest idle, client %llu",
	    CONTROL_MAX_CLIENTS, (unsigned long long)victim->id);
	control_client_close(victim);
}

static void
control_connection(uv_stream_t *server, int status)
{
	struct control *ctl = server->data;
	struct control_client *cl;

	if (status < 0) {
		log_warn("control: accept failed: %s", uv_strerror(status));
		return;
	}
	cl = xcalloc(1, sizeof(*cl));
	cl->ctl = ctl;
	cl->id = ++ctl->next_id;
	uv_pipe_init(ctl->loop, &cl->pipe, 0);
	cl->pipe.data = cl;
	ctl->open_handles++;
	cl->next = ctl->clients;
	if (ctl->clients)
		ctl->clients->prev = cl;
	ctl->clients = cl;
	ctl->nclients++;
	if (uv_accept(server, (uv_stream_t *)&cl->pipe) < 0) {
		control_client_close(cl);
		return;
	}
	if (!control_peer_allowed(&cl->pipe)) {
		log_warn("control: refused a caller with another uid");
		control_refuse(cl, control_error("permission denied: caller's uid differs"));
		return;
	}
	if (ctl->nclients > CONTROL_MAX_CLIENTS)
		control_evict(ctl, cl);
	cl->last = util_now();
	uv_read_start((uv_stream_t *)&cl->pipe, control_alloc, control_read);
	control_deadline_arm(ctl);
}

int
control_open(uv_loop_t *loop, const char *path, control_handler_fn fn, void *arg,
    struct control **out, struct errbuf *err)
{
	struct control *ctl;
	mode_t old;
	int rc;

	if ((rc = control_sock_prepare(path, err)) < 0)
		return rc;
	ctl = xcalloc(1, sizeof(*ctl));
	ctl->loop = loop;
	ctl->fn = fn;
	ctl->arg = arg;
	ctl->path = xstrdup(path);
	uv_pipe_init(loop, &ctl->listener, 0);
	ctl->listener.data = ctl;
	uv_timer_init(loop, &ctl->closer);
	ctl->closer.data = ctl;
	uv_timer_init(loop, &ctl->deadline);
	ctl->deadline.data = ctl;
	ctl->open_handles = 3;
	/* The socket is born 0600: no window in which others may connect. */
	old = umask(0177);
	rc = uv_pipe_bind(&ctl->listener, path);
	umask(old);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&ctl->listener, 128, control_connection);
	if (rc < 0) {
		errbuf_set(err, rc, "control: cannot listen on %s: %s", path, uv_strerror(rc));
		ctl->path[0] = '\0';
		control_close(ctl);
		return rc;
	}
	*out = ctl;
	return 0;
}

static void
control_handle_closed(uv_handle_t *h)
{
	struct control *ctl = h->data;

	ctl->open_handles--;
	control_maybe_free(ctl);
}

/* Clients that did not drain in time are closed with what is queued. */
static void
control_close_stragglers(uv_timer_t *t)
{
	struct control *ctl = t->data;

	while (ctl->clients != NULL)
		control_client_close(ctl->clients);
	if (!uv_is_closing((uv_handle_t *)&ctl->closer))
		uv_close((uv_handle_t *)&ctl->closer, control_handle_closed);
}

/* One loop turn after control_close: a handler that closed the server
 * (leave) has had its reply queued by then, and shutting each client down
 * (rather than closing it) flushes what is queued. */
static void
control_close_now(uv_timer_t *t)
{
	struct control *ctl = t->data;
	struct control_client *cl, *next;

	ctl->draining = 1;
	for (cl = ctl->clients; cl != NULL; cl = next) {
		next = cl->next;
		control_client_end(cl);
	}
	uv_close((uv_handle_t *)&ctl->listener, control_handle_closed);
	uv_close((uv_handle_t *)&ctl->deadline, control_handle_closed);
	if (ctl->clients == NULL)
		uv_close((uv_handle_t *)&ctl->closer, control_handle_closed);
	else
		uv_timer_start(&ctl->closer, control_close_stragglers, CONTROL_DRAIN_MS, 0);
}

void
control_close(struct control *ctl)
{
	if (ctl == NULL || ctl->closing)
		return;
	ctl->closing = 1;
	if (ctl->path[0] != '\0')
		unlink(ctl->path);
	uv_timer_start(&ctl->closer, control_close_now, 0, 0);
}
