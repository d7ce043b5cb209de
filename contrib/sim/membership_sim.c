/*
 * membership_sim: the membership module (src/member*.c, as the daemon
 * links it) run as N peers on a simulated network, to see what the
 * protocol does at sizes that cannot be started as daemons on one
 * machine (issue 33, item 3). It owns nothing but the simulated world:
 * an event queue of message deliveries and transport outcomes, one timer
 * per peer, the scenario, and what is measured.
 *
 * Modelled:
 * - each peer is one struct member with the daemon's defaults, driven the
 *   way the daemon drives it: member_tick when the timer armed for
 *   member_next_deadline fires (whole milliseconds, at least 1, as
 *   util_timer_at rounds; every 20 ms while leaving, as
 *   daemon_member_schedule), member_recv with the very bytes its send
 *   produced, so the real encoder and decoder run and sizes are real;
 * - peers in sites (round-robin by index): one latency within a site, one
 *   per pair of sites drawn uniformly from a range; each message lost
 *   with a probability, then either dropped (as over UDP) or, the default,
 *   delivered one retransmission timeout late, as TCP under the transport
 *   would deliver it;
 * - a crash: the peer stops at once and messages to it vanish; their
 *   senders' transport gives up TRANSPORT_DEFAULT_TIMEOUT_MS after each
 *   such send (sent callback -ETIMEDOUT, then member_peer_down), as for a
 *   host that lost power: no FIN, no early error. This is also what the
 *   live transport does when a process is killed on a host that stays
 *   up, as in the live tests on 127.0.0.1: its kernel refuses the
 *   connection, but libfabric's tcp provider keeps the send and the peer
 *   is failed at the deadline (contrib/bench/membership.sh). Or (--crash
 *   refused) as for a transport that heard the refusal: the sender hears
 *   so one round trip after each such send;
 * - a clean leave (member_leave; gone once member_leave_done), and fresh
 *   joins through one random live member.
 *
 * Not modelled: CPU (every call takes no time, so a peer starved of its
 * core never answers late: 32 live peers polled twenty times a second
 * took 7-12 s to be dead everywhere, unpolled 3 s, as simulated);
 * bandwidth and the transport's queues, handshakes, chunked bodies and
 * acknowledgements (a message takes its link's latency whatever its size;
 * bytes are counted, not paced); jitter and reordering other than by
 * losses; training, model exchange and the pull.
 *
 * The scenario: peer 0, then the others within --start-s, each told of
 * peer 0 only (every --peers naming it); agreement; 30 s to settle and
 * --steady-s of steady state, whose traffic is counted; then --kills,
 * one clean leave and --joins, one every --gap-s, each watched until
 * every running peer's view holds it so. Fully deterministic for a seed.
 * With --start warm the start is not run: every peer begins with the
 * whole job alive in its table, no news left to spread and its timers at
 * random phases, the state a job reaches some time after it agreed. The
 * start is what costs most at 10,000 peers (every record first heard is
 * news until it has been sent or heard back 3 log2 N times: 56 CPU
 * minutes cold against 4 warm, README), and the rest of the scenario
 * does not depend on how the job got there.
 * That table is filled through member_table.h, under member.h's API: it
 * is the only thing here the daemon never does.
 *
 * Cost: every simulated peer holds its own table (member_table.h: a
 * 64-byte record and its address string, 32 bytes from malloc here, in
 * an array grown by half; an index of 4 bytes a slot, at least twice the
 * array) and its message buffers, so memory grows as N squared: 253 MiB
 * at 1,000 peers, 1.3 GiB at 3,000, and 1.34 MB a peer that holds 10,000
 * records (13.4 GB for 10,000 peers). CPU per peer grows with the
 * messages' sizes and the start's news, no longer with scans of the
 * table: README, "Membership at scale", says what the runs took.
 *
 * Prints "key value" lines; contrib/sim/membership.py runs it for several
 * sizes and prints the tables.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "log.h"
#include "member.h"
#include "member_table.h"
#include "rng.h"
#include "simopt.h"
#include "simq.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

#define SIM_LEAVE_TICK	0.02	/* daemon_member_schedule while leaving */
#define SIM_SAMPLE	0.1	/* how often whole views are compared */
#define SIM_SETTLE_MAX	600.0	/* give up waiting for agreement after */
/* From agreement to the steady window: three anti-entropy rounds, by
 * which the news of the start has had its retransmissions. */
#define SIM_SETTLE	30.0
/* How long after the last join its joiners may take to list everyone. */
#define SIM_JOIN_MAX	120.0
#define SIM_MAX_SITES	16
#define SIM_NTYPES	(MEMBER_T_GOSSIP - MEMBER_T_FIRST + 1)
#define SIM_DOWN_S	(TRANSPORT_DEFAULT_TIMEOUT_MS / 1000.0)

static struct {
	int		n;		/* peers of the job at first */
	int		sites;
	double		local_s, remote_min_s, remote_max_s;
	double		loss, rto_s;
	uint64_t	seed;
	double		start_s;	/* the first n start within this */
	double		steady_s;
	int		kills, joins;
	double		gap_s;		/* between two events */
	int		refused;	/* --crash refused */
	int		warm;		/* --start warm */
} opt = { 100, 3, 0.0001, 0.020, 0.050, 0, 0.2, 1, 1.0, 60, 5, 3, 15, 0, 0 };

enum sim_nstate { SIM_OFF, SIM_UP, SIM_LEAVING, SIM_GONE };

struct sim_node {
	struct member	*m;
	char		addr[24];
	uint64_t	id;
	enum sim_nstate	st;
	double		at;		/* next member_tick; INFINITY: none */
	size_t		hpos;		/* place in the timer heap */
	unsigned	doubted;	/* views holding it suspect or dead */
	uint64_t	sent;		/* bytes, until agreement */
};

enum sim_ekind { SIM_DELIVER, SIM_SENT, SIM_DOWN };

struct sim_ev {
	double		at;
	uint64_t	seq;		/* ties go in the order of sending */
	enum sim_ekind	kind;
	int		from, to;
	int		status;		/* SIM_SENT */
	uint8_t		type;
	double		sent;
	proto_sent_cb	cb;
	void		*cbarg;
	size_t		len;
	uint8_t		data[];
};

/* An event whose spread is measured: every live view (each running peer
 * but the target) holding the target in state want. Views are counted
 * from the changes they report after the event; before a kill or a
 * leave none holds the target dead or left, unless it was falsely so. */
struct sim_watch {
	const char	*what;
	int		target;
	uint64_t	id;
	enum member_state want;
	double		start, first, done, full;
	unsigned	listed, live;	/* a joiner's view at the next event */
	uint8_t		*view;		/* per peer: its state + 1; 0 unknown */
	unsigned	have;
};

struct sim_tally {
	uint64_t	msgs[SIM_NTYPES], bytes[SIM_NTYPES];
	size_t		max[SIM_NTYPES];
	uint64_t	bodies;		/* over WIRE_INLINE_MAX */
};

static struct sim_node *nodes;
static int nnodes;			/* allocated: opt.n + opt.joins */
static unsigned nup;			/* nodes SIM_UP */
static double now;
static struct rng srng;
static double site_lat[SIM_MAX_SITES][SIM_MAX_SITES];

static struct simq evq;
static uint64_t ev_seq, events;
static size_t *tq;			/* timer heap of node indices */

static struct sim_watch *watches;
static int nwatches;
static struct sim_tally tally;
/* Views that marked a running peer suspect or dead, and episodes: times
 * such a peer went from doubted by no view to doubted by one. */
static uint64_t false_susp, false_dead, false_episodes;
static double false_from = INFINITY;	/* counted from agreement on */

/* --- queues -------------------------------------------------------------- */

/* Elements are pointers to events (their sizes vary with the message). */
static int
sim_ev_before(const void *x, const void *y)
{
	const struct sim_ev *a = *(struct sim_ev *const *)x, *b = *(struct sim_ev *const *)y;

	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void
sim_ev_push(struct sim_ev *e)
{
	e->seq = ev_seq++;
	simq_push(&evq, &e);
}

static struct sim_ev *
sim_ev_pop(void)
{
	struct sim_ev *e;

	simq_pop(&evq, &e);
	return e;
}

static double
sim_ev_next_at(void)
{
	const void *top = simq_peek(&evq);

	return top != NULL ? (*(struct sim_ev *const *)top)->at : INFINITY;
}

static struct sim_ev *
sim_ev_new(enum sim_ekind kind, double at, int from, int to, size_t len)
{
	struct sim_ev *e = xcalloc(1, sizeof(*e) + len);

	e->kind = kind;
	e->at = at;
	e->from = from;
	e->to = to;
	e->len = len;
	return e;
}

/* Move node k's timer to at (INFINITY: none) in the heap of timers. */
static void
sim_timer_set(int k, double at)
{
	size_t i = nodes[k].hpos, c;

	nodes[k].at = at;
	while (i > 0 && nodes[tq[(i - 1) / 2]].at > at) {
		tq[i] = tq[(i - 1) / 2];
		nodes[tq[i]].hpos = i;
		i = (i - 1) / 2;
	}
	while ((c = 2 * i + 1) < (size_t)nnodes) {
		if (c + 1 < (size_t)nnodes && nodes[tq[c + 1]].at < nodes[tq[c]].at)
			c++;
		if (nodes[tq[c]].at >= at)
			break;
		tq[i] = tq[c];
		nodes[tq[i]].hpos = i;
		i = c;
	}
	tq[i] = (size_t)k;
	nodes[k].hpos = i;
}

/* Arm k's timer as the daemon does after every call into member. */
static void
sim_schedule(int k)
{
	struct sim_node *nd = &nodes[k];
	double ms, at;

	if (nd->st != SIM_UP && nd->st != SIM_LEAVING) {
		sim_timer_set(k, INFINITY);
		return;
	}
	ms = ceil((member_next_deadline(nd->m) - now) * 1000.0);
	at = now + (ms < 1 ? 1 : ms) / 1000.0;
	if (nd->st == SIM_LEAVING && at > now + SIM_LEAVE_TICK)
		at = now + SIM_LEAVE_TICK;
	sim_timer_set(k, at);
}

/* --- the network --------------------------------------------------------- */

/* Addresses carry the index: 10.A.B.C:7000 with A.B.C its bytes. */
static int
sim_index(const char *addr)
{
	unsigned a, b, c;

	if (sscanf(addr, "10.%u.%u.%u:7000", &a, &b, &c) != 3)
		return -1;
	c |= a << 16 | b << 8;
	return c < (unsigned)nnodes ? (int)c : -1;
}

static double
sim_latency(int a, int b)
{
	return site_lat[a % opt.sites][b % opt.sites];
}

static int
sim_running(int k)
{
	return nodes[k].st == SIM_UP || nodes[k].st == SIM_LEAVING;
}

static int
sim_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	int from = (int)((struct sim_node *)arg - nodes), to = sim_index(addr), t;
	struct sim_ev *e;
	double at;

	if (to < 0 || type < MEMBER_T_FIRST || type > MEMBER_T_GOSSIP)
		return -EINVAL;
	t = type - MEMBER_T_FIRST;
	tally.msgs[t]++;
	tally.bytes[t] += len;
	if (len > tally.max[t])
		tally.max[t] = len;
	if (len > WIRE_INLINE_MAX)
		tally.bodies++;
	if (now < false_from)
		nodes[from].sent += len;
	at = now + sim_latency(from, to);
	if (opt.loss > 0 && rng_uniform(&srng) < opt.loss) {
		if (opt.rto_s == 0) {
			if (cb != NULL) {
				e = sim_ev_new(SIM_SENT, now + SIM_DOWN_S, from, to, 0);
				e->status = -ETIMEDOUT;
				e->cb = cb;
				e->cbarg = cbarg;
				sim_ev_push(e);
			}
			return 0;
		}
		at += opt.rto_s;
	}
	e = sim_ev_new(SIM_DELIVER, at, from, to, len);
	e->type = type;
	e->sent = now;
	e->cb = cb;
	e->cbarg = cbarg;
	memcpy(e->data, buf, len);
	sim_ev_push(e);
	return 0;
}

/* --- what is measured ---------------------------------------------------- */

static int
sim_observer(const struct sim_watch *w, int o)
{
	return o != w->target && nodes[o].st == SIM_UP;
}

static void
sim_watch_check(struct sim_watch *w)
{
	unsigned need = nup - (nodes[w->target].st == SIM_UP);

	if (w->done < 0 && w->have >= need)
		w->done = now;
}

/* The set of live views changed: count again. */
static void
sim_watch_recount(void)
{
	for (int i = 0; i < nwatches; i++) {
		struct sim_watch *w = &watches[i];

		w->have = 0;
		for (int o = 0; o < nnodes; o++)
			w->have += sim_observer(w, o) && w->view[o] == w->want + 1;
		sim_watch_check(w);
	}
}

static struct sim_watch *
sim_watch_add(const char *what, int target, enum member_state want)
{
	struct sim_watch *w = &watches[nwatches++];

	w->what = what;
	w->target = target;
	w->id = nodes[target].id;
	w->want = want;
	w->start = now;
	w->first = w->done = w->full = -1;
	w->view = xcalloc((size_t)nnodes, 1);
	return w;
}

static int
sim_doubt(enum member_state s)
{
	return s == MEMBER_SUSPECT || s == MEMBER_DEAD;
}

static void
sim_change(void *arg, const char *addr, uint64_t id, enum member_state old,
    enum member_state s)
{
	int o = (int)((struct sim_node *)arg - nodes), t = sim_index(addr);
	struct sim_node *tn;

	if (t < 0 || nodes[t].id != id)
		return;
	tn = &nodes[t];
	/* old == s: the record appeared, in state s */
	if (sim_doubt(s) && (old == s || !sim_doubt(old))) {
		if (tn->st == SIM_UP && now >= false_from) {
			false_episodes += tn->doubted == 0;
			if (s == MEMBER_SUSPECT)
				false_susp++;
			else
				false_dead++;
		}
		tn->doubted++;
	} else if (sim_doubt(old) && !sim_doubt(s) && old != s && tn->doubted > 0) {
		tn->doubted--;
	}
	for (int i = 0; i < nwatches; i++) {
		struct sim_watch *w = &watches[i];
		int was, is;

		if (w->target != t)
			continue;
		/* a join's first view; a kill's or leave's first doubt */
		if (w->first < 0 && (w->want == MEMBER_ALIVE || s != MEMBER_ALIVE))
			w->first = now;
		was = w->view[o] == w->want + 1;
		w->view[o] = (uint8_t)(s + 1);
		is = w->view[o] == w->want + 1;
		if (sim_observer(w, o))
			w->have = w->have + (unsigned)is - (unsigned)was;
		sim_watch_check(w);
	}
}

/* Does every running peer list every running peer alive? */
static int
sim_agree(void)
{
	for (int k = 0; k < nnodes; k++)
		if (nodes[k].st == SIM_UP && member_count(nodes[k].m, MEMBER_ALIVE) != nup)
			return 0;
	return 1;
}

/* --- the world ----------------------------------------------------------- */

static void
sim_deliver(struct sim_ev *e)
{
	struct sim_ev *r;

	if (!sim_running(e->to)) {
		/* the transport of the sender gives up on it */
		r = sim_ev_new(SIM_DOWN, opt.refused ? now + sim_latency(e->to, e->from) :
		    e->sent + SIM_DOWN_S, e->from, e->to, 0);
		r->cb = e->cb;
		r->cbarg = e->cbarg;
		sim_ev_push(r);
		return;
	}
	member_recv(nodes[e->to].m, now, nodes[e->from].id, nodes[e->from].addr,
	    e->type, e->data, e->len);
	sim_schedule(e->to);
	if (e->cb != NULL) {
		r = sim_ev_new(SIM_SENT, now + sim_latency(e->to, e->from), e->from, e->to, 0);
		r->cb = e->cb;
		r->cbarg = e->cbarg;
		sim_ev_push(r);
	}
}

static void
sim_event(struct sim_ev *e)
{
	switch (e->kind) {
	case SIM_DELIVER:
		sim_deliver(e);
		break;
	case SIM_SENT:
		if (!sim_running(e->from))
			break;
		e->cb(e->cbarg, e->status);
		sim_schedule(e->from);
		break;
	case SIM_DOWN:
		if (!sim_running(e->from))
			break;
		if (e->cb != NULL)
			e->cb(e->cbarg, -ETIMEDOUT);
		member_peer_down(nodes[e->from].m, now, nodes[e->to].addr);
		sim_schedule(e->from);
		break;
	}
}

static void
sim_tick(int k)
{
	struct sim_node *nd = &nodes[k];

	member_tick(nd->m, now);
	if (nd->st == SIM_LEAVING && member_leave_done(nd->m, now))
		nd->st = SIM_GONE;	/* the daemon exits */
	sim_schedule(k);
}

/* Run everything due up to t; the clock ends at t. */
static void
sim_run_until(double t)
{
	for (;;) {
		double te = sim_ev_next_at();
		double tt = nodes[tq[0]].at;

		if (te > t && tt > t)
			break;
		events++;
		if (te <= tt) {
			struct sim_ev *e = sim_ev_pop();

			now = e->at;
			sim_event(e);
			free(e);
		} else {
			now = tt;
			sim_tick((int)tq[0]);
		}
	}
	now = t;
}

static int
sim_start(int k, int seed)
{
	struct sim_node *nd = &nodes[k];
	struct member_ops ops = { sim_send, sim_change, nd };
	struct member_params p;
	struct errbuf err;
	int rc;

	memset(&p, 0, sizeof(p));	/* 0: the daemon's defaults */
	p.self_addr = nd->addr;
	p.self_id = nd->id;
	p.incarnation = 1700000000000ull + (uint64_t)(now * 1000);
	if ((rc = member_new(&p, &ops, now, &nd->m, &err)) < 0) {
		fprintf(stderr, "membership_sim: %s\n", err.msg);
		return rc;
	}
	if (seed >= 0 && (rc = member_add_seed(nd->m, nodes[seed].addr, now)) < 0)
		return rc;
	nd->st = SIM_UP;
	nup++;
	sim_schedule(k);
	sim_watch_recount();
	return 0;
}

/* --start warm: k's table holds every peer of the job alive, with
 * nothing left to spread, and its timers are at random phases within
 * their periods, as after a while of running (see the top comment). */
static void
sim_warm(int k)
{
	struct member *m = nodes[k].m;
	struct member_ops ops = m->ops;
	struct member_update u;

	m->ops.change = NULL;	/* no view is watched yet */
	u.state = MEMBER_ALIVE;
	for (int j = 0; j < opt.n; j++) {
		if (j == k)
			continue;
		u.id = nodes[j].id;
		u.incarnation = member_incarnation(nodes[j].m);
		snprintf(u.addr, sizeof(u.addr), "%s", nodes[j].addr);
		member_table_apply(m, &u, now);
	}
	m->ops = ops;
	member_table_hush(m);
	m->next_probe = now + rng_uniform(&srng) * m->p.period_ms / 1000.0;
	m->next_gossip = now + rng_uniform(&srng) * m->p.gossip_ms / 1000.0;
	m->next_sync = now + rng_uniform(&srng) * m->p.sync_ms / 1000.0;
	sim_schedule(k);
}

/* A random running peer, or -1. */
static int
sim_pick_up(void)
{
	unsigned pick;

	if (nup == 0)
		return -1;
	pick = (unsigned)rng_below(&srng, nup);
	for (int k = 0; k < nnodes; k++)
		if (nodes[k].st == SIM_UP && pick-- == 0)
			return k;
	return -1;
}

static void
sim_stop(int k, enum sim_nstate st)
{
	nodes[k].st = st;
	nup--;
	sim_schedule(k);
	sim_watch_recount();
}

static int
sim_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* --- output -------------------------------------------------------------- */

/* Median and maximum of the field at off of the watches named what;
 * -1 for the maximum when one never completed. */
static void
sim_print_summary(const char *what, const char *name, size_t off)
{
	double v[256];
	int n = 0, open = 0;

	for (int i = 0; i < nwatches && n < (int)GD_ARRAY_SIZE(v); i++) {
		const struct sim_watch *w = &watches[i];
		double x = *(const double *)((const char *)w + off);

		if (strcmp(w->what, what) != 0)
			continue;
		if (x < 0)
			open++;
		else
			v[n++] = x - w->start;
	}
	if (n == 0 && open == 0)
		return;
	qsort(v, (size_t)n, sizeof(v[0]), sim_cmp_double);
	printf("%s_%s_median_s %.3f\n", what, name, n ? (n % 2 ? v[n / 2] :
	    (v[n / 2 - 1] + v[n / 2]) / 2) : -1.0);
	printf("%s_%s_max_s %.3f\n", what, name, open || n == 0 ? -1.0 : v[n - 1]);
}

static uint64_t
sim_tally_bytes(const struct sim_tally *t)
{
	uint64_t b = 0;

	for (int i = 0; i < SIM_NTYPES; i++)
		b += t->bytes[i];
	return b;
}

/* ta: at agreement, t0: after the settle, t1: after the steady state. */
static void
sim_print(double agreed, double steady_from, const struct sim_tally *ta,
    const struct sim_tally *t0, const struct sim_tally *t1, unsigned steady_peers,
    double wall0)
{
	static const char *const names[SIM_NTYPES] = { "ping", "ack", "ping_req", "sync",
		"gossip" };
	uint64_t msgs = 0, bytes = 0;
	size_t max = 0;
	int maxt = 0, busiest = 0;
	double span = opt.steady_s * steady_peers, watched = now - false_from;
	struct rusage ru;
	struct timespec ts;

	printf("peers %d\nsites %d\nloss %g\nseed %llu\nstart %s\n", opt.n, opt.sites,
	    opt.loss, (unsigned long long)opt.seed, opt.warm ? "warm" : "cold");
	printf("agree_s %.3f\n", agreed);
	for (int k = 0; k < opt.n; k++)
		if (nodes[k].sent > nodes[busiest].sent)
			busiest = k;
	printf("start_busiest_peer %d\nstart_busiest_bytes %llu\n", busiest,
	    (unsigned long long)nodes[busiest].sent);
	/* What the start cost a peer, and what it still sent while the job
	 * settled: news of the start not yet spread. */
	printf("start_bytes_per_peer %.0f\nsettle_bytes_per_peer_s %.1f\n",
	    (double)sim_tally_bytes(ta) / opt.n,
	    (double)(sim_tally_bytes(t0) - sim_tally_bytes(ta)) / (SIM_SETTLE * steady_peers));
	for (int i = 0; i < nwatches; i++) {
		const struct sim_watch *w = &watches[i];

		printf("event %s peer %d first_change_s %.3f everywhere_s %.3f", w->what,
		    w->target, w->first < 0 ? -1 : w->first - w->start,
		    w->done < 0 ? -1 : w->done - w->start);
		if (w->want == MEMBER_ALIVE)
			printf(" full_view_s %.3f lists %u of %u", w->full < 0 ? -1 :
			    w->full - w->start, w->listed, w->live);
		printf("\n");
	}
	sim_print_summary("kill", "dead", offsetof(struct sim_watch, done));
	sim_print_summary("kill", "suspect", offsetof(struct sim_watch, first));
	sim_print_summary("leave", "left", offsetof(struct sim_watch, done));
	sim_print_summary("join", "known", offsetof(struct sim_watch, done));
	sim_print_summary("join", "full_view", offsetof(struct sim_watch, full));
	printf("false_suspicions %llu\nfalse_deaths %llu\nfalse_episodes %llu\n"
	    "watched_s %.1f\nfalse_suspicions_per_h %.2f\n",
	    (unsigned long long)false_susp, (unsigned long long)false_dead,
	    (unsigned long long)false_episodes, watched,
	    watched > 0 ? false_susp * 3600.0 / watched : 0);
	printf("steady_from_s %.1f\nsteady_s %.1f\n", steady_from, opt.steady_s);
	for (int i = 0; i < SIM_NTYPES; i++) {
		uint64_t b = t1->bytes[i] - t0->bytes[i], m = t1->msgs[i] - t0->msgs[i];

		printf("steady_bytes_per_peer_s_%s %.1f\n", names[i], span > 0 ? b / span : 0);
		msgs += m;
		bytes += b;
	}
	printf("steady_bytes_per_peer_s %.1f\nsteady_msgs_per_peer_s %.2f\n",
	    span > 0 ? bytes / span : 0, span > 0 ? msgs / span : 0);
	/* what the transport adds to each inline message (wire.h) */
	printf("steady_frame_bytes_per_peer_s %.1f\n", span > 0 ?
	    (bytes + msgs * (double)(WIRE_HEADER_SIZE + WIRE_MAC_SIZE)) / span : 0);
	for (int i = 0; i < SIM_NTYPES; i++) {
		printf("max_bytes_%s %zu\n", names[i], tally.max[i]);
		if (tally.max[i] > max) {
			max = tally.max[i];
			maxt = i;
		}
	}
	printf("max_msg_bytes %zu\nmax_msg_type %s\nmax_message_size %llu\n"
	    "wire_inline_max %zu\nmsgs_over_inline %llu\n", max, names[maxt],
	    (unsigned long long)TRANSPORT_DEFAULT_MAX_MESSAGE, (size_t)WIRE_INLINE_MAX,
	    (unsigned long long)tally.bodies);
	getrusage(RUSAGE_SELF, &ru);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("sim_s %.1f\nevents %llu\ncpu_s %.2f\nwall_s %.2f\nmaxrss_mib %.1f\n", now,
	    (unsigned long long)events,
	    ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec +
	    ru.ru_stime.tv_usec) / 1e6, ts.tv_sec + ts.tv_nsec / 1e9 - wall0,
	    ru.ru_maxrss / 1024.0);
}

/* --- the scenario -------------------------------------------------------- */

/* Run to end, noting when each joiner first lists every running peer
 * alive; with stop, only until all of them have. */
static void
sim_joiners_until(double end, int stop)
{
	while (now < end) {
		int open = 0;

		sim_run_until(now + SIM_SAMPLE);
		for (int i = 0; i < nwatches; i++) {
			struct sim_watch *w = &watches[i];

			if (w->want != MEMBER_ALIVE || w->full >= 0)
				continue;
			if (member_count(nodes[w->target].m, MEMBER_ALIVE) == nup)
				w->full = now;
			else
				open = 1;
		}
		if (stop && !open)
			break;
	}
}

static int
sim_scenario(void)
{
	struct sim_tally ta, t0, t1;
	struct timespec ts;
	double *starts = NULL, agreed = -1, steady_from, wall0;
	unsigned steady_peers;
	int rc, k;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	wall0 = ts.tv_sec + ts.tv_nsec / 1e9;
	starts = xcalloc((size_t)opt.n, sizeof(*starts));
	if (opt.warm) {
		for (k = 0; k < opt.n; k++)
			if ((rc = sim_start(k, -1)) < 0)
				goto out;
		for (k = 0; k < opt.n; k++)
			sim_warm(k);
		agreed = 0;
		goto settle;
	}
	/* Peer 0 first, the others within start_s, each told of peer 0 (all
	 * given the same --peers) */
	if ((rc = sim_start(0, -1)) < 0)
		goto out;
	for (k = 1; k < opt.n; k++)
		starts[k] = rng_uniform(&srng) * opt.start_s;
	qsort(starts + 1, (size_t)opt.n - 1, sizeof(*starts), sim_cmp_double);
	for (k = 1; k < opt.n; k++) {
		sim_run_until(starts[k]);
		if ((rc = sim_start(k, 0)) < 0)
			goto out;
	}
	while (now < SIM_SETTLE_MAX) {
		sim_run_until(now + SIM_SAMPLE);
		if (sim_agree()) {
			agreed = now - starts[opt.n - 1];
			break;
		}
	}
settle:
	ta = tally;
	false_from = now;
	sim_run_until(now + SIM_SETTLE);
	steady_from = now;
	steady_peers = nup;
	t0 = tally;
	sim_run_until(now + opt.steady_s);
	t1 = tally;
	for (k = 0; k < opt.kills; k++) {
		int v = sim_pick_up();

		sim_watch_add("kill", v, MEMBER_DEAD);
		sim_stop(v, SIM_GONE);
		sim_run_until(now + opt.gap_s);
	}
	if ((k = sim_pick_up()) >= 0) {
		sim_watch_add("leave", k, MEMBER_LEFT);
		member_leave(nodes[k].m, now);
		sim_stop(k, SIM_LEAVING);
		sim_run_until(now + opt.gap_s);
	}
	for (k = opt.n; k < nnodes; k++) {
		struct sim_watch *w = sim_watch_add("join", k, MEMBER_ALIVE);

		if ((rc = sim_start(k, sim_pick_up())) < 0)
			goto out;
		sim_joiners_until(now + opt.gap_s, 0);
		w->listed = member_count(nodes[k].m, MEMBER_ALIVE);
		w->live = nup;
	}
	sim_joiners_until(now + SIM_JOIN_MAX, 1);
	sim_print(agreed, steady_from, &ta, &t0, &t1, steady_peers, wall0);
	rc = 0;
out:
	free(starts);
	return rc;
}

/* --- options ------------------------------------------------------------- */

static void
sim_usage(FILE *f)
{
	fprintf(f,
	    "Usage: membership_sim [options]\n"
	    "Runs the membership module as N peers on a simulated network: they\n"
	    "start, agree, run steadily; then kills, a leave and fresh joins, one\n"
	    "every --gap-s. Prints \"key value\" lines (contrib/sim/membership.py).\n"
	    "  -n, --peers N        peers at first (default 100)\n"
	    "      --sites S        sites, peers assigned round-robin (default 3, at most %d)\n"
	    "      --local-ms MS    latency within a site (default 0.1)\n"
	    "      --remote-ms A,B  latency between two sites, drawn per pair (default 20,50)\n"
	    "      --loss P         share of messages lost (default 0)\n"
	    "      --rto-ms MS      a lost message arrives this much later, as TCP\n"
	    "                       resends it; 0 drops it (default 200)\n"
	    "      --seed X         the random seed (default 1)\n"
	    "      --start-s S      the first N start within S seconds (default 1)\n"
	    "      --start cold|warm  cold (the default): each starts told of peer 0;\n"
	    "                       warm: each starts with the whole job in its table,\n"
	    "                       nothing left to spread, as some time after agreeing\n"
	    "      --steady-s S     steady state measured for S seconds (default 60)\n"
	    "      --kills K        peers killed, one by one (default 5)\n"
	    "      --joins J        fresh peers joining, one by one (default 3)\n"
	    "      --gap-s S        seconds between two events (default 15)\n"
	    "      --crash silent|refused  a killed peer's host is lost, its senders'\n"
	    "                       transport gives up after %u ms (silent, the default),\n"
	    "                       as it does for a killed process on a host that stays\n"
	    "                       up, or hears the refusal at once (refused)\n"
	    "  -h, --help           this text\n", SIM_MAX_SITES,
	    (unsigned)TRANSPORT_DEFAULT_TIMEOUT_MS);
}

static int
sim_parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "peers", required_argument, NULL, 'n' },
		{ "sites", required_argument, NULL, 's' },
		{ "local-ms", required_argument, NULL, 'l' },
		{ "remote-ms", required_argument, NULL, 'r' },
		{ "loss", required_argument, NULL, 'p' },
		{ "rto-ms", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 'x' },
		{ "start-s", required_argument, NULL, 'b' },
		{ "steady-s", required_argument, NULL, 'w' },
		{ "kills", required_argument, NULL, 'k' },
		{ "joins", required_argument, NULL, 'j' },
		{ "gap-s", required_argument, NULL, 'g' },
		{ "crash", required_argument, NULL, 'c' },
		{ "start", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static const char *const crashes[] = { "silent", "refused" };
	static const char *const starts[] = { "cold", "warm" };
	double a;
	int c, rc = 0;

	while (rc == 0 && (c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': rc = simopt_int("peers", optarg, 2, 1 << 24, &opt.n); break;
		case 's': rc = simopt_int("sites", optarg, 1, SIM_MAX_SITES, &opt.sites); break;
		case 'l':
			rc = simopt_real("local-ms", optarg, 0, 1e6, &a);
			opt.local_s = a / 1000;
			break;
		case 'r':
			rc = simopt_range_ms("remote-ms", optarg, &opt.remote_min_s, &opt.remote_max_s);
			break;
		case 'p': rc = simopt_real("loss", optarg, 0, 0.999, &opt.loss); break;
		case 't':
			rc = simopt_real("rto-ms", optarg, 0, 1e6, &a);
			opt.rto_s = a / 1000;
			break;
		case 'x': rc = simopt_u64("seed", optarg, &opt.seed); break;
		case 'b': rc = simopt_real("start-s", optarg, 0, 1e6, &opt.start_s); break;
		case 'w': rc = simopt_real("steady-s", optarg, 0, 1e6, &opt.steady_s); break;
		case 'k': rc = simopt_int("kills", optarg, 0, 1 << 24, &opt.kills); break;
		case 'j': rc = simopt_int("joins", optarg, 0, 1 << 24, &opt.joins); break;
		case 'g': rc = simopt_real("gap-s", optarg, 1e-3, 1e6, &opt.gap_s); break;
		case 'c': rc = simopt_choice("crash", optarg, crashes, 2, &opt.refused); break;
		case 'a': rc = simopt_choice("start", optarg, starts, 2, &opt.warm); break;
		case 'h': sim_usage(stdout); exit(0);
		default: return -EINVAL;
		}
	}
	if (rc < 0)
		return rc;
	if (optind != argc || opt.n < 2 || opt.n + opt.joins > 1 << 24 || opt.sites < 1 ||
	    opt.sites > SIM_MAX_SITES || opt.local_s < 0 || opt.loss < 0 || opt.loss >= 1 ||
	    opt.rto_s < 0 || opt.start_s < 0 || opt.steady_s < 0 || opt.kills < 0 ||
	    opt.joins < 0 || opt.kills + opt.joins + 1 >= opt.n || opt.gap_s <= 0)
		return -EINVAL;
	return 0;
}

int
main(int argc, char **argv)
{
	int rc;

	simopt_prog = "membership_sim";
	if (sim_parse(argc, argv) < 0) {
		sim_usage(stderr);
		return 2;
	}
	log_set_level(LOG_ERROR);
	simq_init(&evq, sizeof(struct sim_ev *), sim_ev_before);
	rng_init(&srng, opt.seed, "membership_sim", 0, 0);
	for (int a = 0; a < opt.sites; a++)
		for (int b = 0; b <= a; b++)
			site_lat[a][b] = site_lat[b][a] = a == b ? opt.local_s :
			    opt.remote_min_s + rng_uniform(&srng) *
			    (opt.remote_max_s - opt.remote_min_s);
	nnodes = opt.n + opt.joins;
	nodes = xcalloc((size_t)nnodes, sizeof(*nodes));
	tq = xcalloc((size_t)nnodes, sizeof(*tq));
	watches = xcalloc((size_t)opt.kills + 1 + (size_t)opt.joins, sizeof(*watches));
	for (int k = 0; k < nnodes; k++) {
		snprintf(nodes[k].addr, sizeof(nodes[k].addr), "10.%d.%d.%d:7000",
		    k >> 16 & 255, k >> 8 & 255, k & 255);
		nodes[k].id = rng_u64(&srng) | 1;
		nodes[k].at = INFINITY;
		nodes[k].hpos = (size_t)k;
		tq[k] = (size_t)k;
	}
	rc = sim_scenario();
	for (int k = 0; k < nnodes; k++)
		member_free(nodes[k].m);
	for (int i = 0; i < nwatches; i++)
		free(watches[i].view);
	while (simq_peek(&evq) != NULL)
		free(sim_ev_pop());
	simq_free(&evq);
	free(tq);
	free(watches);
	free(nodes);
	rng_clear(&srng);
	return rc < 0 ? 1 : 0;
}
