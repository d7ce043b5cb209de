/*
 * trust: the radius is factor x the median of one vote per member, so a
 * minority, however far or however often it sends, cannot widen it; no
 * radius without a quorum of fresh votes; a member that keeps sending far
 * slices is suspect after three and comes back after near ones; honest
 * spread around the median stays far below suspicion; a refusal counts as
 * the worst slice; records outlive their member, so a rejoin on the same
 * address keeps its score; a mix is weighed down as suspicion grows; a
 * slice that has not come this peer's way from its origin counts as bad
 * (test_behind); once frozen (training over) the radius stays the one of
 * then, whatever the votes do after; a member whose training is over is
 * judged as any but votes no less than it did while it trained
 * (test_trained); with factor 0 nothing is judged.
 */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "trust.h"

static struct trust *
mk(double factor)
{
	struct trust *t = NULL;

	REQUIRE(trust_new(&(struct trust_params){ factor }, &t) == 0);
	return t;
}

/* A slice rms away, judged against radius. */
static int
obs(struct trust *t, const char *a, double now, double rms, double radius)
{
	return trust_observe(t, a, now, &(struct trust_slice){ .rms = rms, .radius = radius });
}

/* A slice rms away whose ways from the origin are way (this peer's),
 * ratio and cos (theirs against it). */
static int
obs_way(struct trust *t, const char *a, double rms, double radius, double way, double ratio,
    double cos)
{
	return trust_observe(t, a, 0, &(struct trust_slice){ .rms = rms, .radius = radius,
	    .way = way, .ratio = ratio, .cos = cos });
}

/* A slice rms away at now from a member that told step, this peer at
 * own_step, whose ways are way and ratio (cosine 0.9). */
static int
obs_step(struct trust *t, const char *a, double now, double rms, double way, double ratio,
    uint64_t step, uint64_t own_step)
{
	return trust_observe(t, a, now, &(struct trust_slice){ .rms = rms,
	    .radius = trust_radius(t, now), .way = way, .ratio = ratio, .cos = 0.9,
	    .step = step, .own_step = own_step });
}

/* A slice rms away from a member whose training is over. */
static int
obs_trained(struct trust *t, const char *a, double now, double rms, double radius)
{
	return trust_observe(t, a, now, &(struct trust_slice){ .rms = rms, .radius = radius,
	    .trained = 1 });
}

static const char *
addr(int i)
{
	static char buf[8][32];

	snprintf(buf[i % 8], sizeof(buf[0]), "127.0.0.1:%d", 20000 + i);
	return buf[i % 8];
}

static void
test_radius(void)
{
	struct trust *t = mk(2);

	CHECK(trust_radius(t, 0) < 0);
	obs(t, addr(0), 0, 1.0, -1);
	obs(t, addr(1), 0, 3.0, -1);
	CHECK(trust_radius(t, 0) < 0);  /* two votes: no quorum */
	obs(t, addr(2), 0, 2.0, -1);
	CHECKF(fabs(trust_radius(t, 0) - 4.0) < 1e-12, "radius %g", trust_radius(t, 0));
	/* one far member sending again and again has one vote */
	for (int k = 0; k < 20; k++)
		obs(t, addr(3), 1, 1000.0, trust_radius(t, 1));
	CHECKF(fabs(trust_radius(t, 1) - 5.0) < 1e-12, "radius %g", trust_radius(t, 1));
	/* votes older than TRUST_FRESH (60 s) drop out: quorum lost */
	obs(t, addr(0), 100, 1.0, -1);
	obs(t, addr(3), 100, 1000.0, -1);
	CHECK(trust_radius(t, 100) < 0);
	trust_free(t);
}

/* A vote cast at less than half this peer's step counts at no less than
 * the median of the others: the distances of a fresh job's first steps
 * are smaller than later ones, and a radius drawn from them shunned
 * honest members; a member heard from rarely still keeps the quorum. */
static void
test_vote_span(void)
{
	struct trust *t = mk(2);
	int bad = 0;

	for (int i = 0; i < 3; i++)
		obs_step(t, addr(i), 0, 1.0, 0, 0, 4, 4);
	CHECKF(fabs(trust_radius(t, 0) - 2.0) < 1e-12, "radius %g", trust_radius(t, 0));
	/* step 9: those votes count as they are, with the new one */
	obs_step(t, addr(3), 0, 3.0, 0, 0, 9, 9);
	CHECKF(fabs(trust_radius(t, 0) - 2.0) < 1e-12, "radius %g", trust_radius(t, 0));
	/* step 10: they count as the new one, 3.0; with them as they were,
	 * 2.9 was far (three in a row: suspect) */
	obs_step(t, addr(3), 0, 3.0, 0, 0, 10, 10);
	CHECKF(fabs(trust_radius(t, 0) - 6.0) < 1e-12, "radius %g", trust_radius(t, 0));
	for (int k = 0; k < 5; k++)
		bad |= obs_step(t, addr(4), 0, 2.9, 0, 0, 10, 10);
	CHECK(!bad && trust_member(t, addr(4))->suspicion == 0);
	/* votes 2.5, 2.9, 3.0 of step 10 and two lapsed ones at their 2.9 */
	obs_step(t, addr(0), 0, 2.5, 0, 0, 10, 10);
	CHECKF(fabs(trust_radius(t, 0) - 5.8) < 1e-12, "radius %g", trust_radius(t, 0));
	trust_free(t);
	/* a zeroed member heard from at step 40 keeps its (large) vote at
	 * step 100: the quorum holds and its slices are judged far */
	t = mk(2);
	obs_step(t, addr(2), 0, 50.0, 0, 0, 40, 40);
	for (int i = 0; i < 2; i++)
		obs_step(t, addr(i), 0, 1.0, 0, 0, 100, 100);
	CHECKF(fabs(trust_radius(t, 0) - 2.0) < 1e-12, "radius %g", trust_radius(t, 0));
	for (int k = 0; k < 3; k++)
		bad = obs_step(t, addr(2), 0, 50.0, 0, 0, 100, 100);
	CHECK(bad);
	trust_free(t);
	/* slices without steps (shares) vote as ever */
	t = mk(2);
	for (int i = 0; i < 3; i++)
		obs(t, addr(i), 0, 1.0, -1);
	CHECKF(fabs(trust_radius(t, 0) - 2.0) < 1e-12, "radius %g", trust_radius(t, 0));
	trust_free(t);
}

/* A trust whose three members 0-2 voted 1.0 at step 100, at time 0. */
static struct trust *
mk_voted(void)
{
	struct trust *t = mk(2);

	for (int i = 0; i < 3; i++)
		obs_step(t, addr(i), 0, 1.0, 0, 0, 100, 100);
	return t;
}

/* Slices from member 3 like the given one until it is suspect; how many
 * it took (11: never within 10). */
static int
stagger_slices(double rms, double ratio, uint64_t step)
{
	struct trust *t = mk_voted();
	int k;

	for (k = 1; k <= 10; k++)
		if (obs_step(t, addr(3), 1, rms, 2.0, ratio, step, 100))
			break;
	trust_free(t);
	return k;
}

/* Peers that started apart: a member whose step differs from this peer's
 * by more than a quarter, within the ways the start explains, is not
 * judged for TRUST_STAGGER (30) s after its first slice; a zeroed model
 * (far outside its way), one with steps alike, or the same slices after
 * 30 s are. This peer has come way 2.0 from the start. */
static void
test_stagger(void)
{
	struct trust *t;
	int k, bad = 0;

	/* started later: steps 60 to 100, 1.9 away (far), way ratio 0.2
	 * (behind): within this peer's way */
	CHECKF((k = stagger_slices(1.9, 0.2, 60)) == 11, "late starter suspect after %d", k);
	/* started earlier: ahead by 1.6 times the way, 2.5 away (beyond the
	 * radius), within 1.6 x 2 */
	CHECKF((k = stagger_slices(2.5, 1.6, 160)) == 11, "early starter suspect after %d", k);
	/* a zeroed model, ahead or behind: its ratio counts up to 2 */
	CHECKF((k = stagger_slices(4.5, 5.0, 160)) == 3, "zeroed, ahead: suspect after %d", k);
	CHECKF((k = stagger_slices(4.5, 5.0, 60)) == 3, "zeroed, behind: suspect after %d", k);
	/* a stale model started late: its way comes to no quarter of what
	 * its steps give */
	CHECKF((k = stagger_slices(2.0, 0.02, 60)) == 3, "stale, behind: suspect after %d", k);
	/* the late starter's slices from a member whose step is within a
	 * quarter of this peer's */
	CHECKF((k = stagger_slices(1.9, 0.2, 76)) <= 4, "steps alike: suspect after %d", k);
	/* ... or 30 s after its first slice */
	t = mk_voted();
	obs_step(t, addr(3), 0, 1.9, 2.0, 0.2, 60, 100);
	CHECK(trust_member(t, addr(3))->suspicion == 0);
	for (k = 1; k <= 10 && !bad; k++) {
		for (int i = 0; i < 3; i++)
			obs_step(t, addr(i), 30, 1.0, 0, 0, 100, 100);
		bad = obs_step(t, addr(3), 30, 1.9, 2.0, 0.2, 60, 100);
	}
	CHECKF(bad && k - 1 <= 4, "late starter after 30 s: suspect after %d slices", k - 1);
	trust_free(t);
}

static void
test_suspect(void)
{
	struct trust *t = mk(2);
	int k, bad = 0;

	for (int i = 0; i < 4; i++)
		obs(t, addr(i), 0, 1.0, -1);
	CHECK(trust_weight(t, addr(7)) == 1);   /* unknown */
	/* a zeroed model: far beyond the radius every time, and weighed
	 * less at each (suspicion 0.25 after one: half a mix) */
	for (k = 1; k <= 10 && !bad; k++) {
		bad = obs(t, addr(7), 0, 50.0, trust_radius(t, 0));
		if (k == 1)
			CHECKF(fabs(trust_weight(t, addr(7)) - 0.5) < 1e-12, "weight %g",
			    trust_weight(t, addr(7)));
	}
	CHECK(trust_weight(t, addr(7)) == 0);
	CHECKF(k - 1 == 3, "suspect after %d slices", k - 1);
	CHECK(trust_suspect(t, addr(7)));
	CHECK(trust_member(t, addr(7))->clipped == 3);
	/* it comes back near: let back in */
	for (k = 1; k <= 10 && bad; k++)
		bad = obs(t, addr(7), 0, 1.0, trust_radius(t, 0));
	CHECKF(!bad && k - 1 <= 3, "still suspect after %d near slices", k - 1);
	/* honest spread: 1.5x the median at every slice stays below */
	for (k = 0; k < 50; k++)
		bad |= obs(t, addr(1), 0, 1.5, trust_radius(t, 0));
	CHECK(!bad);
	CHECKF(trust_member(t, addr(1))->suspicion < 0.6 * TRUST_SUSPECT, "suspicion %g",
	    trust_member(t, addr(1))->suspicion);
	trust_free(t);
}

static void
test_refused_and_rejoin(void)
{
	struct trust *t = mk(2);

	for (int k = 0; k < 3; k++)
		trust_refused(t, addr(5), k);
	CHECK(trust_suspect(t, addr(5)));
	CHECK(trust_member(t, addr(5))->refused == 3);
	/* the member leaves and another process comes back on its address:
	 * nothing here forgets it, the first slice is judged as suspect */
	CHECK(obs(t, addr(5), 500, 1.0, -1));
	/* another address is another member */
	CHECK(!trust_suspect(t, addr(6)));
	trust_free(t);
}

/* The exit log's list: suspects only, with their counts; cut short, not
 * overrun, in a small buffer. */
static void
test_suspects_text(void)
{
	struct trust *t = mk(2);
	char buf[256], small[24], expect[128];

	CHECK(trust_suspects_text(t, buf, sizeof(buf)) == 0 && buf[0] == '\0');
	for (int k = 0; k < 3; k++) {
		trust_refused(t, addr(5), k);
		trust_refused(t, addr(6), k);
	}
	obs(t, addr(1), 3, 1.0, -1);
	CHECK(trust_suspects_text(t, buf, sizeof(buf)) == 2);
	snprintf(expect, sizeof(expect), "%s suspicion ", addr(5));
	CHECKF(strncmp(buf, expect, strlen(expect)) == 0, "%s", buf);
	CHECKF(strstr(buf, "(0 slices, 0 clipped, 0 behind, 3 refused); ") != NULL, "%s", buf);
	CHECKF(strstr(buf, addr(6)) != NULL && strstr(buf, addr(1)) == NULL, "%s", buf);
	CHECK(trust_suspects_text(t, small, sizeof(small)) == 2);
	CHECKF(strlen(small) == sizeof(small) - 1 &&
	    strcmp(small + sizeof(small) - 4, "...") == 0, "%s", small);
	trust_free(t);
	t = mk(0);
	CHECK(trust_suspects_text(t, buf, sizeof(buf)) == -1 && buf[0] == '\0');
	trust_free(t);
}

/* Slices within the radius are judged by their way too: a stale model
 * (ratio near 0) and a negated one (cosine below 0) are suspect after
 * three, with or without a quorum; honest ways on skewed shards (the
 * least ratio and cosine seen, 0.24 and 0.27) and a joiner that has come
 * no way yet are not; a stale member's slices count as behind. */
static void
test_behind(void)
{
	struct trust *t = mk(2);
	int k, bad = 0;

	for (int i = 0; i < 4; i++)
		obs(t, addr(i), 0, 1.0, -1);
	for (k = 1; k <= 10 && !bad; k++)
		bad = obs_way(t, addr(5), 1.0, trust_radius(t, 0), 1.0, 0.01, 0.5);
	CHECKF(bad && k - 1 == 3, "stale: suspect after %d slices", k - 1);
	CHECK(trust_member(t, addr(5))->behind == 3 && trust_member(t, addr(5))->clipped == 0);
	bad = 0;
	for (k = 1; k <= 10 && !bad; k++)
		bad = obs_way(t, addr(6), 1.9, -1, 1.0, 1.0, -0.7);
	CHECKF(bad && k - 1 == 3, "negated: suspect after %d slices", k - 1);
	bad = 0;
	for (k = 0; k < 50; k++) {
		bad |= obs_way(t, addr(1), 1.0, trust_radius(t, 0), 1.0, 0.24, 0.5);
		bad |= obs_way(t, addr(2), 1.0, trust_radius(t, 0), 1.0, 1.0, 0.27);
	}
	CHECK(!bad);
	CHECK(trust_member(t, addr(2))->suspicion == 0 && trust_member(t, addr(2))->behind == 0);
	/* this peer has come 1/5 of the honest distance: a way not judged */
	for (k = 0; k < 10; k++)
		bad |= obs_way(t, addr(3), 1.0, trust_radius(t, 0), 0.2, 0.01, -1);
	CHECK(!bad && trust_member(t, addr(3))->suspicion == 0);
	trust_free(t);
}

static void
test_full_table(void)
{
	struct trust *t = mk(2);
	char a[32];

	trust_refused(t, addr(0), 0);
	trust_refused(t, addr(0), 0);
	trust_refused(t, addr(0), 0);
	for (int i = 1; i < 1000; i++) {
		snprintf(a, sizeof(a), "10.0.%d.%d:1", i / 256, i % 256);
		obs(t, a, i, 1.0, -1);
	}
	CHECK(trust_suspect(t, addr(0)));  /* the suspect is kept */
	CHECK(trust_member(t, "10.0.3.231:1") != NULL);  /* the newest too */
	CHECK(trust_member(t, "10.0.0.1:1") == NULL);  /* the oldest honest went */
	trust_free(t);
}

/* Three members with votes 1, 2, 3 (frozen with trust_freeze when freeze),
 * then 20 rounds in which they agree to 0.001 and a fourth sends slices
 * 3.0 away, each judged by the radius of its moment: whether the fourth
 * was ever suspect. */
static int
closing_beside_trainer(struct trust *t, int freeze)
{
	int suspect = 0;

	for (int i = 0; i < 3; i++)
		obs(t, addr(i), 0, 1.0 + i, -1);
	if (freeze)
		trust_freeze(t, 0);
	for (int k = 0; k < 20; k++) {
		for (int i = 0; i < 3; i++)
			obs(t, addr(i), 1 + k, 0.001, trust_radius(t, 1 + k));
		suspect |= obs(t, addr(3), 1 + k, 3.0, trust_radius(t, 1 + k));
	}
	return suspect;
}

/* Peers that are done close until they agree: their votes fall towards
 * 0, and a member still training would lie past any radius they gave. */
static void
test_freeze(void)
{
	struct trust *t = mk(2);
	int suspect;

	trust_freeze(NULL, 0);
	suspect = closing_beside_trainer(t, 1);
	CHECKF(fabs(trust_radius(t, 20) - 4.0) < 1e-12, "frozen radius %g", trust_radius(t, 20));
	CHECK(!suspect && !trust_suspect(t, addr(3)));
	/* the votes are of the median then; the factor stays the current one */
	trust_set_params(t, &(struct trust_params){ 3 });
	CHECKF(fabs(trust_radius(t, 1000) - 6.0) < 1e-12, "radius %g", trust_radius(t, 1000));
	trust_freeze(t, 1000);  /* the first call counts */
	CHECKF(fabs(trust_radius(t, 1000) - 6.0) < 1e-12, "radius %g", trust_radius(t, 1000));
	/* far slices are still judged by it */
	for (int k = 0; k < 4; k++)
		obs(t, addr(4), 1000, 50.0, trust_radius(t, 1000));
	CHECK(trust_suspect(t, addr(4)));
	trust_free(t);

	/* unfrozen, the same votes leave the member training far outside */
	t = mk(2);
	CHECK(closing_beside_trainer(t, 0) && trust_suspect(t, addr(3)));
	trust_free(t);

	/* frozen without a quorum: no radius, then or later */
	t = mk(2);
	obs(t, addr(0), 0, 1.0, -1);
	trust_freeze(t, 0);
	for (int i = 1; i < 4; i++)
		obs(t, addr(i), 1, 1.0, -1);
	CHECK(trust_radius(t, 1) < 0);
	trust_free(t);
}

/* Closers agree to 0.001 and say their training is over: their votes stay
 * those they cast while they trained, for a peer still training and for
 * one whose training ends after they began to close (its freeze takes
 * those); their slices are still judged, and keep their votes fresh.
 * Members that never trained in this peer's sight (it joined while they
 * linger) vote their distances. */
static void
test_trained(void)
{
	struct trust *t = mk(2);
	int suspect = 0;

	for (int i = 0; i < 3; i++)
		obs(t, addr(i), 0, 1.0 + i, -1);
	for (int k = 0; k < 20; k++) {
		for (int i = 0; i < 3; i++)
			obs_trained(t, addr(i), 1 + k, 0.001, trust_radius(t, 1 + k));
		suspect |= obs(t, addr(3), 1 + k, 3.0, trust_radius(t, 1 + k));
	}
	/* 2 x the median of 1, 2, 3 and the trainer's own 3 */
	CHECKF(fabs(trust_radius(t, 20) - 5.0) < 1e-12, "radius %g", trust_radius(t, 20));
	CHECK(!suspect && !trust_suspect(t, addr(3)));
	CHECK(trust_member(t, addr(0))->distance == 1.0 && trust_member(t, addr(0))->slices == 21);
	/* the last votes came at 20 */
	CHECK(trust_radius(t, 80) > 0 && trust_radius(t, 81) < 0);
	trust_free(t);

	t = mk(2);
	for (int i = 0; i < 3; i++)
		obs_trained(t, addr(i), 0, 1.0 + i, -1);
	CHECKF(fabs(trust_radius(t, 0) - 4.0) < 1e-12, "radius %g", trust_radius(t, 0));
	trust_free(t);

	/* two closers pull this peer in before its own training ends */
	t = mk(2);
	for (int i = 0; i < 3; i++)
		obs(t, addr(i), 0, 1.0 + i, -1);
	for (int k = 0; k < 5; k++) {
		obs_trained(t, addr(0), 0.1, 0.001, trust_radius(t, 0.1));
		obs_trained(t, addr(1), 0.1, 0.001, trust_radius(t, 0.1));
	}
	trust_freeze(t, 0.2);
	CHECKF(fabs(trust_radius(t, 1) - 4.0) < 1e-12, "frozen radius %g", trust_radius(t, 1));
	suspect = 0;
	for (int k = 0; k < 20; k++)
		suspect |= obs(t, addr(2), 1 + k, 3.0, trust_radius(t, 1 + k));
	CHECK(!suspect);
	/* far is far, trained or not */
	for (int k = 0; k < 4; k++)
		obs_trained(t, addr(4), 30, 50.0, trust_radius(t, 30));
	CHECK(trust_suspect(t, addr(4)));
	trust_free(t);
}

static void
test_off(void)
{
	struct trust *t = mk(0);

	for (int i = 0; i < 4; i++)
		obs(t, addr(i), 0, 1.0, -1);
	CHECK(trust_radius(t, 0) < 0);
	for (int k = 0; k < 5; k++) {
		CHECK(!obs(t, addr(7), 0, 50.0, 2.0));
		trust_refused(t, addr(7), 0);
	}
	CHECK(!trust_suspect(t, addr(7)));
	trust_free(t);
}

static const struct check_case cases[] = {
	{ "trust_radius", test_radius },
	{ "trust_vote_span", test_vote_span },
	{ "trust_stagger", test_stagger },
	{ "trust_suspect", test_suspect },
	{ "trust_refused_and_rejoin", test_refused_and_rejoin },
	{ "trust_suspects_text", test_suspects_text },
	{ "trust_behind", test_behind },
	{ "trust_full_table", test_full_table },
	{ "trust_freeze", test_freeze },
	{ "trust_trained", test_trained },
	{ "trust_off", test_off },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_trust");
}
