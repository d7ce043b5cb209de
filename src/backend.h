/*
 * backend: the compute interface under the model. A backend owns the
 * parameters, momentum, gradients and scratch buffers in its own memory
 * (host for cpu, device for cuda) and implements the few operations the
 * model needs. Nothing above this interface knows where the numbers live:
 * host pointers cross it, and a backend copies as it must.
 *
 * Each backend embeds struct backend as its first member.
 */
#ifndef GD_BACKEND_H
#define GD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"	/* struct model_spec */
#include "util.h"

/* A run of coordinates of the flat parameter vector. */
struct model_range {
	size_t off;
	size_t len;
};

struct sgd_hparams {
	float lr;
	float momentum;
	float weight_decay;
};

struct backend;

struct backend_opts {
	int threads;    /* BLAS threads (cpu) */
	int device;     /* device index (cuda) */
	int max_batch;  /* largest n passed to forward_backward / evaluate */
};

struct backend_ops {
	const char *name;
	void (*free)(struct backend *b);
	/* x, v: d floats in host memory; v NULL means zero momentum. */
	int (*set_params)(struct backend *b, const float *x, const float *v);
	/* Either pointer may be NULL. */
	int (*get_params)(struct backend *b, float *x, float *v);
	/* Forward and backward on n <= max_batch samples; keeps the gradient
	 * (mean over the batch) inside the backend; writes the mean loss. */
	int (*forward_backward)(struct backend *b, const float *x, const uint8_t *y,
	    int n, float *loss);
	/* Offsets added to the logits in forward_backward's loss, never in
	 * evaluate's: one float per class, copied; NULL removes them. */
	int (*set_logit_offset)(struct backend *b, const float *off);
	/* Copy the last gradient to host memory (tests). */
	int (*get_grad)(struct backend *b, float *g);
	/* v <- momentum*v + g + wd*x; x <- x - lr*v. */
	int (*sgd_step)(struct backend *b, const struct sgd_hparams *h);
	/* Sum of losses and number of correct predictions on n <= max_batch. */
	int (*evaluate)(struct backend *b, const float *x, const uint8_t *y, int n,
	    double *loss_sum, int *correct);
	int (*gather)(struct backend *b, const struct model_range *r, size_t nr,
	    float *values);
	int (*average_in)(struct backend *b, const struct model_range *r, size_t nr,
	    const float *values);
	/* x[S] += values (an outer optimizer's step); NULL: not supported. */
	int (*add_in)(struct backend *b, const struct model_range *r, size_t nr,
	    const float *values);
};

struct backend {
	const struct backend_ops *ops;
	struct model_spec spec;
	size_t d;
	/* 1 if gather may run while forward_backward runs on another thread:
	 * both only read the parameters (true for cpu; cuda shares one stream
	 * and its staging buffers, so it stays exclusive). */
	int concurrent_reads;
};

/* Memory an external training process shares with the daemon: d = 0 until
 * backend_shared_bind gives it the vector (the process announces its size
 * when it attaches). It gathers, mixes, snapshots and restores; the
 * process does the arithmetic, so the training operations are -ENOTSUP. */
int backend_shared_new(struct backend **out, struct errbuf *err);
/* mem (d floats) is borrowed: it must outlive the backend. */
void backend_shared_bind(struct backend *b, float *mem, size_t d);

/* Gather and mix on d floats in host memory (backends on host memory). */
int backend_host_gather(const float *x, const struct model_range *r, size_t nr,
    float *values);
int backend_host_average_in(float *x, const struct model_range *r, size_t nr,
    const float *values);
int backend_host_add_in(float *x, const struct model_range *r, size_t nr,
    const float *values);

int backend_cpu_new(const struct model_spec *spec, const struct backend_opts *o,
    struct backend **out, struct errbuf *err);
/* Returns -ENOTSUP with a clear message when built without CUDA, and a
 * clear error when no device, a bad index or too little memory. */
int backend_cuda_new(const struct model_spec *spec, const struct backend_opts *o,
    struct backend **out, struct errbuf *err);

#endif
