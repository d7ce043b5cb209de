/*
 * workers: see workers.h. One mutex guards both lists: jobs are a few
 * per megabyte, so it is never contended long, and one lock keeps the
 * hand-over between the lists simple to reason about. The todo list is
 * FIFO so that a body's chunks are sealed in the order they go out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "workers.h"

struct workers {
	uv_loop_t		*loop;
	uv_async_t		async;
	pthread_mutex_t		mu;
	pthread_cond_t		cv;
	struct workers_job	*todo, *todo_tail;
	struct workers_job	*done, *done_tail;
	int			stopping;
	unsigned		waiting;	/* threads with nothing to do */
	unsigned		queued;		/* jobs on todo */
	unsigned		nthreads;
	pthread_t		threads[WORKERS_MAX];
	void			(*close_cb)(void *);
	void			*close_arg;
};

unsigned
workers_default_count(void)
{
	unsigned n = uv_available_parallelism();

	n = n > 1 ? n - 1 : 1;
	return n < 4 ? n : 4;
}

static void
list_push(struct workers_job **head, struct workers_job **tail,
    struct workers_job *j)
{
	j->next = NULL;
	if (*tail != NULL)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

/* Under mu: a finished job for the loop. */
static void
finished(struct workers *w, struct workers_job *j)
{
	list_push(&w->done, &w->done_tail, j);
}

static void *
worker_main(void *arg)
{
	struct workers *w = arg;
	struct workers_job *j;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->todo == NULL && !w->stopping) {
			w->waiting++;
			pthread_cond_wait(&w->cv, &w->mu);
			w->waiting--;
		}
		if ((j = w->todo) == NULL)
			break;
		if ((w->todo = j->next) == NULL)
			w->todo_tail = NULL;
		w->queued--;
		pthread_mutex_unlock(&w->mu);
		j->work(j);
		pthread_mutex_lock(&w->mu);
		finished(w, j);
		uv_async_send(&w->async);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* On the loop thread: run the done of every finished job, in order. */
static void
on_async(uv_async_t *h)
{
	struct workers *w = h->data;
	struct workers_job *j, *next;

	pthread_mutex_lock(&w->mu);
	j = w->done;
	w->done = w->done_tail = NULL;
	pthread_mutex_unlock(&w->mu);
	for (; j != NULL; j = next) {
		next = j->next;
		j->done(j);
	}
}

int
workers_open(uv_loop_t *loop, unsigned n, struct workers **out,
    struct errbuf *err)
{
	struct workers *w;
	int rc;

	if (n > WORKERS_MAX)
		return errbuf_set(err, -EINVAL, "workers: %u threads, at most "
		    "%d", n, WORKERS_MAX);
	w = xcalloc(1, sizeof(*w));
	w->loop = loop;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if ((rc = uv_async_init(loop, &w->async, on_async)) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return errbuf_set(err, rc, "workers: %s", uv_strerror(rc));
	}
	w->async.data = w;
	for (; w->nthreads < n; w->nthreads++)
		if ((rc = pthread_create(&w->threads[w->nthreads], NULL,
		    worker_main, w)) != 0)
			break;
	if (w->nthreads < n) {
		workers_close(w, NULL, NULL);
		return errbuf_set(err, -rc, "workers: cannot start a thread: "
		    "%s", strerror(rc));
	}
	*out = w;
	return 0;
}

unsigned
workers_count(const struct workers *w)
{
	return w->nthreads;
}

int
workers_idle(struct workers *w)
{
	int idle;

	pthread_mutex_lock(&w->mu);
	idle = w->waiting > w->queued;
	pthread_mutex_unlock(&w->mu);
	return idle;
}

void
workers_submit(struct workers *w, struct workers_job *j)
{
	if (w->nthreads == 0) {
		j->work(j);
		pthread_mutex_lock(&w->mu);
		finished(w, j);
		pthread_mutex_unlock(&w->mu);
		uv_async_send(&w->async);
		return;
	}
	pthread_mutex_lock(&w->mu);
	list_push(&w->todo, &w->todo_tail, j);
	w->queued++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void
on_closed(uv_handle_t *h)
{
	struct workers *w = h->data;
	void (*cb)(void *) = w->close_cb;
	void *arg = w->close_arg;

	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	if (cb != NULL)
		cb(arg);
}

void
workers_close(struct workers *w, void (*cb)(void *arg), void *arg)
{
	unsigned i;

	pthread_mutex_lock(&w->mu);
	w->stopping = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	on_async(&w->async);
	w->close_cb = cb;
	w->close_arg = arg;
	uv_close((uv_handle_t *)&w->async, on_closed);
}
