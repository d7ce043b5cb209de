/*
 * backend_shared: the backend under an external trainer's model (backend.h).
 * The parameters are the vector the daemon shares with the training
 * process (attach.c creates and maps it); this file only reads and mixes
 * it. There is no momentum here: the process keeps its optimizer state, so
 * snapshots report zero momentum and restores ignore it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

struct backend_shared {
	struct backend base;
	float *x;                 /* borrowed: the shared vector */
};

static void
shared_free(struct backend *b)
{
	free(b);
}

static int
shared_set_params(struct backend *b, const float *x, const float *v)
{
	struct backend_shared *s = (struct backend_shared *)b;

	(void)v;
	memcpy(s->x, x, b->d * sizeof(float));
	return 0;
}

static int
shared_get_params(struct backend *b, float *x, float *v)
{
	struct backend_shared *s = (struct backend_shared *)b;

	if (x != NULL)
		memcpy(x, s->x, b->d * sizeof(float));
	if (v != NULL)
		memset(v, 0, b->d * sizeof(float));
	return 0;
}

static int
shared_forward_backward(struct backend *b, const float *x, const uint8_t *y, int n,
    float *loss)
{
	(void)b, (void)x, (void)y, (void)n, (void)loss;
	return -ENOTSUP;
}

static int
shared_set_logit_offset(struct backend *b, const float *off)
{
	(void)b, (void)off;
	return -ENOTSUP;
}

static int
shared_get_grad(struct backend *b, float *g)
{
	(void)b, (void)g;
	return -ENOTSUP;
}

static int
shared_sgd_step(struct backend *b, const struct sgd_hparams *h)
{
	(void)b, (void)h;
	return -ENOTSUP;
}

static int
shared_evaluate(struct backend *b, const float *x, const uint8_t *y, int n,
    double *loss_sum, int *correct)
{
	(void)b, (void)x, (void)y, (void)n, (void)loss_sum, (void)correct;
	return -ENOTSUP;
}

static int
shared_gather(struct backend *b, const struct model_range *r, size_t nr, float *values)
{
	return backend_host_gather(((struct backend_shared *)b)->x, r, nr, values);
}

static int
shared_average_in(struct backend *b, const struct model_range *r, size_t nr,
    const float *values)
{
	return backend_host_average_in(((struct backend_shared *)b)->x, r, nr, values);
}

static int
shared_add_in(struct backend *b, const struct model_range *r, size_t nr, const float *values)
{
	return backend_host_add_in(((struct backend_shared *)b)->x, r, nr, values);
}

static const struct backend_ops shared_ops = {
	.name = "shared",
	.free = shared_free,
	.set_params = shared_set_params,
	.get_params = shared_get_params,
	.forward_backward = shared_forward_backward,
	.set_logit_offset = shared_set_logit_offset,
	.get_grad = shared_get_grad,
	.sgd_step = shared_sgd_step,
	.evaluate = shared_evaluate,
	.gather = shared_gather,
	.average_in = shared_average_in,
	.add_in = shared_add_in,
};

int
backend_shared_new(struct backend **out, struct errbuf *err)
{
	struct backend_shared *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return errbuf_set(err, -ENOMEM, "shared backend: no memory");
	s->base.ops = &shared_ops;
	/* Reads race only with the process, which the lock cannot stop. */
	s->base.concurrent_reads = 1;
	*out = &s->base;
	return 0;
}

void
backend_shared_bind(struct backend *b, float *mem, size_t d)
{
	struct backend_shared *s = (struct backend_shared *)b;

	s->x = mem;
	b->d = d;
}
