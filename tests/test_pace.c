/* pace: the trainer stops exactly at the held step and goes on when the
 * loop releases or closes; steps before the limit never wait. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"
#include "pace.h"

struct walker {
	struct pace *p;
	uint64_t steps;
	atomic_uint_fast64_t done;   /* last step finished and waited for */
};

static void *
walk(void *arg)
{
	struct walker *w = arg;

	for (uint64_t s = 1; s <= w->steps; s++) {
		pace_wait(w->p, s);
		atomic_store(&w->done, s);
	}
	return NULL;
}

static void
nap(double s)
{
	struct timespec ts = { 0, (long)(s * 1e9) };

	nanosleep(&ts, NULL);
}

/* Wait up to 2 s for the walker to pass `step`; returns its position. */
static uint64_t
settle(struct walker *w, uint64_t step)
{
	for (int i = 0; i < 200 && atomic_load(&w->done) < step; i++)
		nap(0.01);
	return atomic_load(&w->done);
}

/* A fresh pace held at `hold` and a walker of `steps` steps running on it. */
static void
walker_start(struct walker *w, pthread_t *th, uint64_t steps, uint64_t hold)
{
	w->steps = steps;
	atomic_init(&w->done, 0);
	REQUIRE(pace_new(&w->p) == 0);
	pace_hold(w->p, hold);
	REQUIRE(pthread_create(th, NULL, walk, w) == 0);
}

/* Let the walker run to its last step, and join it. */
static void
walker_finish(struct walker *w, pthread_t th)
{
	CHECKF(settle(w, w->steps) == w->steps, "walker stopped at %llu of %llu",
	    (unsigned long long)atomic_load(&w->done), (unsigned long long)w->steps);
	pthread_join(th, NULL);
}

static void
test_hold_release(void)
{
	struct walker w;
	pthread_t th;
	double waited;
	uint64_t waits;

	walker_start(&w, &th, 100, 10);
	/* Steps 1..9 pass; step 10 is finished but held. */
	CHECKF(settle(&w, 9) == 9, "walker at %llu", (unsigned long long)atomic_load(&w.done));
	nap(0.1);
	CHECKF(atomic_load(&w.done) == 9, "walker ran past the hold to %llu",
	    (unsigned long long)atomic_load(&w.done));
	/* A later limit (the next round) moves the stop: the walker goes on
	 * to it and no further. */
	pace_hold(w.p, 20);
	CHECK(settle(&w, 19) == 19);
	nap(0.1);
	CHECK(atomic_load(&w.done) == 19);
	pace_release(w.p);
	walker_finish(&w, th);
	pace_stats(w.p, &waited, &waits);
	CHECKF(waits == 2, "waits %llu", (unsigned long long)waits);
	CHECKF(waited >= 0.15 && waited < 5, "waited %.3f s", waited);
	pace_free(w.p);
}

static void
test_close(void)
{
	struct walker w;
	pthread_t th;
	double waited;
	uint64_t waits;

	walker_start(&w, &th, 50, 5);
	CHECK(settle(&w, 4) == 4);
	pace_close(w.p);
	walker_finish(&w, th);
	/* Closed for good: a later hold no longer stops anyone. */
	pace_hold(w.p, 1);
	pace_wait(w.p, 3);
	pace_stats(w.p, &waited, &waits);
	CHECKF(waits == 1, "waits %llu", (unsigned long long)waits);
	pace_free(w.p);
}

static void
test_no_hold(void)
{
	struct pace *p;
	double waited;
	uint64_t waits;

	REQUIRE(pace_new(&p) == 0);
	for (uint64_t s = 0; s < 1000; s++)
		pace_wait(p, s);
	pace_hold(p, 100);
	pace_release(p);
	pace_wait(p, 1000);
	pace_stats(p, &waited, &waits);
	CHECK(waits == 0 && waited == 0);
	pace_free(p);
}

static const struct check_case cases[] = {
	{ "pace_no_hold", test_no_hold },
	{ "pace_hold_release", test_hold_release },
	{ "pace_close", test_close },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_pace");
}
