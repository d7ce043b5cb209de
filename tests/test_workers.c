/*
 * test_workers: with 0, 1 and 4 threads, every submitted job's work runs
 * once (on a worker thread when there are threads), its done runs once on
 * the loop thread and never inside workers_submit; the workers_idle hint
 * turns false while the threads are busy; closing hands back the jobs
 * still due before its callback; and a bad thread count is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <uv.h>

#include "check.h"
#include "workers.h"

#define NJOBS	200

struct job {
	struct workers_job	j;
	pthread_t		ran_on;
	int			worked, done;
};

static pthread_t loop_thread;
static int in_submit, dones, closed;
static atomic_int hold;	/* workers spin while set */

static void
work(struct workers_job *wj)
{
	struct job *j = (struct job *)wj;

	while (atomic_load(&hold))
		;
	j->ran_on = pthread_self();
	j->worked++;
}

static void
done(struct workers_job *wj)
{
	struct job *j = (struct job *)wj;

	CHECK(!in_submit);
	CHECK(pthread_equal(pthread_self(), loop_thread));
	CHECK(j->worked == 1);
	j->done++;
	dones++;
}

static void
on_closed(void *arg)
{
	CHECK(arg == &closed);
	closed++;
}

static void
run(unsigned n)
{
	static struct job jobs[NJOBS];
	uv_loop_t loop;
	struct workers *w;
	struct errbuf err;
	int i;

	memset(jobs, 0, sizeof(jobs));
	dones = closed = 0;
	REQUIRE(uv_loop_init(&loop) == 0);
	REQUIRE(workers_open(&loop, n, &w, &err) == 0);
	if (n > 0) {
		/* Let the threads reach their wait, then hold one busy. */
		while (!workers_idle(w))
			uv_sleep(1);
		atomic_store(&hold, 1);
		for (i = 0; i < (int)n; i++) {
			jobs[i].j.work = work;
			jobs[i].j.done = done;
			workers_submit(w, &jobs[i].j);
		}
		CHECK(!workers_idle(w));
		atomic_store(&hold, 0);
	}
	for (i = n; i < NJOBS; i++) {
		jobs[i].j.work = work;
		jobs[i].j.done = done;
		in_submit = 1;
		workers_submit(w, &jobs[i].j);
		in_submit = 0;
	}
	while (dones < NJOBS / 2)
		uv_run(&loop, UV_RUN_ONCE);
	workers_close(w, on_closed, &closed);
	CHECK(dones == NJOBS);	/* what was due is handed back at once */
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK(closed == 1);
	for (i = 0; i < NJOBS; i++) {
		CHECK(jobs[i].worked == 1 && jobs[i].done == 1);
		CHECK(pthread_equal(jobs[i].ran_on, loop_thread) == (n == 0));
	}
	CHECK(uv_loop_close(&loop) == 0);
}

static void
test_no_threads(void)
{
	run(0);
}

static void
test_one_thread(void)
{
	run(1);
}

static void
test_four_threads(void)
{
	run(4);
}

static void
test_counts(void)
{
	uv_loop_t loop;
	struct workers *w;
	struct errbuf err;

	CHECK(workers_default_count() >= 1 && workers_default_count() <= 4);
	REQUIRE(uv_loop_init(&loop) == 0);
	CHECK(workers_open(&loop, WORKERS_MAX + 1, &w, &err) == -EINVAL);
	CHECK(strstr(err.msg, "threads") != NULL);
	CHECK(uv_loop_close(&loop) == 0);
}

static const struct check_case cases[] = {
	{ "workers_no_threads", test_no_threads },
	{ "workers_one_thread", test_one_thread },
	{ "workers_four_threads", test_four_threads },
	{ "workers_counts", test_counts },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	loop_thread = pthread_self();
	return check_main(argc, argv, cases, "test_workers");
}
