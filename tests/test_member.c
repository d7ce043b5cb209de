/*
 * test_member: the membership state machine on a simulated network with a
 * fake clock. Many member instances exchange their messages through an
 * in-memory queue with a small delay; peers can crash (their traffic is
 * lost), be paused (nothing runs, traffic to them waits, as under
 * SIGSTOP), leave, restart on the same address, or lose single links or a
 * share of all messages. Also the wire codec: round trips, and every
 * truncation and corruption of a message is refused or harmless.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "check.h"
#include "log.h"
#include "member.h"
#include "member_table.h"	/* MEMBER_REAP_S */
#include "member_wire.h"
#include "rng.h"
#include "simnet.h"

#define MAXN		24
#define STEP		0.005
#define LATENCY		0.002


struct node {
	struct member	*m;
	char		addr[32];
	uint64_t	id;
	int		up;		/* 0: crashed or gone */
	double		paused_until;
	double		next;
	int		index;
};

struct msg {
	struct msg	*next;
	int		from, to;
	uint8_t		type;
	size_t		len;
	double		at;
	proto_sent_cb	cb;
	void		*cbarg;
	uint8_t		data[];
};

static struct node nodes[MAXN];
static int nnodes;
static struct msg *queue;
static double now;
static double loss;		/* share of messages dropped */
static int cut_a = -1, cut_b = -1;	/* a lost link, both ways */
static int isolated = -1;	/* a peer whose every message is lost */
static struct rng net_rng;
static unsigned changes;

static int
fake_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	struct node *from = arg;
	struct msg *m;
	int to = SIMNET_BY_ADDR(nodes, nnodes, addr);

	REQUIRE(type >= MEMBER_T_FIRST && type <= MEMBER_T_LAST);
	REQUIRE(strcmp(addr, from->addr) != 0);
	m = xmalloc(sizeof(*m) + len);
	m->from = from->index;
	m->to = to;
	m->type = type;
	m->len = len;
	m->at = now + LATENCY;
	m->cb = cb;
	m->cbarg = cbarg;
	memcpy(m->data, buf, len);
	m->next = queue;
	queue = m;
	return 0;
}

static void
fake_change(void *arg, const char *addr, uint64_t id, enum member_state old,
    enum member_state s)
{
	(void)arg;
	(void)addr;
	(void)id;
	(void)old;
	(void)s;
	changes++;
}

/* A member alone at addr with the defaults, sending through send. */
static struct member *
lone_member(const char *addr, uint64_t id, proto_send_fn send)
{
	struct member_ops ops = { send, fake_change, NULL };
	struct member_params p;
	struct member *m;
	struct errbuf err;

	memset(&p, 0, sizeof(p));
	p.self_addr = addr;
	p.self_id = id;
	p.incarnation = 1;
	REQUIRE(member_new(&p, &ops, now, &m, &err) == 0);
	return m;
}

static void
node_start(int i, double inc)
{
	struct member_ops ops = { fake_send, fake_change, &nodes[i] };
	struct member_params p;
	struct errbuf err;

	memset(&p, 0, sizeof(p));
	nodes[i].index = i;
	snprintf(nodes[i].addr, sizeof(nodes[i].addr), "10.0.0.%d:7000", i + 1);
	randombytes_buf(&nodes[i].id, sizeof(nodes[i].id));
	nodes[i].id |= 1;
	p.self_addr = nodes[i].addr;
	p.self_id = nodes[i].id;
	p.incarnation = (uint64_t)inc;
	REQUIRE(member_new(&p, &ops, now, &nodes[i].m, &err) == 0);
	nodes[i].up = 1;
	nodes[i].paused_until = 0;
	nodes[i].next = now;
	if (i >= nnodes)
		nnodes = i + 1;
}

static int
running(int i)
{
	return nodes[i].up && now >= nodes[i].paused_until;
}

/* Advance the world by one step: deliver what is due, tick who is due. */
static void
step(void)
{
	struct msg **pm = &queue, *m;

	now += STEP;
	while ((m = *pm) != NULL) {
		int lost, to = m->to;

		if (m->at > now || (to >= 0 && nodes[to].up && !running(to))) {
			pm = &m->next;
			continue;
		}
		*pm = m->next;
		lost = to < 0 || !nodes[to].up || !nodes[m->from].up ||
		    rng_uniform(&net_rng) < loss ||
		    (m->from == cut_a && to == cut_b) ||
		    (m->from == cut_b && to == cut_a) ||
		    m->from == isolated || to == isolated;
		if (!lost)
			member_recv(nodes[to].m, now, nodes[m->from].id,
			    nodes[m->from].addr, m->type, m->data, m->len);
		if (m->cb != NULL && nodes[m->from].up)
			m->cb(m->cbarg, lost ? -ETIMEDOUT : 0);
		free(m);
		if (!lost && to >= 0)
			nodes[to].next = member_next_deadline(nodes[to].m);
	}
	for (int i = 0; i < nnodes; i++) {
		if (!running(i) || now < nodes[i].next)
			continue;
		nodes[i].next = member_tick(nodes[i].m, now);
		/* A deadline that a tick leaves in the past is re-armed at
		 * 0 ms by the daemon, and libuv then never leaves its timer
		 * phase: the livelock of a leaving peer. */
		REQUIRE(nodes[i].next > now);
		REQUIRE(member_check(nodes[i].m, NULL) == 0);
	}
}

static void
run_for(double secs)
{
	double end = now + secs;

	while (now < end)
		step();
}

/* State of node j in node i's view; -1 if unknown. */
static int
view(int i, int j)
{
	struct member_info info[MAXN * 2];
	size_t n = member_list(nodes[i].m, info, GD_ARRAY_SIZE(info));

	for (size_t k = 0; k < n && k < GD_ARRAY_SIZE(info); k++)
		if (strcmp(info[k].addr, nodes[j].addr) == 0 &&
		    info[k].id == nodes[j].id)
			return (int)info[k].state;
	return -1;
}

/* Does every running node see node j in state s? */
static int
all_see(int j, enum member_state s)
{
	for (int i = 0; i < nnodes; i++)
		if (i != j && running(i) && view(i, j) != (int)s)
			return 0;
	return 1;
}

static int
all_agree(void)
{
	for (int j = 0; j < nnodes; j++)
		if (nodes[j].up && !all_see(j, MEMBER_ALIVE))
			return 0;
	return 1;
}

/* Run until cond or limit seconds; returns the time it took, or -1. */
static double
until(int (*cond)(void), double limit)
{
	double start = now;

	while (now - start < limit) {
		if (cond())
			return now - start;
		step();
	}
	return cond() ? now - start : -1;
}

/* No running node is dead or left in anyone's view. */
static void
check_no_false_death(void)
{
	for (int i = 0; i < nnodes; i++)
		for (int j = 0; j < nnodes; j++)
			if (i != j && running(i) && nodes[j].up &&
			    nodes[j].paused_until <= now) {
				int v = view(i, j);

				REQUIRE(v != MEMBER_DEAD && v != MEMBER_LEFT);
			}
}

static int victim;

static int
victim_dead(void)
{
	return all_see(victim, MEMBER_DEAD);
}

static int
victim_left(void)
{
	return all_see(victim, MEMBER_LEFT);
}

static int
victim_alive(void)
{
	return all_see(victim, MEMBER_ALIVE);
}

static void
test_codec(void)
{
	struct member_update u[3], v[8];
	struct member_msg msg, out;
	struct errbuf err;
	uint8_t buf[1024], bad[1024];
	int len, ok = 0;

	memset(&msg, 0, sizeof(msg));
	memset(u, 0, sizeof(u));
	msg.seq = 0xdeadbeef;
	msg.flags = 1;
	snprintf(msg.target, sizeof(msg.target), "127.0.0.1:9");
	msg.u = u;
	msg.n = 3;
	for (int i = 0; i < 3; i++) {
		u[i].state = (uint8_t)i;
		u[i].id = 0x0102030405060708ull + (uint64_t)i;
		u[i].incarnation = 1700000000000ull + (uint64_t)i;
		snprintf(u[i].addr, sizeof(u[i].addr), "192.168.1.%d:70%02d", i, i);
	}
	len = member_msg_encode(MEMBER_T_PING_REQ, &msg, buf, sizeof(buf));
	REQUIRE(len > 0);
	REQUIRE(buf[4] == 0xef && buf[7] == 0xde);	/* little-endian seq */
	memset(&out, 0, sizeof(out));
	out.u = v;
	REQUIRE(member_msg_decode(MEMBER_T_PING_REQ, buf, (size_t)len, &out, 8, &err) == 0);
	REQUIRE(out.seq == msg.seq && out.n == 3 && out.flags == 1);
	REQUIRE(strcmp(out.target, "127.0.0.1:9") == 0);
	for (int i = 0; i < 3; i++)
		REQUIRE(v[i].state == u[i].state && v[i].id == u[i].id &&
		    v[i].incarnation == u[i].incarnation &&
		    strcmp(v[i].addr, u[i].addr) == 0);
	/* too many updates for the reader, and too small a buffer to write */
	REQUIRE(member_msg_decode(MEMBER_T_PING_REQ, buf, (size_t)len, &out, 2, &err) == -EBADMSG);
	REQUIRE(member_msg_encode(MEMBER_T_PING_REQ, &msg, buf, 40) == -EMSGSIZE);
	/* every truncation and trailing garbage is refused */
	for (int n = 0; n < len; n++)
		REQUIRE(member_msg_decode(MEMBER_T_PING_REQ, buf, (size_t)n, &out, 8, &err) == -EBADMSG);
	REQUIRE(member_msg_decode(MEMBER_T_PING_REQ, buf, (size_t)len + 1, &out, 8, &err) == -EBADMSG);
	REQUIRE(member_msg_decode(MEMBER_T_PING, buf, (size_t)len, &out, 8, &err) == -EBADMSG);
	REQUIRE(member_msg_decode(99, buf, (size_t)len, &out, 8, &err) == -EBADMSG);
	/* every single-byte corruption decodes cleanly or is refused */
	for (int i = 0; i < len; i++) {
		for (int b = 0; b < 8; b++) {
			memcpy(bad, buf, (size_t)len);
			bad[i] ^= (uint8_t)(1u << b);
			if (member_msg_decode(MEMBER_T_PING_REQ, bad, (size_t)len, &out, 8,
			    &err) == 0)
				ok++;
		}
	}
	REQUIRE(ok > 0 && ok < len * 8);
	printf("ok: codec round trip, %d truncations and %d corruptions handled\n",
	    len, len * 8);
}

/* The membership counter called name of node i. */
static long long
counter(int i, const char *name)
{
	json_t *o = json_object();
	long long v;

	REQUIRE(o != NULL && member_stats_json(nodes[i].m, o) == 0);
	v = json_integer_value(json_object_get(json_object_get(o, "membership"), name));
	json_decref(o);
	return v;
}

/* Garbage fed to a live member is counted, never acted on. */
static void
test_garbage(void)
{
	uint8_t junk[300];

	for (int k = 0; k < 2000; k++) {
		size_t n = (size_t)rng_below(&net_rng, sizeof(junk) + 1);

		rng_bytes(&net_rng, junk, n);
		if (n > 0)
			junk[0] = 1;	/* get past the version check often */
		member_recv(nodes[0].m, now, 42, "6.6.6.6:6", (uint8_t)(MEMBER_T_PING +
		    rng_below(&net_rng, 5)), junk, n);
	}
	member_recv(nodes[0].m, now, 42, "6.6.6.6:6", MEMBER_T_PING, NULL, 0);
	REQUIRE(counter(0, "malformed") >= 1990);
	printf("ok: random garbage counted as malformed\n");
}

static int
drop_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	(void)arg, (void)addr, (void)type, (void)buf, (void)len, (void)cb, (void)cbarg;
	return 0;
}

/* One message of a job member that revives one address over and over:
 * dead and alive alternate with rising incarnations, all within one probe
 * pass. The probe order must still name that record once (it once grew by
 * one entry per revival, past the table: a heap overflow). */
static void
test_revivals(void)
{
	static struct member_update u[MEMBER_MSG_MAX_UPDATES];
	static uint8_t buf[65536];
	struct member_msg msg;
	struct member *m;
	struct errbuf err;
	int len;

	m = lone_member("10.1.0.1:7000", 11, drop_send);
	memset(&msg, 0, sizeof(msg));
	msg.u = u;
	msg.n = MEMBER_MSG_MAX_UPDATES;
	for (int i = 0; i < MEMBER_MSG_MAX_UPDATES; i++) {
		u[i].state = i % 2 ? MEMBER_DEAD : MEMBER_ALIVE;
		u[i].id = 77;
		u[i].incarnation = (uint64_t)i + 1;
		snprintf(u[i].addr, sizeof(u[i].addr), "10.1.0.%d:7000", i < 8 ? 2 + i : 9);
	}
	len = member_msg_encode(MEMBER_T_GOSSIP, &msg, buf, sizeof(buf));
	REQUIRE(len > 0);
	member_recv(m, now, 77, "10.1.0.2:7000", MEMBER_T_GOSSIP, buf, (size_t)len);
	if (member_check(m, &err) < 0) {
		fprintf(stderr, "FAIL: %s\n", err.msg);
		exit(1);
	}
	/* and the pass that follows probes the survivors as usual */
	for (double t = now; t < now + 5; t += STEP) {
		member_tick(m, t);
		REQUIRE(member_check(m, &err) == 0);
	}
	member_free(m);
	printf("ok: %d revivals in one message leave the probe order intact\n",
	    MEMBER_MSG_MAX_UPDATES);
}

/* Feed m records first..end-1 in state st at incarnation inc, 512 to a
 * message; addresses of three lengths, so the index's probe chains mix. */
static void
index_feed(struct member *m, int first, int end, enum member_state st, uint64_t inc)
{
	static struct member_update u[MEMBER_MSG_MAX_UPDATES];
	static uint8_t buf[65536];
	struct member_msg msg;
	struct errbuf err;
	int len;

	memset(&msg, 0, sizeof(msg));
	msg.u = u;
	while (first < end) {
		for (msg.n = 0; first < end && msg.n < MEMBER_MSG_MAX_UPDATES; first++, msg.n++) {
			u[msg.n].state = (uint8_t)st;
			u[msg.n].id = (uint64_t)first + 100;
			u[msg.n].incarnation = inc;
			if (first % 3 == 0)
				snprintf(u[msg.n].addr, sizeof(u[msg.n].addr), "10.4.%d.%d:7000",
				    first / 256, first % 256);
			else if (first % 3 == 1)
				snprintf(u[msg.n].addr, sizeof(u[msg.n].addr), "p%d:1", first);
			else
				snprintf(u[msg.n].addr, sizeof(u[msg.n].addr),
				    "peer-%d.rack-%d.example.org:7000", first, first % 17);
		}
		len = member_msg_encode(MEMBER_T_GOSSIP, &msg, buf, sizeof(buf));
		REQUIRE(len > 0);
		member_recv(m, now, u[0].id, u[0].addr, MEMBER_T_GOSSIP, buf, (size_t)len);
		if (member_check(m, &err) < 0) {
			fprintf(stderr, "FAIL: %s\n", err.msg);
			exit(1);
		}
	}
}

static const char *
index_addr(int i, char *out, size_t len)
{
	if (i % 3 == 0)
		snprintf(out, len, "10.4.%d.%d:7000", i / 256, i % 256);
	else if (i % 3 == 1)
		snprintf(out, len, "p%d:1", i);
	else
		snprintf(out, len, "peer-%d.rack-%d.example.org:7000", i, i % 17);
	return out;
}

/* The table's index by address through growth, reaping and re-adding:
 * a record it could not find would be added twice (counts, member_check),
 * and one it found at the wrong place would take another's news
 * (member_peer_down below suspects exactly the records named). */
static void
test_index(void)
{
	enum { RECORDS = 5000 };
	struct member *m;
	struct errbuf err;
	char a[WIRE_ADDR_MAX + 1];
	double t0 = now;
	int i, dead = 0, suspect = 0;

	m = lone_member("10.4.255.255:7000", 11, drop_send);
	index_feed(m, 0, RECORDS, MEMBER_ALIVE, 1);
	CHECK(member_count(m, MEMBER_ALIVE) == RECORDS + 1);
	/* the same news again finds every record: nothing added */
	index_feed(m, 0, RECORDS, MEMBER_ALIVE, 1);
	CHECK(member_count(m, MEMBER_ALIVE) == RECORDS + 1);
	for (i = 0; i < RECORDS; i += 3, dead++)
		index_feed(m, i, i + 1, MEMBER_DEAD, 1);
	CHECK(member_count(m, MEMBER_DEAD) == (unsigned)dead);
	/* past the reaping age the dead go, the others move up */
	now = t0 + MEMBER_REAP_S + 1;
	member_tick(m, now);
	REQUIRE(member_check(m, &err) == 0);
	CHECKF(member_count(m, MEMBER_DEAD) == 0 && member_list(m, NULL, 0) ==
	    RECORDS + 1 - (size_t)dead, "%u dead, %zu records after reaping",
	    member_count(m, MEMBER_DEAD), member_list(m, NULL, 0));
	for (i = 1; i < RECORDS; i += 7) {
		if (i % 3 == 0)
			continue;
		member_peer_down(m, now, index_addr(i, a, sizeof(a)));
		suspect++;
	}
	REQUIRE(member_check(m, &err) == 0);
	CHECKF(member_count(m, MEMBER_SUSPECT) == (unsigned)suspect, "%u suspect of %d named",
	    member_count(m, MEMBER_SUSPECT), suspect);
	/* the reaped come back at a higher incarnation, the rest refute */
	index_feed(m, 0, RECORDS, MEMBER_ALIVE, 2);
	CHECK(member_count(m, MEMBER_ALIVE) == RECORDS + 1);
	CHECK(member_list(m, NULL, 0) == RECORDS + 1);
	member_free(m);
	now = t0;
	printf("ok: %d records found by address through growth, reaping and return\n",
	    RECORDS);
}

/* What a member sent last: its type and updates, decoded. */
static uint8_t sent_type;
static struct member_update sent_u[MEMBER_MSG_MAX_UPDATES];
static struct member_msg sent_msg = { .u = sent_u };

static int
capture_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	(void)arg, (void)addr, (void)cb, (void)cbarg;
	sent_type = type;
	REQUIRE(member_msg_decode(type, buf, len, &sent_msg, MEMBER_MSG_MAX_UPDATES,
	    NULL) == 0);
	return 0;
}

/* A table of more records than one message holds goes out whole over
 * successive SYNC answers: each starts where the one before stopped. It
 * once always began at the first record, so a job past 511 members never
 * sent the others to a joiner, nor in any anti-entropy round. */
static void
test_sync_turns(void)
{
	enum { RECORDS = MEMBER_MSG_MAX_UPDATES + 200 };
	static struct member_update u[MEMBER_MSG_MAX_UPDATES];
	static uint8_t buf[65536], seen[RECORDS];
	const char *self = "10.3.0.0:7000";
	struct member_msg msg;
	struct member *m;
	int len, i, got = 0, answers;

	m = lone_member(self, 11, capture_send);
	memset(&msg, 0, sizeof(msg));
	msg.u = u;
	/* the records arrive in two messages, each from its first */
	for (int first = 0; first < RECORDS; first += MEMBER_MSG_MAX_UPDATES) {
		msg.n = 0;
		for (i = first; i < RECORDS && msg.n < MEMBER_MSG_MAX_UPDATES; i++, msg.n++) {
			u[msg.n].state = MEMBER_ALIVE;
			u[msg.n].id = (uint64_t)i + 100;
			u[msg.n].incarnation = 1;
			snprintf(u[msg.n].addr, sizeof(u[msg.n].addr), "10.3.%d.%d:7000",
			    1 + i / 256, i % 256);
		}
		len = member_msg_encode(MEMBER_T_GOSSIP, &msg, buf, sizeof(buf));
		REQUIRE(len > 0);
		member_recv(m, now, u[0].id, u[0].addr, MEMBER_T_GOSSIP, buf, (size_t)len);
	}
	REQUIRE(member_count(m, MEMBER_ALIVE) == RECORDS + 1);
	/* ask for its table until every record came back */
	msg.n = 1;
	msg.flags = MEMBER_F_REPLY;
	for (answers = 0; got < RECORDS && answers < 4; answers++) {
		snprintf(u[0].addr, sizeof(u[0].addr), "10.3.1.0:7000");
		u[0].id = 100;
		len = member_msg_encode(MEMBER_T_SYNC, &msg, buf, sizeof(buf));
		REQUIRE(len > 0);
		sent_type = 0;
		member_recv(m, now, 100, u[0].addr, MEMBER_T_SYNC, buf, (size_t)len);
		REQUIRE(sent_type == MEMBER_T_SYNC);
		CHECK(strcmp(sent_u[0].addr, self) == 0);
		for (i = 1; i < sent_msg.n; i++) {
			unsigned a, b;

			REQUIRE(sscanf(sent_u[i].addr, "10.3.%u.%u:7000", &a, &b) == 2);
			got += !seen[(a - 1) * 256 + b];
			seen[(a - 1) * 256 + b] = 1;
		}
	}
	CHECKF(got == RECORDS && answers == 2, "%d of %d records in %d SYNC answers", got,
	    RECORDS, answers);
	member_free(m);
	if (got == RECORDS)
		printf("ok: a table of %d records goes out whole in %d SYNC answers\n",
		    RECORDS + 1, answers);
}

/* The SYNCs a member sent, in order: their seq fields. */
static uint32_t sync_seqs[64];
static int nsyncs;

static int
sync_capture(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	capture_send(arg, addr, type, buf, len, cb, cbarg);
	if (type == MEMBER_T_SYNC && nsyncs < (int)GD_ARRAY_SIZE(sync_seqs))
		sync_seqs[nsyncs++] = sent_msg.seq;
	return 0;
}

/* Send m a SYNC from 10.9.0.1:7000 with flags and seq (and that
 * sender's record), as member_recv gets it. */
static void
sync_to(struct member *m, uint8_t flags, uint32_t seq)
{
	static struct member_update u[1];
	static uint8_t buf[256];
	struct member_msg msg = { .flags = flags, .seq = seq, .n = 1, .u = u };
	int len;

	u[0].state = MEMBER_ALIVE;
	u[0].id = 9;
	u[0].incarnation = 1;
	snprintf(u[0].addr, sizeof(u[0].addr), "10.9.0.1:7000");
	len = member_msg_encode(MEMBER_T_SYNC, &msg, buf, sizeof(buf));
	REQUIRE(len > 0);
	member_recv(m, now, u[0].id, u[0].addr, MEMBER_T_SYNC, buf, (size_t)len);
}

/* Send m one message of type and flags from the member at from (its own
 * record first, alive), carrying the record of addr at state st, id and
 * incarnation inc. */
static void
hear(struct member *m, uint8_t type, uint8_t flags, const char *from,
    const char *addr, enum member_state st, uint64_t inc)
{
	static struct member_update u[2];
	static uint8_t buf[512];
	struct member_msg msg = { .flags = flags, .n = 2, .u = u };
	int len;

	u[0].state = MEMBER_ALIVE;
	u[0].id = 5;
	u[0].incarnation = 1;
	snprintf(u[0].addr, sizeof(u[0].addr), "%s", from);
	u[1].state = (uint8_t)st;
	u[1].id = 6;
	u[1].incarnation = inc;
	snprintf(u[1].addr, sizeof(u[1].addr), "%s", addr);
	len = member_msg_encode(type, &msg, buf, sizeof(buf));
	REQUIRE(len > 0);
	member_recv(m, now, 5, from, type, buf, (size_t)len);
}

/* A join heard back unchanged from another member, as its news or in its
 * table, costs one of its transmissions left (member_table_apply); a
 * newer record, an older one, and suspect news do not. Without it, N
 * peers that start together each send N log N updates long after they
 * agreed (README, Membership at scale). */
static void
test_echo(void)
{
	const char *x = "10.6.0.9:7000", *y = "10.6.0.8:7000";
	struct member *m = lone_member("10.6.0.1:7000", 11, drop_send);
	unsigned full, grown;

	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.2:7000", x, MEMBER_ALIVE, 1);
	full = member_table_find(m, x)->transmits;
	REQUIRE(full > 2);
	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.3:7000", x, MEMBER_ALIVE, 1);
	CHECKF(member_table_find(m, x)->transmits == full - 1,
	    "%u transmissions left after an echo, of %u", member_table_find(m, x)->transmits,
	    full);
	hear(m, MEMBER_T_SYNC, 0, "10.6.0.4:7000", x, MEMBER_ALIVE, 1);
	CHECK(member_table_find(m, x)->transmits == full - 2);
	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.3:7000", x, MEMBER_ALIVE, 0);
	CHECK(member_table_find(m, x)->transmits == full - 2);
	for (unsigned i = 0; i < full; i++)
		hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.3:7000", x, MEMBER_ALIVE, 1);
	CHECK(member_table_find(m, x)->transmits == 0);
	/* the job grew meanwhile: a record's full count did too */
	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.3:7000", x, MEMBER_ALIVE, 2);
	grown = member_table_find(m, x)->transmits;
	CHECK(grown >= full);
	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.2:7000", y, MEMBER_SUSPECT, 1);
	hear(m, MEMBER_T_GOSSIP, 0, "10.6.0.3:7000", y, MEMBER_SUSPECT, 1);
	CHECK(member_table_find(m, y)->transmits == grown);
	member_free(m);
	printf("ok: a join heard back costs one of its %u transmissions; suspect news none\n",
	    full);
}

/* A joiner into a large job walks the table in slices of the addresses'
 * hashes, one each period from a random member, instead of taking turns
 * that overlap at random (member.h): the slices hold every record once,
 * each in one answer, and the walker asks for slice 1..K, a period
 * apart, then goes back to sync_ms. Before, a joiner into 3,000 members
 * listed everyone after 42 s (membership_sim). */
static void
test_sync_walk(void)
{
	enum { RECORDS = 2000 };
	static uint8_t seen[RECORDS];
	struct member *m, *j;
	unsigned k = (RECORDS + MEMBER_WALK_SLICE) / MEMBER_WALK_SLICE, s;
	int got = 0, twice = 0, biggest = 0, i;
	double t0 = now;

	m = lone_member("10.3.0.0:7000", 11, sync_capture);
	index_feed(m, 0, RECORDS, MEMBER_ALIVE, 1);
	for (s = 1; s <= k; s++) {
		sent_type = 0;
		sync_to(m, MEMBER_F_REPLY, k << 16 | s);
		REQUIRE(sent_type == MEMBER_T_SYNC);
		CHECK(sent_msg.flags == MEMBER_F_SLICE);
		CHECKF(sent_msg.seq == RECORDS + 1, "answer says %u records", sent_msg.seq);
		if (sent_msg.n - 1 > biggest)
			biggest = sent_msg.n - 1;
		for (i = 1; i < sent_msg.n; i++) {
			int r = (int)sent_u[i].id - 100;

			if (r < 0 || r >= RECORDS)
				continue;	/* the asker's own record */
			twice += seen[r];
			got += !seen[r];
			seen[r] = 1;
		}
	}
	CHECKF(got == RECORDS && twice == 0, "%d of %d records in %u slices, %d twice",
	    got, RECORDS, k, twice);
	CHECKF(biggest < MEMBER_MSG_MAX_UPDATES - 1, "a slice of %d records", biggest);
	/* a slice that cannot be (s > K, K = 0) gets the next turn */
	sync_to(m, MEMBER_F_REPLY, 2u << 16 | 3);
	CHECK(sent_msg.flags == 0 && sent_msg.n == MEMBER_MSG_MAX_UPDATES);
	sync_to(m, MEMBER_F_REPLY, 1);
	CHECK(sent_msg.flags == 0 && sent_msg.n == MEMBER_MSG_MAX_UPDATES);
	member_free(m);

	/* the walker, knowing 20 members (none answers its probes, but
	 * most stay alive while it walks), told of one that holds RECORDS */
	j = lone_member("10.3.0.1:7000", 12, sync_capture);
	index_feed(j, 0, 20, MEMBER_ALIVE, 1);
	nsyncs = 0;
	sync_to(j, 0, RECORDS);
	while (now - t0 < (k + 2) * MEMBER_DEFAULT_PERIOD_MS / 1000.0) {
		now += 0.01;
		member_tick(j, now);
	}
	/* the slices, then one turn */
	CHECKF(nsyncs == (int)k + 1, "%d SYNCs in %u periods, %u slices", nsyncs, k + 2, k);
	for (i = 0; i < nsyncs; i++)
		CHECKF(sync_seqs[i] == (i < (int)k ? k << 16 | (unsigned)(i + 1) : 0),
		    "SYNC %d asked for %#x", i, sync_seqs[i]);
	/* unanswered, the next is sync_ms later */
	while (nsyncs == (int)k + 1 && now - t0 < MEMBER_DEFAULT_SYNC_MS / 1000.0 + 5) {
		now += 0.01;
		member_tick(j, now);
	}
	CHECKF(nsyncs == (int)k + 2 && sync_seqs[k + 1] == 0 &&
	    now - t0 > MEMBER_DEFAULT_SYNC_MS / 1000.0, "SYNC %d (%#x) after %.2f s",
	    nsyncs, nsyncs > (int)k + 1 ? sync_seqs[k + 1] : 0, now - t0);
	member_free(j);

	/* a count that was not true: slices that teach nothing end the
	 * walk after MEMBER_WALK_IDLE, then one turn */
	now = t0;
	j = lone_member("10.3.0.1:7000", 12, sync_capture);
	index_feed(j, 0, 20, MEMBER_ALIVE, 1);
	nsyncs = 0;
	sync_to(j, 0, 60000);
	for (i = 0; i < MEMBER_WALK_IDLE; i++) {
		now += MEMBER_DEFAULT_PERIOD_MS / 1000.0 + 0.01;
		member_tick(j, now);
		sync_to(j, MEMBER_F_SLICE, 60000);
	}
	while (now - t0 < 5 * MEMBER_DEFAULT_PERIOD_MS / 1000.0) {
		now += 0.01;
		member_tick(j, now);
	}
	CHECKF(nsyncs == MEMBER_WALK_IDLE + 1 && sync_seqs[nsyncs - 1] == 0,
	    "%d SYNCs after %d empty slices, the last %#x", nsyncs, MEMBER_WALK_IDLE,
	    nsyncs > 0 ? sync_seqs[nsyncs - 1] : 0);
	member_free(j);
	now = t0;
	if (got == RECORDS && nsyncs == MEMBER_WALK_IDLE + 1)
		printf("ok: %d records in %u slices of at most %d, asked for a period apart\n",
		    RECORDS, k, biggest);
}

static void world_end(void);

/* One story on 16 simulated peers, each step starting from where the one
 * before left the job. */
static void
test_scenario(void)
{
	double t;
	int i;

	/* 16 peers, each knowing only the previous two: one view within a
	 * few periods. */
	for (i = 0; i < 16; i++) {
		node_start(i, 1000);
		if (i > 0)
			REQUIRE(member_add_seed(nodes[i].m, nodes[i - 1].addr, now) == 0);
		if (i > 1)
			REQUIRE(member_add_seed(nodes[i].m, nodes[i - 2].addr, now) == 0);
		REQUIRE(member_add_seed(nodes[i].m, nodes[i].addr, now) == 0);
		REQUIRE(member_joined(nodes[i].m) == (i == 0));
	}
	t = until(all_agree, 10);
	REQUIRE(t >= 0);
	for (i = 0; i < 16; i++)
		REQUIRE(member_joined(nodes[i].m) && member_count(nodes[i].m, MEMBER_ALIVE) == 16);
	printf("ok: 16 peers agree after %.2f s\n", t);
	test_garbage();

	/* A joiner through one member. */
	node_start(16, 1000);
	member_add_seed(nodes[16].m, nodes[5].addr, now);
	t = until(all_agree, 10);
	REQUIRE(t >= 0 && t < 3);
	printf("ok: a joiner is in every view after %.2f s\n", t);

	/* A crash: dead everywhere within 5 s, and nobody else ever dead. */
	run_for(2);
	victim = 3;
	nodes[victim].up = 0;
	{
		double start = now;

		while (!victim_dead() && now - start < 10) {
			step();
			check_no_false_death();
		}
		t = now - start;
	}
	REQUIRE(victim_dead());
	REQUIRE(t < 5);
	printf("ok: a crashed peer is dead in every view after %.2f s\n", t);

	/* A pause longer than the suspicion time: dead meanwhile, then
	 * alive again everywhere once it runs (refutation). */
	victim = 7;
	nodes[victim].paused_until = now + 6;
	REQUIRE(until(victim_dead, 6) >= 0);
	while (now < nodes[victim].paused_until)
		step();
	t = until(victim_alive, 10);
	REQUIRE(t >= 0 && t < 3);
	REQUIRE(member_incarnation(nodes[victim].m) > 1000);
	for (i = 0; i < nnodes; i++)
		if (i != 3)
			REQUIRE(view(victim, i) == MEMBER_ALIVE);
	printf("ok: a peer paused for 6 s is back alive everywhere %.2f s after it resumes\n", t);

	/* A graceful leave: left (not dead) everywhere, done at once, and
	 * still left much later. */
	victim = 9;
	member_leave(nodes[victim].m, now);
	t = until(victim_left, 5);
	REQUIRE(t >= 0 && t < 1);
	REQUIRE(member_leave_done(nodes[victim].m, now));
	/* The daemon ticks on while its trainer finishes; every deadline
	 * the protocol reports must keep moving (step checks it). */
	run_for(3);
	nodes[victim].up = 0;
	run_for(10);
	REQUIRE(victim_left());
	printf("ok: a leaving peer is left everywhere after %.2f s, and stays so\n", t);

	/* A restart on the crashed peer's address: new id, higher
	 * incarnation, alive everywhere. */
	member_free(nodes[3].m);
	node_start(3, 2000);
	member_add_seed(nodes[3].m, nodes[12].addr, now);
	victim = 3;
	t = until(victim_alive, 10);
	REQUIRE(t >= 0 && t < 3);
	printf("ok: a peer restarted on its old address is alive everywhere after %.2f s\n", t);

	/* One broken link and 5%% message loss for 60 s: indirect probes and
	 * refutations keep every live peer out of the dead state. */
	cut_a = 1;
	cut_b = 2;
	loss = 0.05;
	for (t = 0; t < 60; t += STEP) {
		step();
		check_no_false_death();
	}
	loss = 0;
	cut_a = cut_b = -1;
	run_for(5);
	for (i = 0; i < nnodes; i++)
		if (nodes[i].up)
			REQUIRE(all_see(i, MEMBER_ALIVE));
	printf("ok: 60 s of 5%% loss and a cut link: no live peer declared dead\n");
	REQUIRE(changes > 0);
	world_end();
}

/* Drop every message in flight and free every member: a new world. */
static void
world_end(void)
{
	while (queue != NULL) {
		struct msg *m = queue;

		queue = m->next;
		if (m->cb != NULL)
			m->cb(m->cbarg, -ECANCELED);
		free(m);
	}
	for (int i = 0; i < nnodes; i++)
		member_free(nodes[i].m);
	nnodes = 0;
}

/* A peer that is alone after a partition (it holds every member dead, and
 * they hold it dead; its seed crashed meanwhile) asks the members it heard
 * of and is back in the job: nobody else would ever have contacted it. */
static void
test_rescue(void)
{
	double t;

	for (int i = 0; i < 3; i++)
		node_start(i, 1000);
	REQUIRE(member_add_seed(nodes[1].m, nodes[0].addr, now) == 0);
	REQUIRE(member_add_seed(nodes[2].m, nodes[0].addr, now) == 0);
	REQUIRE(until(all_agree, 10) >= 0);

	isolated = 2;
	victim = 2;
	REQUIRE(until(victim_dead, 10) >= 0);
	while (view(2, 0) != MEMBER_DEAD || view(2, 1) != MEMBER_DEAD)
		step();
	nodes[0].up = 0;
	isolated = -1;
	t = now;
	while ((view(2, 1) != MEMBER_ALIVE || view(1, 2) != MEMBER_ALIVE) && now - t < 30)
		step();
	REQUIRE(view(2, 1) == MEMBER_ALIVE && view(1, 2) == MEMBER_ALIVE);
	REQUIRE(member_count(nodes[2].m, MEMBER_ALIVE) == 2);
	printf("ok: a peer alone after a partition is back in the job after %.2f s\n", now - t);
	world_end();
}

/* A probe asked for out of turn (an exchange about to wait on a partner
 * over a link never measured) starts at once: a frozen member is suspect
 * in the asker's own view one period later, whatever its turn in the
 * order. One asked while a probe is in flight follows that probe; one of
 * this peer, an unknown address or a member not alive is refused. */
static void
test_probe(void)
{
	double period = MEMBER_DEFAULT_PERIOD_MS / 1000.0, t;
	long long failures;

	for (int i = 0; i < 6; i++) {
		node_start(i, 1000);
		if (i > 0)
			REQUIRE(member_add_seed(nodes[i].m, nodes[0].addr, now) == 0);
	}
	REQUIRE(until(all_agree, 10) >= 0);
	/* between two of node 0's own probes, each answered */
	while (nodes[0].m->probe.active)
		step();
	nodes[5].paused_until = nodes[4].paused_until = now + 100;
	failures = counter(0, "probe_failures");
	t = now;
	REQUIRE(member_probe(nodes[0].m, now, nodes[5].addr) == 0);
	REQUIRE(member_probe(nodes[0].m, now, nodes[4].addr) == 0);
	nodes[0].next = member_next_deadline(nodes[0].m);
	/* Lifeguard stretches a period by the local health score, which
	 * each failed probe raises. */
	run_for(period * (1 + nodes[0].m->lh) + 2 * STEP);
	CHECKF(view(0, 5) == MEMBER_SUSPECT && counter(0, "probe_failures") == failures + 1,
	    "node 0 sees the frozen node 5 %d after %.2f s, its probes failed %lld",
	    view(0, 5), now - t, counter(0, "probe_failures") - failures);
	run_for(period * (1 + nodes[0].m->lh) + 2 * STEP);
	CHECKF(view(0, 4) == MEMBER_SUSPECT && counter(0, "probe_failures") == failures + 2,
	    "node 0 sees node 4 %d after %.2f s, its probes failed %lld", view(0, 4),
	    now - t, counter(0, "probe_failures") - failures);
	CHECK(counter(0, "probes_asked") == 2);
	CHECK(member_probe(nodes[0].m, now, nodes[5].addr) == -ENOENT);
	CHECK(member_probe(nodes[0].m, now, nodes[0].addr) == -ENOENT);
	CHECK(member_probe(nodes[0].m, now, "10.9.9.9:7000") == -ENOENT);
	CHECK(counter(0, "probes_asked") == 2);
	world_end();
}

static const struct check_case cases[] = {
	{ "member_codec", test_codec },
	{ "member_revivals", test_revivals },
	{ "member_sync_turns", test_sync_turns },
	{ "member_sync_walk", test_sync_walk },
	{ "member_echo", test_echo },
	{ "member_index", test_index },
	{ "member_scenario", test_scenario },
	{ "member_rescue", test_rescue },
	{ "member_probe", test_probe },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	int rc;

	if (sodium_init() < 0)
		return 1;
	log_set_level(getenv("MEMBER_DEBUG") ? LOG_DEBUG : LOG_ERROR);
	rng_init(&net_rng, 7, "test-net", 0, 0);
	rc = check_main(argc, argv, cases, "test_member");
	rng_clear(&net_rng);
	return rc;
}
