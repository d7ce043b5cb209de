/* Bounded staleness between the trainer and its exchanges; see pace.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pace.h"
#include "util.h"

struct pace {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* Written by the loop thread only, under mu: the loop thread reads
	 * them without it. */
	int held;
	int closed;
	uint64_t limit;
	double waited;
	uint64_t waits;
};

int
pace_new(struct pace **out)
{
	struct pace *p;

	*out = NULL;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return -ENOMEM;
	if (pthread_mutex_init(&p->mu, NULL) != 0) {
		free(p);
		return -ENOMEM;
	}
	if (pthread_cond_init(&p->cv, NULL) != 0) {
		pthread_mutex_destroy(&p->mu);
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void
pace_free(struct pace *p)
{
	if (p == NULL)
		return;
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Loop thread: the new state, and the trainer wakes to look at it. */
static void
pace_set(struct pace *p, int held, uint64_t limit, int closed)
{
	pthread_mutex_lock(&p->mu);
	p->held = held;
	p->limit = limit;
	p->closed = closed;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
pace_hold(struct pace *p, uint64_t limit)
{
	pace_set(p, 1, limit, p->closed);
}

void
pace_release(struct pace *p)
{
	pace_set(p, 0, p->limit, p->closed);
}

void
pace_close(struct pace *p)
{
	pace_set(p, p->held, p->limit, 1);
}

void
pace_wait(struct pace *p, uint64_t step)
{
	double t0;

	pthread_mutex_lock(&p->mu);
	if (p->held && !p->closed && step >= p->limit) {
		t0 = util_now();
		p->waits++;
		while (p->held && !p->closed && step >= p->limit)
			pthread_cond_wait(&p->cv, &p->mu);
		p->waited += util_now() - t0;
	}
	pthread_mutex_unlock(&p->mu);
}

int
pace_holds(struct pace *p, uint64_t step)
{
	return p->held && !p->closed && step >= p->limit;
}

void
pace_waited(struct pace *p, double seconds)
{
	pthread_mutex_lock(&p->mu);
	p->waited += seconds;
	p->waits++;
	pthread_mutex_unlock(&p->mu);
}

void
pace_stats(struct pace *p, double *seconds, uint64_t *waits)
{
	pthread_mutex_lock(&p->mu);
	*seconds = p->waited;
	*waits = p->waits;
	pthread_mutex_unlock(&p->mu);
}
