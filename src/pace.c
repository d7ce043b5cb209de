/* Bounded staleness between the trainer and its exchanges; see pace.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pace.h"
#include "util.h"

struct pace {
	pthread_mutex_t mu;
	pthread_cond_t cv;
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

void
pace_hold(struct pace *p, uint64_t limit)
{
	pthread_mutex_lock(&p->mu);
	p->held = 1;
	p->limit = limit;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
pace_release(struct pace *p)
{
	pthread_mutex_lock(&p->mu);
	p->held = 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
pace_close(struct pace *p)
{
	pthread_mutex_lock(&p->mu);
	p->closed = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
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

void
pace_stats(struct pace *p, double *seconds, uint64_t *waits)
{
	pthread_mutex_lock(&p->mu);
	*seconds = p->waited;
	*waits = p->waits;
	pthread_mutex_unlock(&p->mu);
}
