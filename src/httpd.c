/*
 * httpd: see httpd.h.
 *
 * A connection lives through three states: READING its request head,
 * WRITING the one reply, then LINGERING: our side is shut and what the
 * client still sends is read and dropped until it closes, so that closing
 * with its unread bytes in our buffer does not reset the connection and
 * destroy the reply before the client read it (a 431 to a huge request is
 * the case). The costs a client can impose are bounded so:
 * - memory: a request head is read into a fixed HTTPD_MAX_HEAD buffer; a
 *   longer one is answered 431; a body is never read, only dropped;
 * - time: a client that has not finished its head HTTPD_DEADLINE_MS after
 *   connecting is answered 408; any connection still open after twice that
 *   is closed, whatever it is doing (one timer checks them all, and runs
 *   only while there are connections);
 * - connections: at most HTTPD_MAX_CLIENTS; a new one closes the oldest
 *   that is not writing, so a flood of idle connections cannot keep a
 *   scraper out for longer than it takes to connect again.
 * Rendering runs on the loop thread when a whole request has arrived.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "httpd.h"
#include "log.h"

#define HTTPD_MAX_HEAD		8192
#define HTTPD_MAX_CLIENTS	32
#define HTTPD_DEADLINE_MS	5000
#define HTTPD_TICK_MS		250
#define HTTPD_METHOD_MAX	16

enum httpd_state { HTTPD_READING, HTTPD_WRITING, HTTPD_LINGERING };

/* The status codes httpd answers with, and the slot each is counted in. */
static const struct {
	int		code;
	const char	*reason;
	const char	*body;
} httpd_codes[] = {
	{ 200, "OK", NULL },
	{ 400, "Bad Request", "malformed request\n" },
	{ 404, "Not Found", "not found: only /metrics is served\n" },
	{ 405, "Method Not Allowed", "only GET and HEAD are allowed\n" },
	{ 408, "Request Timeout", "request not finished in time\n" },
	{ 431, "Request Header Fields Too Large", "request head too large\n" },
	{ 500, "Internal Server Error", "out of memory\n" },
};

#define HTTPD_NCODES	GD_ARRAY_SIZE(httpd_codes)

struct httpd_client {
	uv_tcp_t		tcp;		/* tcp.data points back here */
	struct httpd		*h;
	struct httpd_client	*prev, *next;
	enum httpd_state	state;
	uint64_t		since;		/* uv_now at accept */
	uv_write_t		write;
	uv_shutdown_t		shutdown;
	char			*reply;		/* head and body, one buffer */
	size_t			rlen;
	size_t			len;		/* of the request head read */
	char			head[HTTPD_MAX_HEAD];
};

struct httpd {
	uv_loop_t		*loop;
	uv_tcp_t		listener;
	uv_timer_t		tick;
	httpd_render_fn		render;
	void			*arg;
	struct httpd_client	*clients;	/* newest first */
	int			nclients;
	int			open_handles;
	int			closing;
	uint64_t		answered[HTTPD_NCODES];
	uint64_t		closed_slow, evicted;
};

static void
httpd_maybe_free(struct httpd *h)
{
	if (h->closing && h->open_handles == 0 && h->clients == NULL)
		free(h);
}

static void
httpd_client_closed(uv_handle_t *handle)
{
	struct httpd_client *c = handle->data;
	struct httpd *h = c->h;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		h->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	h->nclients--;
	free(c->reply);
	free(c);
	if (h->clients == NULL && !h->closing)
		uv_timer_stop(&h->tick);
	httpd_maybe_free(h);
}

static void
httpd_client_close(struct httpd_client *c)
{
	if (!uv_is_closing((uv_handle_t *)&c->tcp))
		uv_close((uv_handle_t *)&c->tcp, httpd_client_closed);
}

static void
httpd_alloc(uv_handle_t *handle, size_t size, uv_buf_t *buf)
{
	struct httpd_client *c = handle->data;

	(void)size;
	/* Lingering reads land on the old head: they are dropped anyway. */
	if (c->state == HTTPD_LINGERING)
		c->len = 0;
	*buf = uv_buf_init(c->head + c->len, (unsigned)(sizeof(c->head) - c->len));
}

static void
httpd_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	if (nread < 0)
		httpd_client_close(s->data);
}

static void
httpd_shut(uv_shutdown_t *req, int status)
{
	struct httpd_client *c = req->data;

	if (status < 0 || uv_read_start((uv_stream_t *)&c->tcp, httpd_alloc,
	    httpd_linger_read) < 0)
		httpd_client_close(c);
}

static void
httpd_written(uv_write_t *req, int status)
{
	struct httpd_client *c = req->data;

	if (status == UV_ECANCELED)
		return;	/* closed while writing: its close callback frees it */
	c->state = HTTPD_LINGERING;
	c->shutdown.data = c;
	if (status < 0 || uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, httpd_shut) < 0)
		httpd_client_close(c);
}

/* Answer with httpd_codes[i]; body is taken over (NULL: the code's text). */
static void
httpd_reply(struct httpd_client *c, size_t i, char *body, int head_only)
{
	const char *text = body != NULL ? body : httpd_codes[i].body;
	size_t blen = strlen(text), hlen;
	char head[256];
	uv_buf_t buf;

	uv_read_stop((uv_stream_t *)&c->tcp);
	c->h->answered[i]++;
	c->state = HTTPD_WRITING;
	hlen = (size_t)snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n", httpd_codes[i].code,
	    httpd_codes[i].reason, httpd_codes[i].code == 200 ?
	    "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8", blen,
	    httpd_codes[i].code == 405 ? "Allow: GET, HEAD\r\n" : "");
	c->rlen = hlen + (head_only ? 0 : blen);
	c->reply = xmalloc(c->rlen);
	memcpy(c->reply, head, hlen);
	if (!head_only)
		memcpy(c->reply + hlen, text, blen);
	free(body);
	c->write.data = c;
	buf = uv_buf_init(c->reply, (unsigned)c->rlen);
	if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, httpd_written) < 0)
		httpd_client_close(c);
}

static size_t
httpd_code(int code)
{
	size_t i;

	for (i = 0; i < HTTPD_NCODES - 1 && httpd_codes[i].code != code; i++)
		;
	return i;
}

/* The request line "METHOD TARGET HTTP/1.x" decides the reply. */
static void
httpd_route(struct httpd_client *c)
{
	char method[HTTPD_METHOD_MAX + 1], *line = c->head, *eol, *sp1, *sp2, *q;
	size_t mlen, plen;
	char *body;

	eol = memchr(line, '\n', c->len);
	if (eol > line && eol[-1] == '\r')
		eol--;
	*eol = '\0';
	sp1 = strchr(line, ' ');
	sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
	if (sp1 == NULL || sp2 == NULL || strchr(sp2 + 1, ' ') != NULL ||
	    (mlen = (size_t)(sp1 - line)) == 0 || mlen > HTTPD_METHOD_MAX ||
	    strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != mlen || sp1[1] != '/' ||
	    (strcmp(sp2 + 1, "HTTP/1.0") != 0 && strcmp(sp2 + 1, "HTTP/1.1") != 0)) {
		httpd_reply(c, httpd_code(400), NULL, 0);
		return;
	}
	memcpy(method, line, mlen);
	method[mlen] = '\0';
	q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	plen = (size_t)((q != NULL ? q : sp2) - (sp1 + 1));
	if (plen != strlen("/metrics") || memcmp(sp1 + 1, "/metrics", plen) != 0) {
		httpd_reply(c, httpd_code(404), NULL, 0);
		return;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		httpd_reply(c, httpd_code(405), NULL, 0);
		return;
	}
	if ((body = c->h->render(c->h->arg)) == NULL) {
		httpd_reply(c, httpd_code(500), NULL, 0);
		return;
	}
	httpd_reply(c, httpd_code(200), body, strcmp(method, "HEAD") == 0);
}

static void
httpd_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct httpd_client *c = s->data;

	(void)buf;
	if (nread < 0) {
		httpd_client_close(c);
		return;
	}
	c->len += (size_t)nread;
	if (memmem(c->head, c->len, "\r\n\r\n", 4) != NULL ||
	    memmem(c->head, c->len, "\n\n", 2) != NULL)
		httpd_route(c);
	else if (c->len == sizeof(c->head))
		httpd_reply(c, httpd_code(431), NULL, 0);
}

/* Room for one more: the oldest connection not writing goes. */
static int
httpd_make_room(struct httpd *h)
{
	struct httpd_client *c, *victim = NULL;

	if (h->nclients < HTTPD_MAX_CLIENTS)
		return 1;
	for (c = h->clients; c != NULL; c = c->next)
		if (c->state != HTTPD_WRITING && !uv_is_closing((uv_handle_t *)&c->tcp))
			victim = c;
	if (victim == NULL)
		return 0;
	h->evicted++;
	httpd_client_close(victim);
	return 1;
}

static void
httpd_tick(uv_timer_t *t)
{
	struct httpd *h = t->data;
	uint64_t now = uv_now(h->loop);
	struct httpd_client *c, *next;

	for (c = h->clients; c != NULL; c = next) {
		next = c->next;
		if (uv_is_closing((uv_handle_t *)&c->tcp))
			continue;
		if (now - c->since >= 2 * HTTPD_DEADLINE_MS) {
			h->closed_slow++;
			httpd_client_close(c);
		} else if (now - c->since >= HTTPD_DEADLINE_MS && c->state == HTTPD_READING) {
			httpd_reply(c, httpd_code(408), NULL, 0);
		}
	}
}

static void
httpd_drop_closed(uv_handle_t *handle)
{
	free(handle);
}

static void
httpd_connection(uv_stream_t *server, int status)
{
	struct httpd *h = server->data;
	struct httpd_client *c;
	uv_tcp_t *drop;

	if (status < 0) {
		log_warn("metrics: accept: %s", uv_strerror(status));
		return;
	}
	if (!httpd_make_room(h)) {
		/* Every slot is writing its reply: this one waits no turn. */
		h->evicted++;
		drop = xmalloc(sizeof(*drop));
		uv_tcp_init(h->loop, drop);
		if (uv_accept(server, (uv_stream_t *)drop) < 0 ||
		    uv_tcp_close_reset(drop, httpd_drop_closed) < 0)
			uv_close((uv_handle_t *)drop, httpd_drop_closed);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->h = h;
	c->since = uv_now(h->loop);
	uv_tcp_init(h->loop, &c->tcp);
	c->tcp.data = c;
	c->next = h->clients;
	if (h->clients != NULL)
		h->clients->prev = c;
	h->clients = c;
	h->nclients++;
	if (h->nclients == 1)
		uv_timer_start(&h->tick, httpd_tick, HTTPD_TICK_MS, HTTPD_TICK_MS);
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, httpd_alloc, httpd_read) < 0)
		httpd_client_close(c);
}

static void
httpd_handle_closed(uv_handle_t *handle)
{
	struct httpd *h = handle->data;

	h->open_handles--;
	httpd_maybe_free(h);
}

int
httpd_open(uv_loop_t *loop, const char *addr, httpd_render_fn render, void *arg,
    struct httpd **out, struct errbuf *err)
{
	char host[256], port[ADDR_PORT_LEN];
	struct sockaddr_storage ss;
	struct httpd *h;
	int rc;

	if (addr_split(addr, host, sizeof(host), port) < 0)
		return errbuf_set(err, -EINVAL, "metrics_listen: %s is not HOST:PORT", addr);
	if (uv_ip4_addr(host, atoi(port), (struct sockaddr_in *)&ss) < 0 &&
	    uv_ip6_addr(host, atoi(port), (struct sockaddr_in6 *)&ss) < 0)
		return errbuf_set(err, -EINVAL, "metrics_listen: %s: HOST must be a numeric "
		    "IPv4 address or a bracketed IPv6 address", addr);
	h = xcalloc(1, sizeof(*h));
	h->loop = loop;
	h->render = render;
	h->arg = arg;
	uv_tcp_init(loop, &h->listener);
	uv_timer_init(loop, &h->tick);
	h->listener.data = h->tick.data = h;
	h->open_handles = 2;
	rc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&h->listener, 64, httpd_connection);
	if (rc < 0) {
		/* "address in use", as the transport says it: scripts look for it. */
		errbuf_set(err, rc, "metrics_listen: cannot listen on %s: %s", addr,
		    rc == UV_EADDRINUSE ? "address in use" : uv_strerror(rc));
		httpd_close(h);
		return rc;
	}
	log_info("metrics: serving http://%s/metrics", addr);
	*out = h;
	return 0;
}

void
httpd_close(struct httpd *h)
{
	struct httpd_client *c;

	if (h == NULL || h->closing)
		return;
	h->closing = 1;
	for (c = h->clients; c != NULL; c = c->next)
		httpd_client_close(c);
	uv_close((uv_handle_t *)&h->listener, httpd_handle_closed);
	uv_close((uv_handle_t *)&h->tick, httpd_handle_closed);
}

int
httpd_stats_json(const struct httpd *h, json_t *obj)
{
	json_t *codes = json_object(), *o;
	char code[8];

	for (size_t i = 0; i < HTTPD_NCODES; i++) {
		snprintf(code, sizeof(code), "%d", httpd_codes[i].code);
		json_object_set_new(codes, code, json_integer((json_int_t)h->answered[i]));
	}
	o = json_pack("{s:o, s:I, s:I}", "requests", codes, "closed_slow",
	    (json_int_t)h->closed_slow, "evicted", (json_int_t)h->evicted);
	if (o == NULL || json_object_set_new(obj, "http", o) < 0)
		return -ENOMEM;
	return 0;
}
