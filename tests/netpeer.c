/*
 * netpeer: a real transport endpoint for the transport tests, built on the
 * same modules as the daemon. It always serves (echoes ECHO requests,
 * verifies the content of everything it gets) and, depending on options:
 *
 *   --peers A,B        sends every size of --sizes to each peer as an echo
 *                      request and checks the echoes byte for byte
 *   --go FILE          ... once FILE exists (a test creates it when every
 *                      peer is up, so that no handshake waits on a start)
 *   --expect-fail      ... and expects every one of those sends to fail
 *   --kill-test V,T    streams 64 MiB messages to V and small ones to T,
 *                      reports when V goes down and waits for it to return
 *   --evil V           speaks to V with wire+session+fabric directly and
 *                      sends every kind of bad message, then good ones
 *   --raw TYPE:FILE    sends FILE's bytes as one message of TYPE to each
 *                      of --peers (a crafted protocol message for a real
 *                      daemon), prints every answer's type and first
 *                      bytes, and is done once each peer answered once
 *
 * It exits once its own work is done and --expect-done peers said DONE,
 * printing "stats {json}" (transport counters plus what it delivered).
 * "netpeer keygen FILE" writes a key file with session_key_generate.
 * Exit: 0 pass, 1 failure, 2 usage, 3 listen address in use.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "addr.h"
#include "fabric.h"
#include "log.h"
#include "session.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

#define T_ECHO_REQ	64
#define T_ECHO_REP	65
#define T_DONE		66
#define T_SINK		67

#define MAX_PEERS	8
#define MAX_SIZES	32
#define BIG		((size_t)64 << 20)

static const size_t default_sizes[] = {
	0, 1, 7, 8, 100, 1000, 16000, 16384, 100000, 1048575, 1048576,
	1048577, 4194304, 67108864,
};

struct peerstat {
	char		addr[WIRE_ADDR_MAX + 1];
	int		echoed[MAX_SIZES];
	int		acked, failed;
	int		done_sent;
};

static struct {
	uv_loop_t	*loop;
	struct transport *t;
	uv_timer_t	timer, deadline;
	uv_signal_t	sigterm, sigint;
	uint64_t	id;
	char		listen[WIRE_ADDR_MAX + 1];
	uint8_t		key[SESSION_KEY_SIZE];
	const char	*job;
	uint64_t	max_size;
	unsigned	timeout_ms;

	struct peerstat	peers[MAX_PEERS];
	int		npeers;
	size_t		sizes[MAX_SIZES];
	int		nsizes;
	int		expect_fail;
	int		expect_done;
	int		linger_s;
	const char	*go;		/* sends wait for this file; NULL once sent */

	int		done_got;
	int		bad_content;
	int		delivered;
	json_t		*from;		/* sender id -> messages delivered */
	int		finished;	/* own work done */
	int		failed;
	int		closing;
	double		finish_time;

	/* --kill-test */
	char		victim[WIRE_ADDR_MAX + 1];
	char		third[WIRE_ADDR_MAX + 1];
	int		phase;
	int		victim_busy, third_busy;
	int		progress;
	int		third_ok_down;
	double		victim_sent_at;
	uint8_t		*big;

	/* --raw */
	uint8_t		raw_type;
	uint8_t		*raw;
	size_t		raw_len;
	int		raw_sent, raw_answers;
} g;

/* --- content patterns --------------------------------------------------- */

static uint64_t
xs_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Bytes of a message of n bytes: an 8-byte seed, then its stream. */
static void
pattern_fill(uint8_t *buf, size_t n, uint64_t seed)
{
	uint64_t s, v;
	size_t i;

	if (n < 8) {
		for (i = 0; i < n; i++)
			buf[i] = (uint8_t)(i * 31 + n);
		return;
	}
	wire_put_u64(buf, seed);
	s = seed ^ n ^ 0x9e3779b97f4a7c15ull;
	for (i = 8; i + 8 <= n; i += 8) {
		v = xs_next(&s);
		memcpy(buf + i, &v, 8);
	}
	v = xs_next(&s);
	memcpy(buf + i, &v, n - i);
}

static int
pattern_check(const uint8_t *buf, size_t n, uint64_t *seed)
{
	uint64_t s, v;
	size_t i;

	*seed = 0;
	if (n < 8) {
		for (i = 0; i < n; i++)
			if (buf[i] != (uint8_t)(i * 31 + n))
				return -1;
		return 0;
	}
	*seed = wire_get_u64(buf);
	s = *seed ^ n ^ 0x9e3779b97f4a7c15ull;
	for (i = 8; i + 8 <= n; i += 8) {
		v = xs_next(&s);
		if (memcmp(buf + i, &v, 8) != 0)
			return -1;
	}
	v = xs_next(&s);
	return memcmp(buf + i, &v, n - i) == 0 ? 0 : -1;
}

static uint64_t
seed_of(int peer, int size_idx)
{
	return (g.id << 32) | ((uint64_t)peer << 16) | (uint64_t)size_idx;
}

/* --- finishing ---------------------------------------------------------- */

static void evil_stop(void);

static void
on_closed(void *arg)
{
	(void)arg;
	evil_stop();
	uv_close((uv_handle_t *)&g.timer, NULL);
	uv_close((uv_handle_t *)&g.deadline, NULL);
	uv_close((uv_handle_t *)&g.sigterm, NULL);
	uv_close((uv_handle_t *)&g.sigint, NULL);
}

static void
shutdown_peer(void)
{
	json_t *o;
	char *s;

	if (g.closing)
		return;
	g.closing = 1;
	o = json_object();
	transport_stats_json(g.t, o);
	json_object_set_new(o, "delivered", json_integer(g.delivered));
	json_object_set_new(o, "bad_content", json_integer(g.bad_content));
	json_object_set(o, "from", g.from);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	printf("stats %s\n", s);
	fflush(stdout);
	free(s);
	json_decref(o);
	transport_close(g.t, on_closed, NULL);
}

static void
fail(const char *what, const char *detail)
{
	printf("FAIL %s%s\n", what, detail != NULL ? detail : "");
	g.failed = 1;
	shutdown_peer();
}

static void
check_finish(void)
{
	int i;

	if (g.closing || !g.finished || g.done_got < g.expect_done)
		return;
	for (i = 0; i < g.npeers; i++)
		if (g.peers[i].done_sent == 1)
			return;
	if (g.finish_time == 0) {
		g.finish_time = util_now();
		printf("finished\n");
		fflush(stdout);
	}
	if (util_now() - g.finish_time < g.linger_s)
		return;
	shutdown_peer();
}

static void
on_done_sent(void *arg, int status)
{
	struct peerstat *ps = arg;

	ps->done_sent = status == 0 ? 2 : 3;
	if (status != 0 && !g.expect_fail)
		printf("note: DONE to %s failed: %s\n", ps->addr,
		    strerror(-status));
	check_finish();
}

static void
send_dones(void)
{
	int i;

	for (i = 0; i < g.npeers; i++) {
		g.peers[i].done_sent = 1;
		if (transport_send(g.t, g.peers[i].addr, T_DONE, NULL, 0,
		    on_done_sent, &g.peers[i]) != 0)
			g.peers[i].done_sent = 3;
	}
}

/* --- echo mode ---------------------------------------------------------- */

static void
check_sends(void)
{
	int i, j, pending = 0, bad = 0;

	if (g.finished || g.victim[0] != '\0')
		return;
	for (i = 0; i < g.npeers; i++) {
		struct peerstat *ps = &g.peers[i];

		if (ps->acked + ps->failed < g.nsizes)
			pending = 1;
		for (j = 0; j < g.nsizes && !g.expect_fail; j++)
			if (!ps->echoed[j])
				pending = 1;
		bad += g.expect_fail ? ps->acked : ps->failed;
	}
	if (pending)
		return;
	g.finished = 1;
	if (bad != 0) {
		fail(g.expect_fail ? "a send succeeded with a bad key" :
		    "a send failed", NULL);
		return;
	}
	printf("sends complete\n");
	fflush(stdout);
	if (!g.expect_fail)
		send_dones();
	check_finish();
}

static void
on_echo_sent(void *arg, int status)
{
	struct peerstat *ps = arg;

	if (status == 0)
		ps->acked++;
	else {
		ps->failed++;
		printf("send to %s: %s\n", ps->addr, strerror(-status));
	}
	check_sends();
}

static void
start_sends(void)
{
	int i, j, rc;
	uint8_t *buf;

	for (i = 0; i < g.npeers; i++)
		for (j = 0; j < g.nsizes; j++) {
			buf = malloc(g.sizes[j] ? g.sizes[j] : 1);
			if (buf == NULL) {
				fail("out of memory", NULL);
				return;
			}
			pattern_fill(buf, g.sizes[j], seed_of(i, j));
			rc = transport_send(g.t, g.peers[i].addr, T_ECHO_REQ,
			    buf, g.sizes[j], on_echo_sent, &g.peers[i]);
			free(buf);
			if (rc != 0) {
				fail("transport_send: ", strerror(-rc));
				return;
			}
		}
}

/* --- raw mode ----------------------------------------------------------- */

static void
raw_check(void)
{
	if (g.finished || g.raw_sent < g.npeers || g.raw_answers < g.npeers)
		return;
	g.finished = 1;
	check_finish();
}

static void
on_raw_sent(void *arg, int status)
{
	struct peerstat *ps = arg;

	printf("raw to %s: %s\n", ps->addr, status == 0 ? "delivered" : strerror(-status));
	fflush(stdout);
	if (status != 0)
		g.failed = 1;
	g.raw_sent++;
	raw_check();
}

static int
raw_load(const char *arg)
{
	char *colon;
	long type;
	FILE *f;

	if ((colon = strchr(arg, ':')) == NULL)
		return -EINVAL;
	*colon = '\0';
	if (util_parse_long(arg, 0, 255, &type) != 0 || (f = fopen(colon + 1, "rb")) == NULL)
		return -EINVAL;
	g.raw_type = (uint8_t)type;
	if (fseek(f, 0, SEEK_END) == 0 && (g.raw_len = (size_t)ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (g.raw = malloc(g.raw_len)) != NULL &&
	    fread(g.raw, 1, g.raw_len, f) != g.raw_len) {
		free(g.raw);
		g.raw = NULL;
	}
	fclose(f);
	return g.raw != NULL ? 0 : -EINVAL;
}

static void
raw_sends(void)
{
	for (int i = 0; i < g.npeers; i++)
		if (transport_send(g.t, g.peers[i].addr, g.raw_type, g.raw, g.raw_len,
		    on_raw_sent, &g.peers[i]) != 0) {
			fail("transport_send failed", NULL);
			return;
		}
}

static void
on_echo_reply(const uint8_t *p, size_t len)
{
	uint64_t seed;
	int peer, idx;

	if (pattern_check(p, len, &seed) != 0) {
		g.bad_content++;
		fail("echo content differs", NULL);
		return;
	}
	if (len < 8) {
		for (peer = 0; peer < g.npeers; peer++)
			for (idx = 0; idx < g.nsizes; idx++)
				if (g.sizes[idx] == len &&
				    !g.peers[peer].echoed[idx]) {
					g.peers[peer].echoed[idx] = 1;
					goto out;
				}
		goto out;
	}
	peer = (int)((seed >> 16) & 0xffff);
	idx = (int)(seed & 0xffff);
	if ((seed >> 32) != (g.id & 0xffffffff) || peer >= g.npeers ||
	    idx >= g.nsizes || g.sizes[idx] != len) {
		g.bad_content++;
		fail("echo of something never sent", NULL);
		return;
	}
	g.peers[peer].echoed[idx] = 1;
out:
	check_sends();
}

/* --- kill test ---------------------------------------------------------- */

static void kill_step(void);

static void
on_victim_sent(void *arg, int status)
{
	size_t len = (size_t)(uintptr_t)arg;

	g.victim_busy = 0;
	if (status == 0) {
		if (g.phase == 0) {
			printf("progress %d\n", ++g.progress);
		} else if (g.phase == 1) {
			printf("victim-back\n");
			g.phase = 2;
		} else if (g.phase == 2 && len == BIG) {
			printf("victim big transfer ok\n");
			g.phase = 3;
		}
	} else if (g.phase == 0) {
		printf("victim-down status=%s after=%.3f\n", strerror(-status),
		    util_now() - g.victim_sent_at);
		g.phase = 1;
	}
	fflush(stdout);
	kill_step();
}

static void
on_third_sent(void *arg, int status)
{
	(void)arg;
	g.third_busy = 0;
	if (status != 0) {
		fail("third peer failed: ", strerror(-status));
		return;
	}
	if (g.phase == 1)
		g.third_ok_down++;
}

static void
kill_step(void)
{
	uint8_t small[100];
	size_t len;

	if (g.closing || g.finished)
		return;
	if (g.phase == 3) {
		if (g.third_ok_down == 0) {
			fail("third peer saw no traffic while victim down", NULL);
			return;
		}
		g.finished = 1;
		g.npeers = 2;
		strcpy(g.peers[0].addr, g.victim);
		strcpy(g.peers[1].addr, g.third);
		send_dones();
		check_finish();
		return;
	}
	if (!g.third_busy) {
		pattern_fill(small, sizeof(small), 1);
		if (transport_send(g.t, g.third, T_SINK, small, sizeof(small),
		    on_third_sent, NULL) == 0)
			g.third_busy = 1;
	}
	if (!g.victim_busy) {
		len = (g.phase == 1) ? sizeof(small) : BIG;
		if (g.phase == 1)
			pattern_fill(small, len, 2);
		if (transport_send(g.t, g.victim, T_SINK, g.phase == 1 ? small :
		    g.big, len, on_victim_sent, (void *)(uintptr_t)len) == 0) {
			g.victim_busy = 1;
			g.victim_sent_at = util_now();
		}
	}
}

/* --- receiving and timers ------------------------------------------------ */

static void
on_echo_back(void *arg, int status)
{
	(void)arg;
	if (status != 0)
		printf("echo reply failed: %s\n", strerror(-status));
}

/* netpeer takes every application type, unnamed. */
static const char *const netpeer_type_names[256 - WIRE_TYPE_APP_MIN];
static const struct proto netpeer_proto = {
	"netpeer", WIRE_TYPE_APP_MIN, 255, netpeer_type_names
};

static void
on_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *p, size_t len)
{
	char key[32];
	json_t *n;
	uint64_t seed;

	(void)arg;
	g.delivered++;
	snprintf(key, sizeof(key), "%016" PRIx64, sender);
	n = json_object_get(g.from, key);
	json_object_set_new(g.from, key,
	    json_integer(n ? json_integer_value(n) + 1 : 1));
	switch (type) {
	case T_ECHO_REQ:
		if (pattern_check(p, len, &seed) != 0)
			g.bad_content++;
		transport_send(g.t, addr, T_ECHO_REP, p, len, on_echo_back,
		    NULL);
		break;
	case T_ECHO_REP:
		on_echo_reply(p, len);
		break;
	case T_SINK:
		if (pattern_check(p, len, &seed) != 0)
			g.bad_content++;
		break;
	case T_DONE:
		g.done_got++;
		check_finish();
		break;
	default:
		if (g.raw == NULL) {
			g.bad_content++;
			break;
		}
		printf("answer type %u len %zu:", type, len);
		for (size_t i = 0; i < len && i < 16; i++)
			printf(" %02x", p[i]);
		printf("\n");
		fflush(stdout);
		g.raw_answers++;
		raw_check();
	}
}

static void
on_peer_down(void *arg, const char *addr, uint64_t id, int status)
{
	(void)arg;
	printf("peer-down %s %016" PRIx64 " %s\n", addr, id, strerror(-status));
	fflush(stdout);
}

static void
on_timer(uv_timer_t *h)
{
	(void)h;
	if (g.victim[0] != '\0')
		kill_step();
	if (g.go != NULL && access(g.go, F_OK) == 0) {
		g.go = NULL;
		start_sends();
	}
	check_finish();
}

static void
on_deadline(uv_timer_t *h)
{
	(void)h;
	fail("overall deadline passed", NULL);
}

static void
on_signal(uv_signal_t *h, int sig)
{
	(void)h;
	(void)sig;
	shutdown_peer();
}

/* --- evil mode ----------------------------------------------------------- */

/*
 * The evil peer owns a bare fabric endpoint and its own session with the
 * victim. Steps run one per timer tick once the handshake is done; a step
 * that needs an ACK first waits for it.
 */
static struct {
	struct fabric		*f;
	struct session_ctx	ctx;
	struct session_hs	hs;
	struct session		s;
	fi_addr_t		victim;
	int			ready;
	int			step;
	uint64_t		wait_seq;	/* ACK awaited, 0 if none */
	int			good_acked;
	uint8_t			replay[256];
	size_t			replay_len;
} ev;

struct evop {
	struct fabric_op	op;
	uint8_t			data[];
};

static void
on_evop(struct fabric_op *op, int status, size_t len)
{
	(void)status;
	(void)len;
	free(op);
}

static void
evil_post(enum fabric_op_kind kind, const uint8_t *buf, size_t len,
    uint64_t tag)
{
	struct evop *e = xmalloc(sizeof(*e) + len);

	memset(&e->op, 0, sizeof(e->op));
	memcpy(e->data, buf, len);
	e->op.cb = on_evop;
	e->op.kind = kind;
	e->op.buf = e->data;
	e->op.len = len;
	e->op.addr = ev.victim;
	e->op.tag = tag;
	if (fabric_post(ev.f, &e->op) != 0) {
		free(e);
		fail("evil: post failed", NULL);
	}
}

static void
evil_header(struct wire_header *h, uint8_t type, uint64_t len, int inl)
{
	memset(h, 0, sizeof(*h));
	h->version = WIRE_VERSION;
	h->type = type;
	h->flags = inl ? WIRE_F_INLINE : 0;
	h->job = ev.ctx.lim.job;
	h->sender = ev.ctx.self_id;
	h->receiver = ev.s.peer_id;
	h->seq = session_next_seq(&ev.s);
	h->payload_len = len;
	h->chunk_count = inl ? 0 : wire_chunk_count(len);
}

/* Seal an inline frame of len pattern bytes into out; returns its size. */
static size_t
evil_inline(const struct wire_header *h, uint8_t *out)
{
	uint8_t pl[128];

	pattern_fill(pl, (size_t)h->payload_len, h->seq);
	wire_header_encode(h, out);
	session_seal(&ev.s, out, h->seq, 0, pl, (size_t)h->payload_len,
	    out + WIRE_HEADER_SIZE);
	return WIRE_HEADER_SIZE + (size_t)h->payload_len + WIRE_MAC_SIZE;
}

/* Seal h as an inline frame and send it, says what; mode 0 as sealed,
 * 1 truncated, 2 tampered. */
static void
evil_small(const struct wire_header *h, int mode, const char *what)
{
	uint8_t fr[WIRE_HEADER_SIZE + 128 + WIRE_MAC_SIZE];
	size_t n = evil_inline(h, fr);

	if (mode == 2)
		fr[WIRE_HEADER_SIZE + 10] ^= 1;
	evil_post(FABRIC_OP_SEND, fr, mode == 1 ? n - 5 : n, 0);
	printf("evil: %s\n", what);
}

/* A sealed header that announces a body of len bytes, and no body. */
static void
evil_announce(uint64_t len)
{
	struct wire_header h;
	uint8_t fr[WIRE_HEADER_SIZE + WIRE_MAC_SIZE];

	evil_header(&h, T_SINK, len, 0);
	wire_header_encode(&h, fr);
	session_seal(&ev.s, fr, h.seq, 0, NULL, 0, fr + WIRE_HEADER_SIZE);
	evil_post(FABRIC_OP_SEND, fr, sizeof(fr), 0);
}

/* Send a message with a body, says what; mode 0 good, 1 truncated body
 * (its last chunk), 2 tampered (its middle chunk). */
static void
evil_big(uint8_t type, size_t len, int mode, const char *what)
{
	struct wire_header h;
	uint8_t fr[WIRE_HEADER_SIZE + WIRE_MAC_SIZE], ad[WIRE_HEADER_SIZE];
	uint8_t *pl, *body;
	size_t bsize = wire_body_size(len);
	uint32_t i;

	evil_header(&h, type, len, 0);
	pl = xmalloc(len);
	body = xmalloc(bsize);
	pattern_fill(pl, len, h.seq);
	wire_header_encode(&h, fr);
	session_seal(&ev.s, fr, h.seq, 0, NULL, 0, fr + WIRE_HEADER_SIZE);
	evil_post(FABRIC_OP_SEND, fr, sizeof(fr), 0);
	for (i = 0; i < h.chunk_count; i++) {
		size_t off = (size_t)i * WIRE_CHUNK_SIZE;
		size_t at = off + (size_t)i * WIRE_MAC_SIZE;
		size_t clen = wire_chunk_len(len, i);

		h.chunk_index = i + 1;
		wire_header_encode(&h, ad);
		session_seal(&ev.s, ad, h.seq, i + 1, pl + off, clen, body + at);
		if (mode == 2 && i == h.chunk_count / 2)
			body[at + clen / 2] ^= 0x40;
		/* Truncated: the last chunk comes half short. */
		evil_post(FABRIC_OP_TSEND, body + at, mode == 1 &&
		    i + 1 == h.chunk_count ? (clen + WIRE_MAC_SIZE) / 2 :
		    clen + WIRE_MAC_SIZE, session_body_tag(&ev.s, h.seq, i, 1));
	}
	if (mode == 0)
		ev.wait_seq = h.seq;
	printf("evil: %s\n", what);
	free(pl);
	free(body);
}

static void
evil_step(void)
{
	struct wire_header h;
	uint8_t fr[20000];
	size_t n;

	if (!ev.ready || ev.wait_seq != 0 || g.closing)
		return;
	memset(fr, 0, sizeof(fr));
	switch (ev.step++) {
	case 0:		/* a good message, kept for the replay */
		evil_header(&h, T_SINK, 100, 1);
		ev.replay_len = evil_inline(&h, ev.replay);
		evil_post(FABRIC_OP_SEND, ev.replay, ev.replay_len, 0);
		ev.wait_seq = h.seq;
		printf("evil: good message\n");
		break;
	case 1:
		evil_post(FABRIC_OP_SEND, ev.replay, ev.replay_len, 0);
		printf("evil: replayed\n");
		break;
	case 2:
		evil_header(&h, T_SINK, 100, 1);
		evil_small(&h, 2, "tampered");
		break;
	case 3:
		evil_header(&h, T_SINK, 100, 1);
		evil_small(&h, 1, "truncated");
		break;
	case 4:		/* announces more than max_message_size */
		evil_announce(ev.ctx.lim.max_message_size + 1);
		printf("evil: oversize header\n");
		break;
	case 5:		/* a frame bigger than any receive buffer */
		evil_header(&h, T_SINK, sizeof(fr) - WIRE_HEADER_SIZE -
		    WIRE_MAC_SIZE, 1);
		wire_header_encode(&h, fr);
		evil_post(FABRIC_OP_SEND, fr, sizeof(fr), 0);
		printf("evil: oversize frame\n");
		break;
	case 6:
		evil_header(&h, T_SINK, 100, 1);
		h.version = WIRE_VERSION + 1;
		evil_small(&h, 0, "wrong version");
		break;
	case 7:
		evil_header(&h, T_SINK, 100, 1);
		h.job ^= 1;
		evil_small(&h, 0, "wrong job");
		break;
	case 8:
		evil_header(&h, T_SINK, 100, 1);
		h.sender = 0xdeadbeef;
		evil_small(&h, 0, "unknown sender");
		break;
	case 9:
		evil_post(FABRIC_OP_SEND, (const uint8_t *)"garbage!!", 9, 0);
		randombytes_buf(fr, 300);
		evil_post(FABRIC_OP_SEND, fr, 300, 0);
		printf("evil: garbage frames\n");
		break;
	case 10:
		evil_big(T_SINK, 2 * WIRE_CHUNK_SIZE + 5, 1, "truncated body");
		break;
	case 11:
		evil_big(T_SINK, 2 * WIRE_CHUNK_SIZE + 5, 2, "tampered body");
		break;
	case 12:
		evil_big(T_SINK, 2 * WIRE_CHUNK_SIZE + 7, 0, "good big message");
		break;
	case 13:	/* more announced bodies than the receiver holds */
		for (n = 0; n < 3; n++)
			evil_announce(ev.ctx.lim.max_message_size);
		printf("evil: 3 bodies of max_message_size announced\n");
		break;
	case 14:
		evil_header(&h, T_DONE, 0, 1);
		evil_small(&h, 0, "done");
		ev.wait_seq = h.seq;
		break;
	default:
		g.finished = 1;
		shutdown_peer();
	}
	fflush(stdout);
}

static void
evil_frame(void *arg, const uint8_t *buf, size_t len, int status)
{
	struct wire_header h;
	struct wire_hello hl;
	enum wire_reject why;
	uint8_t pl[WIRE_ACK_SIZE];

	(void)arg;
	if (status != 0 || wire_frame_decode(buf, len, &ev.ctx.lim, &h,
	    &why) != 0)
		return;
	if (h.type == WIRE_T_HELLO_ACK && !ev.ready) {
		if (session_hello_finish(&ev.ctx, &ev.hs, buf, len, &h, &hl,
		    &ev.s) != 0) {
			fail("evil: handshake failed", NULL);
			return;
		}
		ev.ready = 1;
		printf("evil: session up with %016" PRIx64 "\n", h.sender);
		return;
	}
	if (h.type != WIRE_T_ACK || !ev.ready || h.payload_len != 8)
		return;
	if (session_replay_check(&ev.s, h.seq) != 0 ||
	    session_open(&ev.s, buf, h.seq, 0, buf + WIRE_HEADER_SIZE,
	    WIRE_ACK_SIZE + WIRE_MAC_SIZE, pl) != 0) {
		fail("evil: bad ack", NULL);
		return;
	}
	session_replay_update(&ev.s, h.seq);
	if (wire_get_u64(pl) == ev.wait_seq) {
		printf("evil: acked %" PRIu64 "\n", ev.wait_seq);
		ev.wait_seq = 0;
		ev.good_acked++;
	} else
		fail("evil: a bad message was acknowledged", NULL);
	fflush(stdout);
}

static void
on_evil_timer(uv_timer_t *h)
{
	(void)h;
	evil_step();
}

static void
evil_closed(void *arg)
{
	(void)arg;
}

static void
evil_stop(void)
{
	if (ev.f == NULL)
		return;
	fabric_close(ev.f, evil_closed, NULL);
	ev.f = NULL;
	session_wipe(&ev.s);
	session_hs_wipe(&ev.hs);
	session_ctx_wipe(&ev.ctx);
}

static int
evil_start(const char *victim, struct errbuf *err)
{
	struct fabric_params fp;
	char host[WIRE_ADDR_MAX + 1], port[16], vh[WIRE_ADDR_MAX + 1], vp[16];
	uint8_t bad[SESSION_HELLO_FRAME_MAX];
	int rc;

	/* The evil endpoint listens one port above the transport's. */
	if (addr_split(g.listen, host, sizeof(host), port) != 0 ||
	    addr_split(victim, vh, sizeof(vh), vp) != 0)
		return errbuf_set(err, -EINVAL, "bad address");
	snprintf(port, sizeof(port), "%d", atoi(port) + 1);
	memset(&fp, 0, sizeof(fp));
	fp.host = host;
	fp.port = port;
	fp.frame_size = WIRE_FRAME_MAX;
	fp.rx_depth = 8;
	if ((rc = fabric_open(g.loop, &fp, evil_frame, NULL, &ev.f, err)) != 0)
		return rc;
	if ((rc = fabric_insert(ev.f, vh, vp, &ev.victim, err)) != 0)
		return rc;
	session_ctx_init(&ev.ctx, g.key, g.job, g.id + 1000, g.max_size);
	snprintf(host + strlen(host), sizeof(host) - strlen(host), ":%s", port);
	session_hello_make(&ev.ctx, &ev.hs, host, 0);
	/* First a HELLO with a broken MAC: a handshake failure. */
	memcpy(bad, ev.hs.hello, ev.hs.hello_len);
	bad[ev.hs.hello_len - 1] ^= 1;
	evil_post(FABRIC_OP_SEND, bad, ev.hs.hello_len, 0);
	evil_post(FABRIC_OP_SEND, ev.hs.hello, ev.hs.hello_len, 0);
	return 0;
}

/* --- main ---------------------------------------------------------------- */

static int
split_list(char *s, char out[][WIRE_ADDR_MAX + 1], int max)
{
	char *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(s, ",", &save); tok != NULL && n < max;
	    tok = strtok_r(NULL, ",", &save))
		snprintf(out[n++], WIRE_ADDR_MAX + 1, "%s", tok);
	return n;
}

static void
usage(void)
{
	fprintf(stderr, "usage: netpeer --listen H:P --key FILE --job NAME "
	    "--id N [--provider P] [--timeout MS] [--max-size N]\n"
	    "  [--peers A,B] [--sizes N,M] [--expect-fail] [--expect-done N]\n"
	    "  [--linger S] [--deadline S] [--kill-test V,T] [--evil V] [--raw TYPE:FILE]\n"
	    "  [--go FILE]\n");
	exit(2);
}

/* A number argument in [lo, hi]; anything else is a usage error. */
static long
long_arg(const char *s, long lo, long hi)
{
	long v;

	if (util_parse_long(s, lo, hi, &v) != 0)
		usage();
	return v;
}

static uint64_t
u64_arg(const char *s)
{
	uint64_t v;

	if (util_parse_u64(s, &v) != 0)
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "key", required_argument, NULL, 'k' },
		{ "job", required_argument, NULL, 'j' },
		{ "id", required_argument, NULL, 'i' },
		{ "provider", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "max-size", required_argument, NULL, 'm' },
		{ "peers", required_argument, NULL, 'P' },
		{ "sizes", required_argument, NULL, 's' },
		{ "expect-fail", no_argument, NULL, 'F' },
		{ "expect-done", required_argument, NULL, 'd' },
		{ "linger", required_argument, NULL, 'L' },
		{ "deadline", required_argument, NULL, 'D' },
		{ "kill-test", required_argument, NULL, 'K' },
		{ "evil", required_argument, NULL, 'E' },
		{ "raw", required_argument, NULL, 'R' },
		{ "go", required_argument, NULL, 'G' },
		{ NULL, 0, NULL, 0 },
	};
	struct transport_params tp;
	struct errbuf err;
	char list[MAX_PEERS][WIRE_ADDR_MAX + 1];
	char *keyfile = NULL, *provider = NULL, *evil = NULL, *tok, *save;
	long deadline_s = 60;
	int c, i, rc;

	log_set_level(getenv("NETPEER_DEBUG") ? LOG_DEBUG : LOG_WARN);
	if (argc == 3 && strcmp(argv[1], "keygen") == 0) {
		if (session_key_generate(argv[2], &err) != 0) {
			fprintf(stderr, "netpeer: %s\n", err.msg);
			return 1;
		}
		return 0;
	}
	g.loop = uv_default_loop();
	g.job = "test";
	g.timeout_ms = 2000;
	for (i = 0; i < (int)GD_ARRAY_SIZE(default_sizes); i++)
		g.sizes[g.nsizes++] = default_sizes[i];
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			snprintf(g.listen, sizeof(g.listen), "%s", optarg);
			break;
		case 'k':
			keyfile = optarg;
			break;
		case 'j':
			g.job = optarg;
			break;
		case 'i':
			g.id = u64_arg(optarg);
			break;
		case 'p':
			provider = optarg;
			break;
		case 't':
			g.timeout_ms = (unsigned)long_arg(optarg, 1, 600000);
			break;
		case 'm':
			g.max_size = u64_arg(optarg);
			break;
		case 'P':
			g.npeers = split_list(optarg, list, MAX_PEERS);
			for (i = 0; i < g.npeers; i++)
				strcpy(g.peers[i].addr, list[i]);
			break;
		case 's':
			g.nsizes = 0;
			save = NULL;
			for (tok = strtok_r(optarg, ",", &save); tok != NULL &&
			    g.nsizes < MAX_SIZES; tok = strtok_r(NULL, ",", &save)) {
				g.sizes[g.nsizes++] = (size_t)long_arg(tok, 0, 1L << 30);
			}
			break;
		case 'F':
			g.expect_fail = 1;
			break;
		case 'd':
			g.expect_done = (int)long_arg(optarg, 0, 100);
			break;
		case 'L':
			g.linger_s = (int)long_arg(optarg, 0, 3600);
			break;
		case 'D':
			deadline_s = long_arg(optarg, 1, 3600);
			break;
		case 'K':
			if (split_list(optarg, list, 2) != 2)
				usage();
			strcpy(g.victim, list[0]);
			strcpy(g.third, list[1]);
			break;
		case 'E':
			evil = optarg;
			break;
		case 'R':
			if (raw_load(optarg) != 0)
				usage();
			break;
		case 'G':
			g.go = optarg;
			break;
		default:
			usage();
		}
	}
	if (g.listen[0] == '\0' || keyfile == NULL || g.id == 0)
		usage();
	if (session_key_load(keyfile, g.key, &err) != 0) {
		fprintf(stderr, "netpeer: %s\n", err.msg);
		return 1;
	}
	memset(&tp, 0, sizeof(tp));
	tp.listen = g.listen;
	tp.provider = provider;
	tp.key = g.key;
	tp.job = g.job;
	tp.self_id = g.id;
	tp.max_message_size = g.max_size;
	tp.op_timeout_ms = g.timeout_ms;
	rc = transport_open(g.loop, &tp, on_peer_down, NULL, &g.t, &err);
	if (rc == 0 && (rc = transport_register(g.t, &netpeer_proto, on_recv, NULL, &err)) < 0)
		transport_close(g.t, NULL, NULL);
	if (rc != 0) {
		fprintf(stderr, "netpeer: %s\n", err.msg);
		return rc == -EADDRINUSE ? 3 : 1;
	}
	if (g.max_size == 0)
		g.max_size = TRANSPORT_DEFAULT_MAX_MESSAGE;
	g.from = json_object();
	uv_timer_init(g.loop, &g.timer);
	uv_timer_init(g.loop, &g.deadline);
	uv_signal_init(g.loop, &g.sigterm);
	uv_signal_init(g.loop, &g.sigint);
	uv_signal_start(&g.sigterm, on_signal, SIGTERM);
	uv_signal_start(&g.sigint, on_signal, SIGINT);
	uv_timer_start(&g.deadline, on_deadline, (uint64_t)deadline_s * 1000,
	    0);
	if (evil != NULL) {
		if ((rc = evil_start(evil, &err)) != 0) {
			fprintf(stderr, "netpeer: evil: %s\n", err.msg);
			return rc == -EADDRINUSE ? 3 : 1;
		}
		uv_timer_start(&g.timer, on_evil_timer, 30, 30);
	} else if (g.victim[0] != '\0') {
		if ((g.big = malloc(BIG)) == NULL)
			return 1;
		pattern_fill(g.big, BIG, 3);
		uv_timer_start(&g.timer, on_timer, 50, 50);
	} else {
		uv_timer_start(&g.timer, on_timer, 200, 200);
		if (g.raw != NULL && g.npeers > 0)
			raw_sends();
		else if (g.npeers == 0)
			g.finished = 1;
		else if (g.go == NULL)
			start_sends();
	}
	printf("ready %s\n", g.listen);
	fflush(stdout);
	uv_run(g.loop, UV_RUN_DEFAULT);
	uv_loop_close(g.loop);
	json_decref(g.from);
	free(g.big);
	free(g.raw);
	sodium_memzero(g.key, sizeof(g.key));
	if (g.failed || g.bad_content)
		return 1;
	if (evil != NULL && ev.good_acked < 3) {
		printf("FAIL evil: only %d good messages acknowledged\n",
		    ev.good_acked);
		return 1;
	}
	return 0;
}
