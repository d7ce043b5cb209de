/*
 * pull: see pull.h. Layouts (little-endian):
 *
 * PULL   0 id(u64)  8 off(u64)  16 len(u64)  24 values(u8: the format asked,
 *        enum gossip_values as in gossip_wire.h but int2, a share's
 *        format (gossip_values_whole), in the low 6 bits; the
 *        high bit PULL_REQ_DONE_OK: a donor whose training is over may
 *        answer; the next bit PULL_REQ_DIGEST: at 25 follows the digest
 *        of the asker's starting model, PULL_DIGEST_BYTES)
 * CHUNK  0 id(u64)  8 off(u64)  16 len(u64)  24 step(u64)  32 status(i32)
 *        36 values(u8: the format asked)  37 0(3 bytes)  40 len values in
 *        that format, gossip_values_bytes of them (an error CHUNK: len and
 *        step 0, no values)
 *
 * Before the format byte a PULL took 24 bytes and a CHUNK carried fp32
 * only: such peers and these cannot pull from each other (each counts the
 * other's PULL malformed; the joiner's requests time out). A donor that
 * predates PULL_REQ_DONE_OK counts a PULL with it malformed, so a joiner
 * whose every live member is done cannot pull from such donors; the bit
 * is 0 in every other PULL, which such donors serve.
 *
 * A donor that predates PULL_REQ_DIGEST counts a PULL with it malformed:
 * an agreement's asker then waits out a chunk's deadline for it, and the
 * other donors answer.
 *
 * A donor that started the job from the model of the PULL's digest, and
 * has not reached PULL_SAME_STEPS, answers -EEXIST, without values
 * (pull.h), before anything else: it
 * holds no model to serve while its own process's first step is pending,
 * but knows what the job starts from.
 *
 * A done donor asked without PULL_REQ_DONE_OK answers -ESTALE, without
 * values: in a first version it sent its values flagged done, and a
 * joiner that drew done donors four times at the end of a soak received
 * 3.2 times the model to keep 0.8 of it.
 *
 * A request id names the chunk (low 24 bits), the donor (next 8) and the
 * generation of that chunk's requests (high 32), so a late answer to a
 * request already given up on is recognised and dropped. Answers are kept
 * per donor as they arrive, decoded to fp32, and averaged when the chunk's
 * last donor has answered, failed or timed out.
 *
 * Answers wait in slots, one per chunk asked and not averaged (at most
 * PULL_WINDOW), each with room for every donor's answer, not in a copy
 * of the model per donor: that was PULL_MAX_DONORS times the model, all
 * of it written once, and for a 296 MB model its first touch (page
 * faults) took a third of the joiner's time.
 *
 * A donor is dropped when a chunk of its holds a non-finite value, or
 * lies farther from the chunk of the donor with the smallest RMS than
 * GOSSIP_FAR_GAMMA times that RMS. The smallest is the reference because
 * a diverging model grows; honest donors differ by ~40% of the RMS.
 *
 * One attempt's state (donors, chunks, the average: a float a parameter,
 * and the answer slots) lives in a struct pull_join made at its start and
 * freed at its end, so a donor carries only its CHUNK buffer, grown to the
 * largest slice asked and reused.
 */
#include "pull.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "gossip.h"
#include "gossip_wire.h"
#include "log.h"
#include "wire.h"

_Static_assert(PULL_T_FIRST > GOSSIP_T_LAST, "the pull's types follow gossip's");

static const char *const pull_type_names[PULL_T_LAST - PULL_T_FIRST + 1] = {
	[PULL_T_PULL - PULL_T_FIRST] = "model_pull",
	[PULL_T_CHUNK - PULL_T_FIRST] = "model_chunk",
};

const struct proto pull_proto = {
	"model pull", PULL_T_FIRST, PULL_T_LAST, pull_type_names
};

/* PULL's format byte: a done donor may answer; a digest follows. */
#define PULL_REQ_DONE_OK	0x80
#define PULL_REQ_DIGEST		0x40
#define PULL_REQ_FLAGS		(PULL_REQ_DONE_OK | PULL_REQ_DIGEST)

/* Donors a joiner remembers as done (pull.h): past this, the oldest is
 * forgotten, and asked again at worst once more. */
#define PULL_DONE_MAX	64

/* Members drawn after an attempt's donors, each taking in turn the place
 * of one found done (pull_donor_done): late in a job many members are
 * done, and a joiner that only dropped them pulled from fewer donors
 * (9 of 29 joiners of a 30-minute soak took one donor's model; three of
 * them ended above the job's median distance, none of the others). */
#define PULL_SPARES	8

/* Per chunk and donor: where that request stands. */
enum { ASK_NONE, ASK_PENDING, ASK_ANSWERED, ASK_FAILED };

struct pull_slice {
	size_t off, len;
	uint32_t gen;             /* bumps when the chunk is asked again */
	uint8_t ask[PULL_MAX_DONORS];
	double deadline;
	unsigned answers;         /* values summed so far */
	int have;                 /* averaged and final */
	int slot;                 /* where its answers wait; -1 none */
};

struct pull_donor {
	char addr[WIRE_ADDR_MAX + 1];
	int failed;
	int64_t step;             /* the highest its answers told */
};

/* One attempt of a joiner, from the choice of donors to the model. */
struct pull_join {
	float *x;                 /* averages */
	float *slots;             /* answer slots (see top) */
	size_t stride;            /* floats of one answer: a chunk's at most */
	int free_slots[PULL_WINDOW], nfree;
	struct pull_slice *chunks;
	size_t nchunks, have;
	size_t asked;             /* chunks asked so far, in order */
	struct pull_donor donors[PULL_MAX_DONORS];
	int ndonors;
	char spares[PULL_SPARES][WIRE_ADDR_MAX + 1];
	int nspares, next_spare;
	int failed;
	int nomodel;              /* donors out for holding no model yet */
	int take_done;            /* every live member was done: take them */
	int lowest;               /* start agreement: no live member is below us */
	int same;                 /* a donor started the job from our digest's model */
	char same_addr[WIRE_ADDR_MAX + 1];
	enum gossip_values fmt;   /* every chunk of this attempt is asked in it */
	uint64_t bytes;           /* of values in the answers taken */
	uint64_t requests, reasks, refused, timeouts, stale, malformed, finished;
	uint64_t rejected[GOSSIP_REFUSE_N];
};

struct pull {
	struct model *m;
	double timeout;
	struct pull_ops ops;
	enum gossip_values values; /* a joiner asks for (pull_set_values) */
	int joining;              /* no model yet: pull before serving */
	int ready;                /* holds the job's model: may serve it */
	int done;                 /* its training is over (pull_set_done) */
	/* A joiner's: members that answered that their training is over
	 * (-ESTALE), a ring of the latest PULL_DONE_MAX. */
	char done_addrs[PULL_DONE_MAX][WIRE_ADDR_MAX + 1];
	size_t ndone, done_next;
	double first_seen;        /* when a joiner first knew a member; < 0 not yet */
	double retry_at;          /* after a failed attempt: the next, not before */
	/* A joiner alone (pull.h): since when, how long it may last, whether
	 * it said so, whether it gave up. */
	double alone_since;       /* < 0: not alone */
	double failing_since;     /* first of the attempts failed in a row; < 0 none */
	double wait;              /* 0: forever */
	int stranded, gave_up;
	/* Start agreement (pull_agree): its deadline, this peer's address. */
	int agree;
	double agree_timeout;
	char self[WIRE_ADDR_MAX + 1];
	/* The digest of the model this peer's process starts from, and of
	 * the model it started the job from when that was its own (pull.h). */
	uint8_t own[PULL_DIGEST_BYTES], start[PULL_DIGEST_BYTES];
	int has_own, has_start;
	struct pull_join *join;   /* the attempt running, if any */
	/* The donor's CHUNK, and the slice it gathers before encoding it,
	 * each with room for wcap values in fp32. */
	uint8_t *wire;
	float *slice;
	size_t wcap;
	uint64_t served, same, malformed, stale, own_nonfinite;
};

size_t
pull_req_encode(uint8_t out[PULL_REQ_MAX], const struct pull_req *r)
{
	wire_put_u64(out, r->id);
	wire_put_u64(out + 8, r->off);
	wire_put_u64(out + 16, r->len);
	out[24] = (uint8_t)((unsigned)r->fmt | (r->done_ok ? PULL_REQ_DONE_OK : 0) |
	    (r->has_digest ? PULL_REQ_DIGEST : 0));
	if (!r->has_digest)
		return PULL_REQ_SIZE;
	memcpy(out + PULL_REQ_SIZE, r->digest, PULL_DIGEST_BYTES);
	return PULL_REQ_MAX;
}

int
pull_req_decode(const uint8_t *buf, size_t len, struct pull_req *r)
{
	if (len < PULL_REQ_SIZE || !gossip_values_whole(buf[24] & ~PULL_REQ_FLAGS))
		return -EBADMSG;
	r->has_digest = (buf[24] & PULL_REQ_DIGEST) != 0;
	if (len != (r->has_digest ? PULL_REQ_MAX : PULL_REQ_SIZE))
		return -EBADMSG;
	r->id = wire_get_u64(buf);
	r->off = wire_get_u64(buf + 8);
	r->len = wire_get_u64(buf + 16);
	r->fmt = (enum gossip_values)(buf[24] & ~PULL_REQ_FLAGS);
	r->done_ok = (buf[24] & PULL_REQ_DONE_OK) != 0;
	if (r->has_digest)
		memcpy(r->digest, buf + PULL_REQ_SIZE, PULL_DIGEST_BYTES);
	return 0;
}

int
pull_chunk_decode(const uint8_t *buf, size_t len, struct pull_chunk *c)
{
	if (len < PULL_CHUNK_HEADER)
		return -EBADMSG;
	c->id = wire_get_u64(buf);
	c->off = wire_get_u64(buf + 8);
	c->len = wire_get_u64(buf + 16);
	c->step = wire_get_u64(buf + 24);
	c->status = (int32_t)wire_get_u32(buf + 32);
	c->fmt = (enum gossip_values)buf[36];
	c->values = buf + PULL_CHUNK_HEADER;
	if (c->status > 0 || !gossip_values_whole(buf[36]))
		return -EBADMSG;
	if (c->status < 0)
		return len == PULL_CHUNK_HEADER ? 0 : -EBADMSG;
	if (c->len == 0 || c->len > PULL_CHUNK_FLOATS ||
	    len != PULL_CHUNK_HEADER + gossip_values_bytes(c->fmt, c->len))
		return -EBADMSG;
	return 0;
}

int
pull_new(struct model *m, double timeout, int joining, const struct pull_ops *ops,
    struct pull **out)
{
	struct pull *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return -ENOMEM;
	p->m = m;
	p->timeout = timeout;
	p->ops = *ops;
	p->joining = joining;
	p->ready = !joining;
	p->first_seen = -1;
	p->alone_since = -1;
	p->failing_since = -1;
	*out = p;
	return 0;
}

static void
pull_join_free(struct pull_join *j)
{
	if (j == NULL)
		return;
	free(j->x);
	free(j->slots);
	free(j->chunks);
	free(j);
}

void
pull_free(struct pull *p)
{
	if (p == NULL)
		return;
	pull_join_free(p->join);
	free(p->wire);
	free(p->slice);
	free(p);
}

void
pull_set_timeout(struct pull *p, double timeout)
{
	p->timeout = timeout;
}

void
pull_set_values(struct pull *p, enum gossip_values fmt)
{
	p->values = fmt;
}

void
pull_set_wait(struct pull *p, double secs)
{
	p->wait = secs;
}

int
pull_stranded(const struct pull *p)
{
	return p->stranded && !p->gave_up;
}

void
pull_set_ready(struct pull *p, int ready)
{
	p->ready = ready;
}

void
pull_set_done(struct pull *p, int done)
{
	p->done = done;
}

void
pull_agree(struct pull *p, const char *self, double timeout)
{
	p->joining = 1;
	p->ready = 0;
	p->agree = 1;
	p->agree_timeout = timeout;
	snprintf(p->self, sizeof(p->self), "%s", self);
}

void
pull_set_digest(struct pull *p, const uint8_t digest[PULL_DIGEST_BYTES])
{
	memcpy(p->own, digest, PULL_DIGEST_BYTES);
	p->has_own = 1;
}

/* --- donor ---------------------------------------------------------------- */

static void
pull_serve_error(struct pull *p, const char *to, const struct pull_req *r, int status)
{
	uint8_t e[PULL_CHUNK_HEADER];

	memset(e, 0, sizeof(e));
	wire_put_u64(e, r->id);
	wire_put_u64(e + 8, r->off);
	wire_put_u32(e + 32, (uint32_t)status);
	e[36] = (uint8_t)r->fmt;
	p->ops.send(p->ops.arg, to, PULL_T_CHUNK, e, sizeof(e), NULL, NULL);
}

/* Grow the CHUNK buffers to n values (fp32, the widest format); they
 * stay for the next request. */
static int
pull_reserve(struct pull *p, size_t n)
{
	uint8_t *w;
	float *f;

	if (n <= p->wcap)
		return 0;
	if ((w = realloc(p->wire, PULL_CHUNK_HEADER + n * sizeof(float))) == NULL)
		return -ENOMEM;
	p->wire = w;
	if ((f = realloc(p->slice, n * sizeof(float))) == NULL)
		return -ENOMEM;
	p->slice = f;
	p->wcap = n;
	return 0;
}

/* Serve one slice of the model to a joiner. */
static void
pull_serve(struct pull *p, const char *from, const uint8_t *buf, size_t len)
{
	struct model_range range;
	struct pull_req r;
	int status = 0;

	if (pull_req_decode(buf, len, &r) < 0) {
		p->malformed++;
		return;
	}
	if (r.has_digest && p->has_start && p->ops.step(p->ops.arg) < PULL_SAME_STEPS &&
	    sodium_memcmp(r.digest, p->start, PULL_DIGEST_BYTES) == 0) {
		p->same++;
		pull_serve_error(p, from, &r, -EEXIST);
		return;
	}
	/* No model yet: a joiner's, or an attached process's before its
	 * first step (the vector holds zeros or half its values). */
	if (p->joining || !p->ready)
		status = -EAGAIN;
	/* Its model stopped where its budget ended (pull.h). */
	else if (p->done && !r.done_ok)
		status = -ESTALE;
	else if (r.len == 0 || r.len > PULL_CHUNK_FLOATS || r.off >= p->m->d ||
	    r.len > p->m->d - r.off)
		status = -ERANGE;
	else
		status = pull_reserve(p, r.len);
	if (status == 0) {
		range = (struct model_range){ r.off, r.len };
		status = model_gather(p->m, &range, 1, p->slice);
		/* A joiner must not start from our divergence. */
		if (status == 0 && !gossip_finite(p->slice, r.len)) {
			p->own_nonfinite++;
			status = -EDOM;
		}
	}
	if (status < 0) {
		pull_serve_error(p, from, &r, status);
		return;
	}
	memset(p->wire, 0, PULL_CHUNK_HEADER);
	wire_put_u64(p->wire, r.id);
	wire_put_u64(p->wire + 8, r.off);
	wire_put_u64(p->wire + 16, r.len);
	wire_put_u64(p->wire + 24, p->ops.step(p->ops.arg));
	p->wire[36] = (uint8_t)r.fmt;
	gossip_values_put(p->wire + PULL_CHUNK_HEADER, p->slice, r.len, r.fmt);
	p->ops.send(p->ops.arg, from, PULL_T_CHUNK, p->wire,
	    PULL_CHUNK_HEADER + gossip_values_bytes(r.fmt, r.len), NULL, NULL);
	p->served++;
}

/* --- joiner --------------------------------------------------------------- */

/* Where donor di's answer to chunk c waits. */
static float *
pull_answer(const struct pull_join *j, const struct pull_slice *c, int di)
{
	return j->slots + ((size_t)c->slot * PULL_MAX_DONORS + (size_t)di) * j->stride;
}

/* Ask donor di for chunk ci under the chunk's generation; 1 if sent. */
static int
pull_ask_donor(struct pull *p, size_t ci, int di)
{
	struct pull_join *j = p->join;
	struct pull_slice *c = &j->chunks[ci];
	struct pull_req r = { (uint64_t)c->gen << 32 | (uint64_t)di << 24 | ci, c->off, c->len,
	    j->fmt, j->take_done || p->agree, p->agree && p->has_own, { 0 } };
	uint8_t buf[PULL_REQ_MAX];
	size_t len;

	if (r.has_digest)
		memcpy(r.digest, p->own, PULL_DIGEST_BYTES);
	len = pull_req_encode(buf, &r);
	j->requests++;
	if (p->ops.send(p->ops.arg, j->donors[di].addr, PULL_T_PULL, buf, len, NULL, NULL) < 0) {
		c->ask[di] = ASK_FAILED;
		return 0;
	}
	c->ask[di] = ASK_PENDING;
	return 1;
}

/* Ask every donor still standing for chunk ci, under a new generation. */
static void
pull_ask(struct pull *p, size_t ci, double now)
{
	struct pull_join *j = p->join;
	struct pull_slice *c = &j->chunks[ci];
	int asked = 0;

	c->gen++;
	c->deadline = now + p->timeout;
	for (int di = 0; di < j->ndonors; di++) {
		c->ask[di] = ASK_NONE;
		if (!j->donors[di].failed)
			asked += pull_ask_donor(p, ci, di);
	}
	if (asked == 0)
		j->failed = 1;
}

/* Ask the next chunks, up to PULL_WINDOW asked and not averaged; one
 * until the first is in when a donor may answer that our model is the
 * job's start (pull.h). */
static void
pull_fill(struct pull *p, double now)
{
	struct pull_join *j = p->join;
	size_t window = p->agree && p->has_own && j->have == 0 ? 1 : PULL_WINDOW;

	/* A slot is free for each chunk this asks: slots are held by the
	 * chunks asked and not averaged, fewer than PULL_WINDOW. */
	while (!j->failed && j->asked < j->nchunks && j->asked - j->have < window) {
		j->chunks[j->asked].slot = j->free_slots[--j->nfree];
		pull_ask(p, j->asked++, now);
	}
}

static void pull_settle(struct pull *p, size_t ci, double now);

/* Donor di is out: its pending chunks go to the others, and so do its
 * answers not averaged yet (a donor caught sending bad values once is not
 * trusted with the rest of the model). */
static void
pull_donor_fail(struct pull *p, int di, double now)
{
	struct pull_join *j = p->join;

	j->donors[di].failed = 1;
	for (size_t ci = 0; ci < j->asked && !j->failed; ci++) {
		struct pull_slice *c = &j->chunks[ci];

		if (c->have || (c->ask[di] != ASK_PENDING && c->ask[di] != ASK_ANSWERED))
			continue;
		if (c->ask[di] == ASK_ANSWERED)
			c->answers--;
		c->ask[di] = ASK_FAILED;
		pull_settle(p, ci, now);
	}
}

static void
pull_reject(struct pull *p, int di, double now, enum gossip_refusal why)
{
	p->join->rejected[why]++;
	log_warn("bootstrap: donor %s sent %s values; the others make up for it",
	    p->join->donors[di].addr, gossip_refusal_name(why));
	pull_donor_fail(p, di, now);
}

static double
pull_rms(const float *a, const float *ref, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++) {
		double e = (double)a[i] - (ref ? (double)ref[i] : 0);

		sum += e * e;
	}
	return sqrt(sum / (double)(n ? n : 1));
}

/* Answers of chunk c far from the reference (see top) are failed and
 * their donors returned in far[]; returns how many. */
static int
pull_vet(struct pull_join *j, struct pull_slice *c, int far[PULL_MAX_DONORS])
{
	double norm, best = -1;
	const float *ref = NULL;
	int nfar = 0;

	for (int di = 0; di < j->ndonors; di++) {
		if (c->ask[di] != ASK_ANSWERED)
			continue;
		norm = pull_rms(pull_answer(j, c, di), NULL, c->len);
		if (best < 0 || norm < best) {
			best = norm;
			ref = pull_answer(j, c, di);
		}
	}
	for (int di = 0; di < j->ndonors; di++) {
		const float *v = pull_answer(j, c, di);

		if (c->ask[di] != ASK_ANSWERED || v == ref || pull_rms(v, ref, c->len) <=
		    GOSSIP_FAR_GAMMA * fmax(best, GOSSIP_FAR_FLOOR))
			continue;
		c->ask[di] = ASK_FAILED;
		c->answers--;
		far[nfar++] = di;
	}
	return nfar;
}

/* The chunk is settled when no request of it is pending: average what
 * came, or ask again if nothing did. */
static void
pull_settle(struct pull *p, size_t ci, double now)
{
	struct pull_join *j = p->join;
	struct pull_slice *c = &j->chunks[ci];
	const float *in[PULL_MAX_DONORS];
	int far[PULL_MAX_DONORS], nfar, nin = 0;

	for (int di = 0; di < j->ndonors; di++) {
		if (c->ask[di] == ASK_PENDING)
			return;
	}
	if (c->answers == 0) {
		j->reasks++;
		pull_ask(p, ci, now);
		return;
	}
	nfar = pull_vet(j, c, far);
	for (int di = 0; di < j->ndonors; di++) {
		if (c->ask[di] == ASK_ANSWERED)
			in[nin++] = pull_answer(j, c, di);
	}
	/* Summed in double and divided once: equal answers (a start
	 * agreement's donors all hold the starter's model) average to
	 * exactly their value, which summing each times 1/n in float missed
	 * by an ulp in a third of the parameters when three answered. */
	for (size_t i = 0; i < c->len; i++) {
		double sum = 0;

		for (int k = 0; k < nin; k++)
			sum += in[k][i];
		j->x[c->off + i] = (float)(sum / nin);
	}
	c->have = 1;
	j->have++;
	j->free_slots[j->nfree++] = c->slot;
	c->slot = -1;
	for (int i = 0; i < nfar; i++)
		pull_reject(p, far[i], now, GOSSIP_REFUSE_FAR);
	pull_fill(p, now);
}

/* Start agreement: the member lowest in address order is asked first
 * whatever the draw (it starts the job when nobody holds a model), and
 * j->lowest says whether this peer is below every live member. */
static void
pull_agree_order(const struct pull *p, struct pull_join *j, const char *const *live, size_t n,
    size_t *order)
{
	size_t low = 0, t;

	for (size_t i = 1; i < n; i++) {
		if (strcmp(live[order[i]], live[order[low]]) < 0)
			low = i;
	}
	j->lowest = strcmp(p->self, live[order[low]]) < 0;
	t = order[0];
	order[0] = order[low];
	order[low] = t;
}

static int
pull_is_done(const struct pull *p, const char *addr)
{
	for (size_t i = 0; i < p->ndone; i++) {
		if (strcmp(p->done_addrs[i], addr) == 0)
			return 1;
	}
	return 0;
}

/* Donor di's training is over: remembered, so that the next attempts
 * draw among members still training, and out of this one; the next spare
 * takes its place, asked for every chunk di has not answered (its late
 * answers come from another address: stale). */
static void
pull_donor_done(struct pull *p, int di, double now)
{
	struct pull_join *j = p->join;
	struct pull_donor *dn = &j->donors[di];

	j->finished++;
	if (!pull_is_done(p, j->donors[di].addr)) {
		snprintf(p->done_addrs[p->done_next], sizeof(p->done_addrs[0]), "%s",
		    j->donors[di].addr);
		p->done_next = (p->done_next + 1) % PULL_DONE_MAX;
		if (p->ndone < PULL_DONE_MAX)
			p->ndone++;
	}
	if (j->next_spare == j->nspares) {
		log_info("bootstrap: donor %s has finished training, so its model may lag the "
		    "job's; the others make up for it", dn->addr);
		pull_donor_fail(p, di, now);
		return;
	}
	log_info("bootstrap: donor %s has finished training, so its model may lag the job's; "
	    "asking %s in its place", dn->addr, j->spares[j->next_spare]);
	_Static_assert(sizeof(dn->addr) == sizeof(j->spares[0]), "an address fits either");
	memcpy(dn->addr, j->spares[j->next_spare++], sizeof(dn->addr));
	for (size_t ci = 0; ci < j->asked; ci++)
		if (!j->chunks[ci].have && j->chunks[ci].ask[di] != ASK_ANSWERED)
			pull_ask_donor(p, ci, di);
}

/* Moves the members not known to be done to the front of order[0..n),
 * keeping their draw; returns how many there are. */
static size_t
pull_training_first(const struct pull *p, const char *const *live, size_t *order, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!pull_is_done(p, live[order[i]])) {
			size_t t = order[i];

			memmove(order + k + 1, order + k, (i - k) * sizeof(*order));
			order[k++] = t;
		}
	}
	return k;
}

/* A new attempt: donors drawn at random among live (so that joiners
 * spread the load), members still training first, each chunk asked of
 * every one. */
static int
pull_start(struct pull *p, double now, const char *const *live, size_t n)
{
	size_t d = p->m->d, *order = malloc(n * sizeof(*order)), training;
	struct pull_join *j = calloc(1, sizeof(*j));
	int rc = -ENOMEM;

	if (order == NULL || j == NULL)
		goto out;
	j->nchunks = (d + PULL_CHUNK_FLOATS - 1) / PULL_CHUNK_FLOATS;
	j->x = calloc(d, sizeof(float));
	j->stride = d < PULL_CHUNK_FLOATS ? d : PULL_CHUNK_FLOATS;
	j->nfree = j->nchunks < PULL_WINDOW ? (int)j->nchunks : PULL_WINDOW;
	j->slots = malloc((size_t)j->nfree * PULL_MAX_DONORS * j->stride * sizeof(float));
	j->chunks = calloc(j->nchunks, sizeof(*j->chunks));
	if (j->x == NULL || j->slots == NULL || j->chunks == NULL || j->nchunks >= 1u << 24)
		goto out;
	for (int i = 0; i < j->nfree; i++)
		j->free_slots[i] = i;
	/* The agreement's starting model is the starter's, exactly. */
	j->fmt = p->agree ? GOSSIP_FP32 : p->values;
	for (size_t i = 0; i < j->nchunks; i++) {
		j->chunks[i].off = i * PULL_CHUNK_FLOATS;
		j->chunks[i].len = i + 1 < j->nchunks ? PULL_CHUNK_FLOATS :
		    d - i * PULL_CHUNK_FLOATS;
		j->chunks[i].slot = -1;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t k = randombytes_uniform((uint32_t)i), t = order[i - 1];

		order[i - 1] = order[k];
		order[k] = t;
	}
	if (p->agree && n > 0) {
		pull_agree_order(p, j, live, n, order);
	} else if (n > 0 && (training = pull_training_first(p, live, order, n)) > 0) {
		n = training;
	} else if (n > 0) {
		j->take_done = 1;
		log_info("bootstrap: every live member has finished training; pulling from them");
	}
	for (size_t i = 0; i < n && j->ndonors < PULL_MAX_DONORS; i++)
		snprintf(j->donors[j->ndonors++].addr, sizeof(j->donors[0].addr), "%s",
		    live[order[i]]);
	for (size_t i = (size_t)j->ndonors; i < n && !p->agree && !j->take_done &&
	    j->nspares < PULL_SPARES; i++)
		snprintf(j->spares[j->nspares++], sizeof(j->spares[0]), "%s", live[order[i]]);
	p->join = j;
	j = NULL;
	pull_fill(p, now);
	rc = 0;
out:
	free(order);
	pull_join_free(j);
	return rc;
}

/* Start agreement: this peer's own model starts the job; why for the log.
 * From now on it answers a PULL with that model's digest -EEXIST. */
static void
pull_own(struct pull *p, const char *why)
{
	p->joining = 0;
	p->has_start = p->has_own;
	memcpy(p->start, p->own, PULL_DIGEST_BYTES);
	p->ops.own(p->ops.arg, why);
}

/* Start agreement, after an attempt in which no donor served: the peer
 * lowest in address order starts from its own model once none of the
 * members it asked holds one; the others ask again shortly (the lowest's
 * process may not have taken its first step yet), until the deadline. */
static void
pull_agree_failed(struct pull *p, const struct pull_join *j, double now)
{
	if (j->lowest && j->nomodel == j->ndonors)
		pull_own(p, "no member holds a model yet, and this peer is the lowest in "
		    "address order");
	else if (now >= p->first_seen + p->agree_timeout)
		pull_own(p, "the deadline (start_timeout) passed before a member holding a model "
		    "answered; the members' starting models may differ");
	else
		p->retry_at = now + PULL_RETRY;
}

/* Every donor of an attempt failed: the next attempt, PULL_RETRY later,
 * picks others. Live members that all keep failing (joiners themselves,
 * still without a model, after the job's other members left) are no
 * better than none: after the wait a joiner gives up as one alone does. */
static void
pull_failed(struct pull *p, double now)
{
	char why[160];

	if (p->failing_since < 0) {
		p->failing_since = now;
		log_warn("bootstrap: every donor failed; trying others");
	} else {
		log_debug("bootstrap: every donor failed again; trying others");
	}
	if (p->wait > 0 && now >= p->failing_since + p->wait) {
		p->gave_up = 1;
		snprintf(why, sizeof(why), "bootstrap: every donor failed for %.0f s "
		    "(start_timeout): no live member holds the model", now - p->failing_since);
		p->ops.gave_up(p->ops.arg, why);
		return;
	}
	p->retry_at = now + PULL_RETRY;
}

/* Donors named by pull_donor_list: all of an attempt's, those whose
 * answers went into at least one chunk, or those missing from one. */
enum pull_list { PULL_LIST_ALL, PULL_LIST_ANSWERED, PULL_LIST_MISSED };
#define PULL_DONOR_LIST	(PULL_MAX_DONORS * (WIRE_ADDR_MAX + 1))

/* Chunks of the model whose average holds donor di's answer. */
static size_t
pull_donor_answered(const struct pull_join *j, int di)
{
	size_t answered = 0;

	for (size_t ci = 0; ci < j->nchunks; ci++)
		answered += j->chunks[ci].ask[di] == ASK_ANSWERED;
	return answered;
}

/* The step the joiner goes on from: the lower median of the steps its
 * donors told, of those whose answers it took. Not the highest: one
 * donor telling a false step would move the joiner to the end of the
 * schedule (or past it), and honest donors differ by a few steps. */
static uint64_t
pull_join_step(const struct pull_join *j)
{
	int64_t steps[PULL_MAX_DONORS];
	size_t n = 0;

	for (int di = 0; di < j->ndonors; di++) {
		if (pull_donor_answered(j, di) > 0)
			steps[n++] = j->donors[di].step;
	}
	return n > 0 ? (uint64_t)util_median_low(steps, n) : 0;
}

/* The chosen donors, comma-separated into out; returns how many. */
static int
pull_donor_list(const struct pull_join *j, enum pull_list which, char *out, size_t size)
{
	size_t at = 0;
	int listed = 0;

	out[0] = '\0';
	for (int di = 0; di < j->ndonors; di++) {
		size_t answered = pull_donor_answered(j, di);

		if ((which == PULL_LIST_ANSWERED && answered == 0) ||
		    (which == PULL_LIST_MISSED && answered == j->nchunks))
			continue;
		at += (size_t)snprintf(out + at, size - at, "%s%s", listed++ ? "," : "",
		    j->donors[di].addr);
	}
	return listed;
}

/* After every event of a joiner's: a failed attempt makes way for the
 * next, a complete one goes to ops->pulled. */
static void
pull_conclude(struct pull *p, double now)
{
	struct pull_join *j = p->join;
	char donors[PULL_DONOR_LIST], missed[PULL_DONOR_LIST], why[WIRE_ADDR_MAX + 128];

	if (j == NULL || (!j->same && !j->failed && j->have < j->nchunks))
		return;
	p->join = NULL;
	if (j->same) {
		snprintf(why, sizeof(why), "%s started the job from a model of the same digest "
		    "as this peer's process, so nothing was pulled", j->same_addr);
		pull_own(p, why);
	} else if (j->failed && p->agree) {
		pull_agree_failed(p, j, now);
	} else if (j->failed) {
		pull_failed(p, now);
	} else {
		/* Who made the model, and who did not (killed, refused or
		 * late): a user reading the log can tell what the joiner got. */
		pull_donor_list(j, PULL_LIST_ANSWERED, donors, sizeof(donors));
		if (pull_donor_list(j, PULL_LIST_MISSED, missed, sizeof(missed)) > 0)
			log_info("bootstrap: %s answered only part of the model or none of it "
			    "(gone, refused or late); the other donors' answers make it", missed);
		if (p->ops.pulled(p->ops.arg, j->x, pull_join_step(j), donors) == 0) {
			p->joining = 0;
			p->ready = 1;
		}
	}
	pull_join_free(j);
}

/* Start agreement with no member live beyond the donor wait: alone. */
static int
pull_agree_alone(struct pull *p, double now, size_t n)
{
	if (!p->agree || n > 0)
		return 0;
	if (now - p->first_seen < PULL_DONOR_WAIT)
		return 1;
	pull_own(p, "no other member is live");
	return 1;
}

/* A joiner with no live member: see pull.h. */
static void
pull_alone(struct pull *p, double now)
{
	char why[160];

	if (p->alone_since < 0)
		p->alone_since = now;
	if (!p->stranded && now >= p->alone_since + PULL_DONOR_WAIT) {
		p->stranded = 1;
		if (p->wait > 0)
			log_warn("bootstrap: no live member to pull the model from; giving up if "
			    "none appears within %.0f s (start_timeout)",
			    p->alone_since + p->wait - now);
		else
			log_warn("bootstrap: no live member to pull the model from; waiting for one");
	}
	if (p->wait > 0 && now >= p->alone_since + p->wait) {
		p->gave_up = 1;
		snprintf(why, sizeof(why), "bootstrap: no live member to pull the model from in "
		    "%.0f s (start_timeout): the job has no member left, or none was reached",
		    now - p->alone_since);
		p->ops.gave_up(p->ops.arg, why);
	}
}

/* When pull_alone has something to do next; < 0 nothing. Never a time
 * passed: pull_members, which acts on it, is not called while the peer
 * leaves, and a deadline left in the past would fire its timer forever. */
static double
pull_alone_deadline(const struct pull *p, double now)
{
	double at = -1;

	if (p->alone_since < 0)
		return -1;
	if (!p->stranded)
		at = p->alone_since + PULL_DONOR_WAIT;
	else if (p->wait > 0)
		at = p->alone_since + p->wait;
	return at > now ? at : -1;
}

void
pull_members(struct pull *p, double now, const char *const *live, size_t n)
{
	int rc;

	if (!p->joining || p->gave_up || p->join != NULL || now < p->retry_at)
		return;
	if (n == 0 && !p->agree) {
		p->failing_since = -1;
		pull_alone(p, now);
		return;
	}
	if (p->stranded)
		log_info("bootstrap: %zu live member%s again", n, n == 1 ? "" : "s");
	p->alone_since = -1;
	p->stranded = 0;
	if (p->first_seen < 0)
		p->first_seen = now;
	if (pull_agree_alone(p, now, n))
		return;
	if (n < PULL_MAX_DONORS && now - p->first_seen < PULL_DONOR_WAIT)
		return;
	if ((rc = pull_start(p, now, live, n)) < 0) {
		log_error("bootstrap: cannot start: %s", strerror(-rc));
		return;
	}
	if (p->agree) {
		log_debug("start: asking %d of %zu members for the job's model", p->join->ndonors,
		    n);
	} else {
		char donors[PULL_DONOR_LIST];

		pull_donor_list(p->join, PULL_LIST_ALL, donors, sizeof(donors));
		log_info("bootstrap: pulling the model from %s (%d of %zu members)", donors,
		    p->join->ndonors, n);
	}
	pull_conclude(p, now);
}

static void
pull_take(struct pull *p, double now, const char *from, const uint8_t *buf, size_t len)
{
	struct pull_join *j = p->join;
	struct pull_chunk gc;
	struct pull_slice *c;
	int64_t step;
	size_t ci;
	int di;

	if (pull_chunk_decode(buf, len, &gc) < 0) {
		j->malformed++;
		return;
	}
	ci = (size_t)(gc.id & 0xffffff);
	di = (int)((gc.id >> 24) & 0xff);
	if (ci >= j->nchunks || di >= j->ndonors) {
		j->malformed++;
		return;
	}
	c = &j->chunks[ci];
	if (c->have || (uint32_t)(gc.id >> 32) != c->gen || c->ask[di] != ASK_PENDING ||
	    strcmp(from, j->donors[di].addr) != 0) {
		j->stale++;
		return;
	}
	if (gc.status == -EEXIST && p->agree && p->has_own) {
		/* Our process's model is the job's start: nothing to average,
		 * and nothing more to ask (pull_conclude). */
		j->same = 1;
		snprintf(j->same_addr, sizeof(j->same_addr), "%s", from);
		return;
	} else if (gc.status == -EAGAIN) {
		/* It holds no model yet: asking it again at once would only
		 * bounce (as it did, at network rate), so it is out of this
		 * attempt, and the next waits PULL_RETRY. */
		j->refused++;
		j->nomodel++;
		c->ask[di] = ASK_FAILED;
		pull_donor_fail(p, di, now);
	} else if (gc.status == -ESTALE) {
		/* Out first, so that asking the chunk again skips it. */
		c->ask[di] = ASK_FAILED;
		pull_donor_done(p, di, now);
	} else if (gc.status < 0 || gc.off != c->off || gc.len != c->len || gc.fmt != j->fmt) {
		j->refused++;
		c->ask[di] = ASK_FAILED;
	} else {
		float *v = pull_answer(j, c, di);

		gossip_values_get(v, gc.values, c->len, gc.fmt);
		j->bytes += gossip_values_bytes(gc.fmt, c->len);
		if (!gossip_finite(v, c->len)) {
			/* Out first, so that asking the chunk again skips it. */
			c->ask[di] = ASK_FAILED;
			pull_reject(p, di, now, GOSSIP_REFUSE_NONFINITE);
		} else {
			c->answers++;
			c->ask[di] = ASK_ANSWERED;
			step = gc.step > INT64_MAX ? INT64_MAX : (int64_t)gc.step;
			if (step > j->donors[di].step)
				j->donors[di].step = step;
		}
	}
	pull_settle(p, ci, now);
}

void
pull_recv(struct pull *p, double now, const char *from, uint8_t type, const uint8_t *buf,
    size_t len)
{
	switch (type) {
	case PULL_T_PULL:
		pull_serve(p, from, buf, len);
		break;
	case PULL_T_CHUNK:
		if (p->join == NULL) {
			/* Late, or not asked for: no attempt to give it to. */
			p->stale++;
			break;
		}
		pull_take(p, now, from, buf, len);
		pull_conclude(p, now);
		break;
	default:
		p->malformed++;
		break;
	}
}

void
pull_donor_down(struct pull *p, double now, const char *addr)
{
	struct pull_join *j = p->join;

	for (int di = 0; j != NULL && di < j->ndonors; di++) {
		if (strcmp(j->donors[di].addr, addr) != 0 || j->donors[di].failed)
			continue;
		log_info("bootstrap: donor %s is gone; the others make up for it", addr);
		pull_donor_fail(p, di, now);
	}
	pull_conclude(p, now);
}

double
pull_tick(struct pull *p, double now)
{
	struct pull_join *j = p->join;
	double next = -1;

	for (size_t ci = 0; j != NULL && ci < j->asked && !j->failed; ci++) {
		struct pull_slice *c = &j->chunks[ci];

		if (c->have)
			continue;
		if (now >= c->deadline) {
			for (int di = 0; di < j->ndonors; di++) {
				if (c->ask[di] == ASK_PENDING) {
					c->ask[di] = ASK_FAILED;
					j->timeouts++;
				}
			}
			pull_settle(p, ci, now);
		}
		if (!c->have && (next < 0 || c->deadline < next))
			next = c->deadline;
	}
	pull_conclude(p, now);
	if (p->join != NULL)
		return next;
	if (p->joining && p->retry_at > now)
		return p->retry_at;
	if (p->joining && p->first_seen >= 0 && now < p->first_seen + PULL_DONOR_WAIT)
		return p->first_seen + PULL_DONOR_WAIT;
	if (p->joining && !p->gave_up)
		return pull_alone_deadline(p, now);
	return -1;
}

static json_t *
pull_join_json(const struct pull_join *j)
{
	json_t *donors = json_array(), *rej = json_object();

	for (int i = 0; i < j->ndonors; i++)
		json_array_append_new(donors, json_string(j->donors[i].addr));
	for (int i = 0; i < GOSSIP_REFUSE_N; i++)
		json_object_set_new(rej, gossip_refusal_name((enum gossip_refusal)i),
		    json_integer((json_int_t)j->rejected[i]));
	return json_pack(
	    "{s:o, s:o, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
	    "donors",
	    donors, "rejected", rej, "values", gossip_values_name(j->fmt),
	    "bytes", (json_int_t)j->bytes,
	    "chunks", (json_int_t)j->nchunks, "received", (json_int_t)j->have,
	    "requests", (json_int_t)j->requests, "reasked", (json_int_t)j->reasks,
	    "refused", (json_int_t)j->refused, "timeouts", (json_int_t)j->timeouts,
	    "stale", (json_int_t)j->stale, "malformed", (json_int_t)j->malformed,
	    "finished", (json_int_t)j->finished, "step", (json_int_t)pull_join_step(j),
	    "failed", j->failed);
}

int
pull_stats_json(const struct pull *p, json_t *obj)
{
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I}", "chunks_served", (json_int_t)p->served,
	    "same_start", (json_int_t)p->same,
	    "malformed", (json_int_t)p->malformed, "stale", (json_int_t)p->stale,
	    "own_nonfinite", (json_int_t)p->own_nonfinite);

	if (o == NULL || json_object_set_new(obj, "pull", o) < 0)
		return -ENOMEM;
	if (p->join != NULL && json_object_set_new(obj, "bootstrap", pull_join_json(p->join)) < 0)
		return -ENOMEM;
	return 0;
}
