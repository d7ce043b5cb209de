/*
 * workers: a few threads of the transport's own that run CPU-bound jobs
 * (sealing and opening a body's chunks) off the loop thread and hand each
 * one back to the loop, in the order they finished, through one
 * uv_async. Not libuv's thread pool: that pool is process-wide, shared
 * with file writes that may block it for long (checkpoints), and sized
 * once for the whole process; here the count fits the job. Measured on 2
 * cores with both ends of a transfer on the machine (4 MiB messages, one
 * in flight, an early version that sealed every chunk on the pool):
 * libuv's default 4 threads per process reached 1.87 GB/s, 1 thread per
 * process 2.48 GB/s; threads that outnumber the cores wake each other up
 * for nothing.
 *
 * A job is a record the caller owns and embeds (struct workers_job
 * first, or found from it), submitted from the loop thread; work runs on
 * a worker and must touch only what the job owns; done runs on the loop
 * thread, never inside workers_submit. With 0 threads, work runs on the
 * loop thread at submission and done still comes later, from the loop.
 */
#ifndef GD_WORKERS_H
#define GD_WORKERS_H

#include <uv.h>

#include "util.h"

#define WORKERS_MAX	16

struct workers;
struct workers_job;

typedef void (*workers_fn)(struct workers_job *j);

struct workers_job {
	struct workers_job	*next;
	workers_fn		work;	/* on a worker thread */
	workers_fn		done;	/* on the loop thread, afterwards */
};

/*
 * The count a transport uses by default: one thread per core beyond the
 * loop's, at least one, at most 4 (a body has few chunks in flight).
 */
unsigned workers_default_count(void);

/* Start n (0..WORKERS_MAX) threads serving loop. 0 or a negative errno
 * with the reason in err. */
int workers_open(uv_loop_t *loop, unsigned n, struct workers **out,
    struct errbuf *err);

/*
 * Whether a job submitted now would start at once (a thread waits with
 * nothing to do). When none would, a caller that can do the work itself
 * on the loop thread gains nothing from queueing it behind the others
 * and saves the hand-over. Loop thread only.
 */
int workers_idle(struct workers *w);

/* How many threads w has. */
unsigned workers_count(const struct workers *w);

/* Queue j (its work and done set). Loop thread only. */
void workers_submit(struct workers *w, struct workers_job *j);

/*
 * Let the threads finish what was submitted, join them, run every done
 * that is still due (so each job is handed back exactly once), then cb;
 * w is freed.
 */
void workers_close(struct workers *w, void (*cb)(void *arg), void *arg);

#endif
