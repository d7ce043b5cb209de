/*
 * share: mode share's rule on three in-process peers over host-memory
 * models (as attached processes' are), every message handed over by hand.
 * With every share delivered the peers hold one model: the start plus the
 * mean of their moves, exactly in fp32 once the residuals are sent, near
 * it in int8, near it in int2 once many rounds spent the residuals, and
 * with an outer lr that times the mean; a share cut into pieces gives
 * what one message gives; a round after many steps sends at most
 * SHARE_GROWTH times the last. A share goes in at the weight its sender
 * gave it, not at the receiver's count of members, so that counts apart
 * (a membership settling) leave the anchors together; a sender cannot
 * weigh itself up by more than SHARE_N_SLACK. Bad messages touch nothing
 * and are counted by reason; a member whose shares are far larger than
 * the others' is clipped, then suspected and dropped. Ranges set whole
 * go in every share beside the top of the rest.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mask.h"
#include "model.h"
#include "share.h"
#include "trust.h"
#include "util.h"
#include "wire.h"

#define D 64
#define P 3

static struct model *m[P];
static struct share *s[P];
static float mem[P][D];

static void
setup(void)
{
	struct errbuf err = { "" };

	for (int p = 0; p < P; p++) {
		REQUIRE(model_new_shared(&m[p], &err) == 0);
		for (int i = 0; i < D; i++)
			mem[p][i] = (float)i / D;
		model_share(m[p], mem[p], D);
		REQUIRE(share_new(&s[p]) == 0);
		REQUIRE(share_anchor(s[p], m[p]) == 0);
	}
}

static void
teardown(void)
{
	for (int p = 0; p < P; p++) {
		share_free(s[p]);
		model_free(m[p]);
	}
}

/* Peer p's move: distinct per peer and coordinate. */
static float
move(int p, int i)
{
	return (float)((p + 1) * (i % 7 - 3)) / 8.0f;
}

static void
train(int p)
{
	for (int i = 0; i < D; i++)
		mem[p][i] += move(p, i);
}

/* Peer p's round, its messages delivered to the others at once; returns
 * how many there were. */
static size_t
round_of(int p, const struct share_params *sp)
{
	size_t count, len;
	enum share_refusal why;
	struct errbuf err = { "" };

	REQUIRE(share_round(s[p], m[p], sp, P, &count) == 0);
	for (size_t j = 0; j < count; j++) {
		const uint8_t *msg = share_message(s[p], j, &len);

		for (int q = 0; q < P; q++)
			if (q != p)
				CHECKF(share_recv(s[q], m[q], NULL, "peer", 0, P, msg, len, &why,
				    &err) == 0, "%s", err.msg);
	}
	return count;
}

/* Every peer's model at the start plus lr times the mean move, within
 * tol. */
static void
check_mean_lr(float lr, float tol)
{
	for (int p = 0; p < P; p++) {
		for (int i = 0; i < D; i++) {
			float want = (float)i / D + lr * (move(0, i) + move(1, i) + move(2, i)) / P;

			CHECKF(fabsf(mem[p][i] - want) <= tol, "peer %d x[%d] = %g, want %g", p, i,
			    mem[p][i], want);
		}
	}
}

static void
check_mean(float tol)
{
	check_mean_lr(1, tol);
}

/* Staggered rounds: each peer trains, then shares; the shares of the
 * others land on top of its own steps. */
static void
test_mean(void)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };
	size_t count;

	setup();
	for (int p = 0; p < P; p++)
		train(p);
	for (int p = 0; p < P; p++)
		round_of(p, &sp);
	check_mean(1e-6f);
	/* nothing moved since: an empty residual sends zeros, moves nothing */
	round_of(1, &sp);
	check_mean(1e-6f);
	/* after a reset the first round only anchors */
	share_reset(s[0]);
	CHECK(share_round(s[0], m[0], &sp, P, &count) == 0 && count == 0);
	teardown();
}

/* The job's model is the anchor: none before one, then every share
 * applied, not a peer's own steps since its round. */
static void
test_job_model(void)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };
	struct share *fresh;
	float job[D];

	REQUIRE(share_new(&fresh) == 0);
	CHECK(share_job_model(fresh, job, D) == -ENOENT);
	CHECK(share_job_model(fresh, NULL, D) == -ENOENT);
	share_free(fresh);
	setup();
	CHECK(share_job_model(s[0], job, D + 1) == -ENOENT);
	CHECK(share_job_model(s[0], NULL, D) == 0);
	for (int p = 0; p < P; p++)
		train(p);
	for (int p = 0; p < P; p++)
		round_of(p, &sp);
	train(0);
	REQUIRE(share_job_model(s[0], job, D) == 0);
	for (int i = 0; i < D; i++) {
		float want = (float)i / D + (move(0, i) + move(1, i) + move(2, i)) / P;

		CHECKF(fabsf(job[i] - want) <= 1e-6f, "job[%d] = %g, want %g", i, job[i], want);
		CHECKF(fabsf(mem[0][i] - (want + move(0, i))) <= 1e-6f, "x[%d] = %g", i,
		    mem[0][i]);
	}
	teardown();
}

/* An outer lr of 1.5: every peer ends at the start plus 1.5 times the
 * mean move, its own share taken at that rate too. */
static void
test_lr(void)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };

	setup();
	for (int p = 0; p < P; p++)
		share_set_weight(s[p], 1.5, 0);
	for (int p = 0; p < P; p++)
		train(p);
	for (int p = 0; p < P; p++)
		round_of(p, &sp);
	check_mean_lr(1.5f, 1e-5f);
	teardown();
}

/* A quarter of the coordinates a round, cut into messages of 5: the
 * residual carries the rest, and four rounds each send all of it. */
static void
test_residual_pieces(void)
{
	struct share_params sp = { GOSSIP_FP32, 0.25, 5 };
	size_t count;

	setup();
	for (int p = 0; p < P; p++)
		train(p);
	count = round_of(0, &sp);
	CHECKF(count == 4, "%zu messages", count);
	for (int r = 0; r < 4; r++)
		for (int p = r == 0 ? 1 : 0; p < P; p++)
			round_of(p, &sp);
	check_mean(1e-5f);
	teardown();
}

/* A residual decay of 0.5: what the first round left out goes in at half
 * its size in the second, and nothing is left after it. */
static void
test_decay(void)
{
	struct share_params sp = { GOSSIP_FP32, 0.5, 1000 };
	int halved = 0;

	setup();
	for (int p = 0; p < P; p++)
		share_set_decay(s[p], 0.5);
	train(0);
	round_of(0, &sp);
	round_of(0, &sp);
	round_of(0, &sp);
	for (int i = 0; i < D; i++) {
		float got = mem[1][i] - (float)i / D, whole = move(0, i) / P;

		CHECKF(fabsf(got - whole) < 1e-6f || fabsf(got - whole / 2) < 1e-6f,
		    "x[%d] moved %g, want %g or half", i, got, whole);
		halved += move(0, i) != 0 && fabsf(got - whole / 2) < 1e-6f;
		CHECKF(fabsf(mem[0][i] - mem[1][i]) < 1e-6f, "x[%d] %g %g", i, mem[0][i],
		    mem[1][i]);
	}
	CHECKF(halved > 0, "no coordinate went in at half");
	teardown();
}

/* Rounds in fmt: the rounding the others read is the one the sender
 * applies and keeps out of its residual, so the peers still agree, and
 * near the mean move once the residuals are spent; a first round that
 * leaves them at least short_of from it (0: not checked). */
static void
check_rounded(enum gossip_values fmt, int rounds, double short_of)
{
	struct share_params sp = { fmt, 0.5, 1000 };

	setup();
	for (int p = 0; p < P; p++)
		train(p);
	for (int r = 0; r < rounds; r++) {
		double off = 0;

		for (int p = 0; p < P; p++)
			round_of(p, &sp);
		for (int i = 0; r == 0 && i < D; i++)
			off = fmax(off, fabs(mem[0][i] - ((float)i / D + (move(0, i) +
			    move(1, i) + move(2, i)) / P)));
		CHECKF(r > 0 || off >= short_of, "one round: %g from the mean", off);
	}
	for (int i = 0; i < D; i++)
		CHECKF(fabsf(mem[0][i] - mem[1][i]) < 1e-5f && fabsf(mem[1][i] - mem[2][i]) < 1e-5f,
		    "x[%d] %g %g %g", i, mem[0][i], mem[1][i], mem[2][i]);
	check_mean(0.01f);
	teardown();
}

static void
test_int8(void)
{
	check_rounded(GOSSIP_INT8, 6, 0);
}

/* Two bits a value lose much more than int8: one round leaves the peers
 * well short of the mean, many reach it. */
static void
test_int2(void)
{
	check_rounded(GOSSIP_INT2, 41, 0.1);
}

/* The RMS of peer p's message j of its last round (fp32, fewer than 256
 * coordinates). */
static double
rms_of(int p, size_t j)
{
	size_t len;
	const uint8_t *msg = share_message(s[p], j, &len);
	size_t count = (size_t)msg[16], ilen = (size_t)msg[24];
	double sum = 0;
	float v;

	REQUIRE(len == SHARE_HEADER + ilen + count * sizeof(float));
	for (size_t i = 0; i < count; i++) {
		memcpy(&v, msg + SHARE_HEADER + ilen + i * sizeof(float), sizeof(v));
		sum += (double)v * v;
	}
	return sqrt(sum / (double)count);
}

/* A round after many steps (a stalled loop) sends at most SHARE_GROWTH
 * times the previous share; the rest follows in the next rounds. */
static void
test_growth(void)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };
	size_t count;
	double first, second;

	setup();
	train(0);
	REQUIRE(round_of(0, &sp) == 1);
	first = rms_of(0, 0);
	for (int t = 0; t < 10; t++)
		train(0);
	REQUIRE(share_round(s[0], m[0], &sp, P, &count) == 0 && count == 1);
	second = rms_of(0, 0);
	CHECKF(second <= SHARE_GROWTH * first * (1 + 1e-6) && second > 1.5 * first,
	    "first %g, second %g", first, second);
	teardown();
}

/* A share of n members goes in at 1/2 at its sender and at a receiver:
 * n 2 as SGD's 1/n, n 4 as adaptive's 1/sqrt(n). A sender that claims 1
 * member to a receiver that knows 8 weighs as 4 there (8 / SHARE_N_SLACK):
 * low, 1/4 or 1/2; of none, it is malformed. */
static void
check_weights(int adaptive, size_t n, float low)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };
	uint8_t msg[1024];
	size_t count, len;
	float before[D];
	enum share_refusal why;
	struct errbuf err = { "" };

	setup();
	for (int p = 0; p < P; p++)
		share_set_weight(s[p], 1, adaptive);
	train(0);
	REQUIRE(share_round(s[0], m[0], &sp, n, &count) == 0 && count == 1);
	REQUIRE(share_message(s[0], 0, &len) != NULL && len <= sizeof(msg));
	memcpy(msg, share_message(s[0], 0, &len), len);
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, msg, len, &why, &err) == 0);
	for (int i = 0; i < D; i++)
		CHECKF(fabsf(mem[0][i] - mem[1][i]) < 1e-6f &&
		    fabsf(mem[1][i] - ((float)i / D + move(0, i) / 2)) < 1e-6f,
		    "x[%d] %g %g", i, mem[0][i], mem[1][i]);
	memcpy(before, mem[2], sizeof(before));
	msg[2] = 1;
	CHECK(share_recv(s[2], m[2], NULL, "a", 0, 8, msg, len, &why, &err) == 0);
	for (int i = 0; i < D; i++)
		CHECKF(fabsf(mem[2][i] - (before[i] + move(0, i) * low)) < 1e-6f, "x[%d] %g", i,
		    mem[2][i]);
	msg[2] = 0;
	memcpy(before, mem[2], sizeof(before));
	CHECK(share_recv(s[2], m[2], NULL, "a", 0, 8, msg, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED && memcmp(before, mem[2], sizeof(before)) == 0);
	teardown();
}

static void
test_weight(void)
{
	check_weights(0, 2, 0.25f);
}

static void
test_adaptive(void)
{
	check_weights(1, 4, 0.5f);
}

static long long
refused(const char *why)
{
	json_t *o = json_object();
	long long n;

	REQUIRE(share_stats_json(s[1], o) == 0);
	n = json_integer_value(json_object_get(json_object_get(json_object_get(o, "share"),
	    "refused"), why));
	json_decref(o);
	return n;
}

/* Bad messages touch nothing, each counted by its reason. */
static void
test_refused(void)
{
	struct share_params sp = { GOSSIP_FP32, 0.25, 1000 };
	struct share *fresh;
	size_t count, len;
	const uint8_t *msg;
	uint8_t bad[512];
	float before[D], nan = NAN;
	enum share_refusal why;
	struct errbuf err = { "" };

	setup();
	train(0);
	REQUIRE(share_round(s[0], m[0], &sp, P, &count) == 0 && count == 1);
	msg = share_message(s[0], 0, &len);
	REQUIRE(len <= sizeof(bad));
	memcpy(before, mem[1], sizeof(before));
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, msg, SHARE_HEADER - 1, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED);
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, msg, len - 1, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED);
	memcpy(bad, msg, len);
	bad[0] = 9;
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, bad, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED);
	memcpy(bad, msg, len);
	bad[8] = D + 1;
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, bad, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_SIZE);
	memcpy(bad, msg, len);
	memcpy(bad + len - 4, &nan, 4);
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, bad, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_NONFINITE);
	/* 16 of 64 coordinates: Rice-coded gaps are shorter than varints;
	 * all 1 bits are a gap past the model */
	CHECKF(msg[4] > 0 && wire_get_u64(msg + 24) < 16, "coding %u, %llu bytes of indices",
	    msg[4], (unsigned long long)wire_get_u64(msg + 24));
	memcpy(bad, msg, len);
	memset(bad + SHARE_HEADER, 0xff, (size_t)wire_get_u64(msg + 24));
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, bad, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED);
	memcpy(bad, msg, len);
	bad[4] = MASK_RICE_KMAX + 2;
	CHECK(share_recv(s[1], m[1], NULL, "a", 0, P, bad, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_MALFORMED);
	CHECK(memcmp(before, mem[1], sizeof(before)) == 0);
	CHECK(refused("malformed") == 5 && refused("size") == 1 && refused("nonfinite") == 1);
	REQUIRE(share_new(&fresh) == 0);
	CHECK(share_recv(fresh, m[2], NULL, "a", 0, P, msg, len, &why, &err) < 0 &&
	    why == SHARE_REFUSE_UNANCHORED);
	share_free(fresh);
	/* a first share past fp16's range (no earlier one to cap it by):
	 * nothing goes out, the model keeps the move */
	mem[1][3] += 1e6f;
	before[0] = mem[1][3];
	CHECK(share_round(s[1], m[1], &(struct share_params){ GOSSIP_FP16, 0.25, 1000 }, P,
	    &count) == -EDOM && count == 0 && mem[1][3] == before[0]);
	/* the model not finite: no round, nothing changes */
	mem[0][3] = NAN;
	CHECK(share_round(s[0], m[0], &sp, P, &count) == -EDOM && count == 0);
	teardown();
}

/* Ranges set whole go in every share however little they moved, beside
 * the top density of the rest; ranges that do not fit are refused. */
static void
test_whole(void)
{
	struct share_params sp = { GOSSIP_FP32, 0.25, 1000 };
	const struct model_range w[] = { { 8, 4 }, { 40, 8 } };
	const struct model_range bad[][2] = {
		{ { 8, 4 }, { 10, 2 } }, { { 8, 0 }, { 40, 8 } }, { { 8, 4 }, { 60, 5 } },
	};
	struct errbuf err = { "" };
	float before[D];
	size_t sent = 0, in_whole = 0;

	setup();
	for (size_t b = 0; b < GD_ARRAY_SIZE(bad); b++)
		CHECKF(share_set_whole(s[0], bad[b], 2, D, &err) == -EINVAL, "ranges %zu", b);
	CHECKF(share_set_whole(s[0], w, 2, D, &err) == 0, "%s", err.msg);
	for (int i = 0; i < D; i++)
		mem[0][i] += (i >= 8 && i < 12) || (i >= 40 && i < 48) ? 1e-4f : 1.0f + i;
	memcpy(before, mem[1], sizeof(before));
	REQUIRE(round_of(0, &sp) == 1);
	for (int i = 0; i < D; i++) {
		int whole = (i >= 8 && i < 12) || (i >= 40 && i < 48);

		if (mem[1][i] != before[i]) {
			sent++;
			in_whole += whole;
		} else {
			CHECKF(!whole, "x[%d] of a whole range not sent", i);
		}
	}
	/* 12 whole, and 13 of the other 52 (the largest: the last ones) */
	CHECKF(sent == 25 && in_whole == 12, "%zu sent, %zu of them whole", sent, in_whole);
	CHECK(mem[1][D - 1] != before[D - 1] && mem[1][0] == before[0]);
	/* none again: the top of everything, where the rest's residual is far
	 * larger */
	CHECK(share_set_whole(s[0], NULL, 0, D, &err) == 0);
	for (int i = 8; i < 12; i++)
		mem[0][i] += 1e-4f;
	memcpy(before, mem[1], sizeof(before));
	REQUIRE(round_of(0, &sp) == 1);
	for (int i = 8; i < 12; i++)
		CHECKF(mem[1][i] == before[i], "x[%d] sent with no whole ranges", i);
	teardown();
}

/* Shares from four members through one trust: the far one is scaled to
 * the radius, then suspected and dropped. */
static void
test_clip(void)
{
	struct share_params sp = { GOSSIP_FP32, 1.0, 1000 };
	const char *who[] = { "a", "b", "c" };
	struct trust *t;
	size_t count, len;
	const uint8_t *msg;
	enum share_refusal why;
	struct errbuf err = { "" };
	int dropped = 0, clipped = 0;
	float before;

	setup();
	REQUIRE(trust_new(&(struct trust_params){ 2.0 }, &t) == 0);
	train(0);
	REQUIRE(share_round(s[0], m[0], &sp, P, &count) == 0 && count == 1);
	msg = share_message(s[0], 0, &len);
	for (int i = 0; i < 3; i++)
		CHECK(share_recv(s[1], m[1], t, who[i], 1, P, msg, len, &why, &err) == 0);
	/* peer 2's share: 100 times the others' */
	for (int i = 0; i < D; i++)
		mem[2][i] += 100 * move(0, i);
	for (int r = 0; r < 6; r++) {
		REQUIRE(share_round(s[2], m[2], &sp, P, &count) == 0 && count == 1);
		msg = share_message(s[2], 0, &len);
		before = mem[1][0];
		if (share_recv(s[1], m[1], t, "x", 2 + r, P, msg, len, &why, &err) < 0) {
			CHECK(why == SHARE_REFUSE_SUSPECT && mem[1][0] == before);
			dropped++;
		} else {
			clipped++;
		}
		for (int i = 0; i < D; i++)
			mem[2][i] += 100 * move(0, i);
	}
	CHECKF(clipped >= 1 && dropped >= 1, "clipped %d dropped %d", clipped, dropped);
	CHECK(trust_suspect(t, "x") && !trust_suspect(t, "a"));
	trust_free(t);
	teardown();
}

static const struct check_case cases[] = {
	{ "share_mean", test_mean },
	{ "share_job_model", test_job_model },
	{ "share_lr", test_lr },
	{ "share_residual_pieces", test_residual_pieces },
	{ "share_int8", test_int8 },
	{ "share_int2", test_int2 },
	{ "share_decay", test_decay },
	{ "share_growth", test_growth },
	{ "share_weight", test_weight },
	{ "share_adaptive", test_adaptive },
	{ "share_refused", test_refused },
	{ "share_clip", test_clip },
	{ "share_whole", test_whole },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_share");
}
