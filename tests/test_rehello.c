/*
 * test_rehello: what a peer's second HELLO does to our outbound session
 * with it. V is a real transport that echoes; A is a bare fabric endpoint
 * that speaks wire and session itself, so that it can send, at a chosen
 * moment, the HELLOs a transport sends only by chance of timing:
 *
 *   1. a late copy of a HELLO it had abandoned (made before it answered
 *      V's HELLO, delivered after): V keeps its session;
 *   2. a HELLO that renews A's own direction while A holds V's session
 *      (as after A's handshake or messages to V timed out): V keeps it;
 *   3. the HELLO of a restart, which holds no session of V's: V must drop
 *      its session (A cannot open it any more) and handshake again.
 *
 * "Keeps" is seen by A: V's echo of A's next request comes without a new
 * HELLO from V and opens under the session A holds. Real endpoints on
 * loopback, one loop, no timing involved: each step waits for the answer
 * of the one before.
 *
 * rehello_lost: V's first HELLO to A goes unanswered (as one lost with a
 * connection torn down under it): V must send a fresh one after about a
 * second, not wait its whole deadline, and of A's two answers, the first
 * held back until the second HELLO came, take only the second's and drop
 * the first without counting it as a failed handshake.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "check.h"
#include "fabric.h"
#include "session.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

#define T_ECHO_REQ	64
#define T_ECHO_REP	65
#define JOB		"rehello"
#define V_ID		0x51
#define A_ID		0xa1
#define NSTEPS		4

static const char *const type_names[] = { "echo_req", "echo_rep" };
static const struct proto echo_proto = {
	"echo", T_ECHO_REQ, T_ECHO_REP, type_names
};

/* What A does before each step's HELLO, and how many HELLOs V must have
 * sent A once the step's echo is back. */
static const struct step {
	const char	*what;
	int		made_early;	/* HELLO made before V's first HELLO */
	int		holds_v;	/* the HELLO names V's session */
	int		forget_v;	/* A drops V's session first */
	int		hellos;
} steps[NSTEPS] = {
	{ "first contact",			1, 0, 0, 1 },
	{ "a late copy of an abandoned HELLO",	1, 0, 0, 1 },
	{ "a HELLO renewing A's direction",	0, 1, 0, 1 },
	{ "a HELLO after a restart",		0, 0, 1, 2 },
};

static struct {
	uv_loop_t		loop;
	uv_timer_t		deadline;
	struct transport	*v;
	char			v_addr[WIRE_ADDR_MAX + 1];

	struct fabric		*f;
	fi_addr_t		to_v;
	char			addr[WIRE_ADDR_MAX + 1];
	struct session_ctx	ctx;
	struct session_hs	hs[NSTEPS];
	struct session		out;	/* A -> V, from A's HELLO */
	struct session		in;	/* V -> A, from V's HELLO */
	int			in_ready;
	uint64_t		in_stamp;	/* V's HELLO behind in */
	int			hellos;		/* HELLOs from V */

	/* rehello_lost */
	int			lost;
	uint64_t		lost_hellos[2];	/* uv_now of V's HELLOs */
	uint8_t			held_ack[SESSION_HELLO_FRAME_MAX];
	size_t			held_len;
	int			req_opened;	/* under the second session */
	int			sent_status;
	json_int_t		refused;	/* V's handshake rejections */

	int			step;
	uint64_t		req_seq;
	uint8_t			req[32];
	int			acked, echoed;
	int			done;
} g;

struct aop {
	struct fabric_op	op;
	uint8_t			data[];
};

static void
on_aop(struct fabric_op *op, int status, size_t len)
{
	(void)status;
	(void)len;
	free(op);
}

static void
a_post(const uint8_t *buf, size_t len)
{
	struct aop *o = xmalloc(sizeof(*o) + len);

	memset(&o->op, 0, sizeof(o->op));
	memcpy(o->data, buf, len);
	o->op.cb = on_aop;
	o->op.kind = FABRIC_OP_SEND;
	o->op.buf = o->data;
	o->op.len = len;
	o->op.addr = g.to_v;
	REQUIRE(fabric_post(g.f, &o->op) == 0);
}

static void
closed(void *arg)
{
	(void)arg;
}

static void
finish(void)
{
	if (g.done)
		return;
	g.done = 1;
	uv_timer_stop(&g.deadline);
	uv_close((uv_handle_t *)&g.deadline, NULL);
	transport_close(g.v, closed, NULL);
	fabric_close(g.f, closed, NULL);
}

static void
fail(const char *what)
{
	CHECKF(0, "step %d (%s): %s", g.step, steps[g.step].what, what);
	finish();
}

/* Seal an inline frame of type under s and send it to V. */
static void
a_send(struct session *s, uint8_t type, const uint8_t *pl, size_t len,
    uint64_t *seq)
{
	struct wire_header h;
	uint8_t fr[WIRE_HEADER_SIZE + 64 + WIRE_MAC_SIZE];

	REQUIRE(len <= 64);
	memset(&h, 0, sizeof(h));
	h.version = WIRE_VERSION;
	h.type = type;
	h.flags = WIRE_F_INLINE;
	h.job = g.ctx.lim.job;
	h.sender = A_ID;
	h.receiver = V_ID;
	h.seq = session_next_seq(s);
	h.payload_len = len;
	wire_header_encode(&h, fr);
	REQUIRE(session_seal(s, fr, h.seq, 0, pl, len,
	    fr + WIRE_HEADER_SIZE) == 0);
	a_post(fr, WIRE_HEADER_SIZE + len + WIRE_MAC_SIZE);
	if (seq != NULL)
		*seq = h.seq;
}

static void
step_start(void)
{
	const struct step *st = &steps[g.step];

	if (st->forget_v) {
		session_wipe(&g.in);
		g.in_ready = 0;
	}
	if (!st->made_early)
		REQUIRE(session_hello_make(&g.ctx, &g.hs[g.step], g.addr,
		    st->holds_v ? g.in_stamp : 0) == 0);
	g.acked = g.echoed = 0;
	a_post(g.hs[g.step].hello, g.hs[g.step].hello_len);
}

static void
step_check(void)
{
	if (!g.acked || !g.echoed)
		return;
	if (g.hellos != steps[g.step].hellos) {
		fail(g.hellos > steps[g.step].hellos ?
		    "V dropped its session and said hello again" :
		    "V kept a session A lost");
		return;
	}
	printf("step %d, %s: V said hello %d time(s): ok\n", g.step,
	    steps[g.step].what, g.hellos);
	if (++g.step == NSTEPS) {
		finish();
		return;
	}
	step_start();
}

static void
on_hello(const uint8_t *buf, size_t len, const struct wire_header *h)
{
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	struct wire_hello hl;
	size_t ack_len;

	session_wipe(&g.in);
	if (session_hello_accept(&g.ctx, buf, len, h, g.addr, &hl, &g.in, ack,
	    &ack_len) != 0) {
		fail("V's HELLO does not authenticate");
		return;
	}
	g.in_ready = 1;
	g.in_stamp = hl.stamp;
	g.hellos++;
	a_post(ack, ack_len);
}

static void
on_hello_ack(const uint8_t *buf, size_t len, const struct wire_header *h)
{
	struct wire_hello hl;
	size_t i;

	session_wipe(&g.out);
	if (session_hello_finish(&g.ctx, &g.hs[g.step], buf, len, h, &hl,
	    &g.out) != 0) {
		fail("V's HELLO_ACK does not match A's HELLO");
		return;
	}
	for (i = 0; i < sizeof(g.req); i++)
		g.req[i] = (uint8_t)(g.step * 31 + i);
	a_send(&g.out, T_ECHO_REQ, g.req, sizeof(g.req), &g.req_seq);
}

static void
on_ack(const uint8_t *buf, const struct wire_header *h)
{
	uint8_t pl[WIRE_ACK_SIZE];

	if (h->payload_len != WIRE_ACK_SIZE ||
	    session_open(&g.out, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    WIRE_ACK_SIZE + WIRE_MAC_SIZE, pl) != 0) {
		fail("V's ACK does not open");
		return;
	}
	if (wire_get_u64(pl) == g.req_seq)
		g.acked = 1;
	step_check();
}

/* Open a frame of V's the size of a request under the session A holds
 * from V's HELLO into pl, and ACK it; else fail with why. */
static int
a_open_in(const uint8_t *buf, const struct wire_header *h,
    uint8_t pl[sizeof(g.req)], const char *why)
{
	uint8_t ack[WIRE_ACK_SIZE];

	if (h->payload_len != sizeof(g.req) || !g.in_ready ||
	    session_open(&g.in, buf, h->seq, 0, buf + WIRE_HEADER_SIZE,
	    sizeof(g.req) + WIRE_MAC_SIZE, pl) != 0) {
		fail(why);
		return -1;
	}
	wire_put_u64(ack, h->seq);
	a_send(&g.in, WIRE_T_ACK, ack, sizeof(ack), NULL);
	return 0;
}

static void
on_echo(const uint8_t *buf, const struct wire_header *h)
{
	uint8_t pl[sizeof(g.req)];

	if (a_open_in(buf, h, pl, "V's echo is not sealed under a session A holds") != 0)
		return;
	if (memcmp(pl, g.req, sizeof(pl)) != 0) {
		fail("V's echo differs from the request");
		return;
	}
	g.echoed = 1;
	step_check();
}

/* V's HELLOs in rehello_lost: the first answer is held back until the
 * second HELLO comes, then both go, the stale one first. */
static void
lost_hello(const uint8_t *buf, size_t len, const struct wire_header *h)
{
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	struct wire_hello hl;
	size_t ack_len;

	if (g.hellos == 2) {
		fail("V said hello a third time");
		return;
	}
	session_wipe(&g.in);
	if (session_hello_accept(&g.ctx, buf, len, h, g.addr, &hl, &g.in, ack,
	    &ack_len) != 0) {
		fail("V's HELLO does not authenticate");
		return;
	}
	g.lost_hellos[g.hellos++] = uv_now(&g.loop);
	if (g.hellos == 1) {
		memcpy(g.held_ack, ack, ack_len);
		g.held_len = ack_len;
		return;
	}
	g.in_ready = 1;
	a_post(g.held_ack, g.held_len);
	a_post(ack, ack_len);
}

/* V's request, which must come under the second HELLO's session. */
static void
lost_req(const uint8_t *buf, const struct wire_header *h)
{
	uint8_t pl[sizeof(g.req)];

	if (a_open_in(buf, h, pl, "V's request is not sealed under its second "
	    "HELLO's session") == 0)
		g.req_opened = 1;
}

static void
a_frame(void *arg, const uint8_t *buf, size_t len, int status)
{
	struct wire_header h;
	enum wire_reject why;

	(void)arg;
	if (g.done || status != 0)
		return;
	if (wire_frame_decode(buf, len, &g.ctx.lim, &h, &why) != 0) {
		fail("V sent a malformed frame");
		return;
	}
	if (g.lost && h.type == WIRE_T_HELLO) {
		lost_hello(buf, len, &h);
		return;
	}
	if (g.lost && h.type == T_ECHO_REQ) {
		lost_req(buf, &h);
		return;
	}
	switch (h.type) {
	case WIRE_T_HELLO:
		on_hello(buf, len, &h);
		break;
	case WIRE_T_HELLO_ACK:
		on_hello_ack(buf, len, &h);
		break;
	case WIRE_T_ACK:
		on_ack(buf, &h);
		break;
	case T_ECHO_REP:
		on_echo(buf, &h);
		break;
	default:
		fail("V sent an unexpected type");
	}
}

static void
v_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *p, size_t len)
{
	(void)arg;
	CHECK(sender == A_ID && type == T_ECHO_REQ);
	CHECK(transport_send(g.v, addr, T_ECHO_REP, p, len, NULL, NULL) == 0);
}

static void
on_deadline(uv_timer_t *t)
{
	(void)t;
	fail("no answer from V within 30 s");
}

/* Bind V and A on two free ports next to each other. */
static void
open_endpoints(const uint8_t *key)
{
	struct transport_params tp;
	struct fabric_params fp;
	struct errbuf err;
	char port[16];
	int tries, base, rc;

	for (tries = 0; tries < 50; tries++) {
		base = 20000 + (int)randombytes_uniform(40000);
		snprintf(g.v_addr, sizeof(g.v_addr), "127.0.0.1:%d", base);
		memset(&tp, 0, sizeof(tp));
		tp.listen = g.v_addr;
		tp.key = key;
		tp.job = JOB;
		tp.self_id = V_ID;
		rc = transport_open(&g.loop, &tp, NULL, NULL, &g.v, &err);
		if (rc == -EADDRINUSE)
			continue;
		REQUIRE(rc == 0);
		snprintf(port, sizeof(port), "%d", base + 1);
		memset(&fp, 0, sizeof(fp));
		fp.host = "127.0.0.1";
		fp.port = port;
		fp.frame_size = WIRE_FRAME_MAX;
		fp.rx_depth = 8;
		rc = fabric_open(&g.loop, &fp, a_frame, NULL, &g.f, &err);
		if (rc == 0) {
			snprintf(g.addr, sizeof(g.addr), "127.0.0.1:%d",
			    base + 1);
			snprintf(port, sizeof(port), "%d", base);
			REQUIRE(fabric_insert(g.f, "127.0.0.1", port, &g.to_v,
			    &err) == 0);
			return;
		}
		REQUIRE(rc == -EADDRINUSE);
		transport_close(g.v, closed, NULL);
		uv_run(&g.loop, UV_RUN_DEFAULT);
	}
	REQUIRE(!"no free pair of ports");
}

/* Each case's V and A under a fresh job key, and its 30 s deadline. */
static void
rehello_open(void)
{
	uint8_t key[SESSION_KEY_SIZE];

	memset(&g, 0, sizeof(g));
	REQUIRE(sodium_init() >= 0);
	randombytes_buf(key, sizeof(key));
	REQUIRE(uv_loop_init(&g.loop) == 0);
	open_endpoints(key);
	REQUIRE(session_ctx_init(&g.ctx, key, JOB, A_ID,
	    TRANSPORT_DEFAULT_MAX_MESSAGE) == 0);
	sodium_memzero(key, sizeof(key));
	uv_timer_init(&g.loop, &g.deadline);
	uv_timer_start(&g.deadline, on_deadline, 30000, 0);
}

static void
rehello_close(void)
{
	session_wipe(&g.in);
	session_wipe(&g.out);
	session_ctx_wipe(&g.ctx);
	REQUIRE(uv_loop_close(&g.loop) == 0);
}

static void
test_steps(void)
{
	struct errbuf err;

	rehello_open();
	REQUIRE(transport_register(g.v, &echo_proto, v_recv, NULL, &err) == 0);
	/* The first two HELLOs are made before V's first one reaches A, so
	 * the second is older than A's answer to V: the late copy. */
	REQUIRE(session_hello_make(&g.ctx, &g.hs[0], g.addr, 0) == 0);
	REQUIRE(session_hello_make(&g.ctx, &g.hs[1], g.addr, 0) == 0);
	step_start();
	uv_run(&g.loop, UV_RUN_DEFAULT);
	CHECK(g.step == NSTEPS);
	rehello_close();
}

/* V's handshake counters, from its stats. */
static json_int_t
v_rejected(const char *why)
{
	json_t *o = json_object();
	json_int_t n;

	REQUIRE(o != NULL && transport_stats_json(g.v, o) == 0);
	n = json_integer_value(json_object_get(json_object_get(o, "rejected"),
	    why));
	json_decref(o);
	return n;
}

static void
lost_sent(void *arg, int status)
{
	(void)arg;
	g.sent_status = status;
	g.refused = v_rejected("handshake_failure");
	finish();
}

static void
test_lost(void)
{
	uint64_t gap;
	size_t i;

	rehello_open();
	g.lost = 1;
	g.sent_status = 1;
	for (i = 0; i < sizeof(g.req); i++)
		g.req[i] = (uint8_t)(7 * i);
	REQUIRE(transport_send(g.v, g.addr, T_ECHO_REQ, g.req, sizeof(g.req),
	    lost_sent, NULL) == 0);
	uv_run(&g.loop, UV_RUN_DEFAULT);
	gap = g.hellos == 2 ? g.lost_hellos[1] - g.lost_hellos[0] : 0;
	CHECKF(g.hellos == 2, "V said hello %d time(s)", g.hellos);
	/* Not before its second; and V's send ending well means the second
	 * came before V's deadline (10 s on the transport's clock, which a
	 * loaded machine's stalls do not advance: no wall-clock bound here). */
	CHECKF(gap >= 900, "second HELLO %" PRIu64 " ms after the first", gap);
	CHECKF(g.sent_status == 0, "V's send ended %d", g.sent_status);
	CHECK(g.req_opened);
	/* The stale answer is dropped: no handshake refused. */
	CHECKF(g.refused == 0, "%lld handshake answers refused",
	    (long long)g.refused);
	printf("rehello_lost: second HELLO after %" PRIu64 " ms, send %d\n",
	    gap, g.sent_status);
	rehello_close();
}

static const struct check_case cases[] = {
	{ "rehello_steps", test_steps },
	{ "rehello_lost", test_lost },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_rehello");
}
