/*
 * model: the peer's model as one flat vector of d floats, and the only door
 * through which the rest of the daemon touches it.
 *
 * Layout of the vector (fixed: checkpoints and every backend rely on it):
 * for each layer l = 0..L-1 with fan-in a = sizes[l] and fan-out b =
 * sizes[l+1], first W_l as a row-major a x b matrix (so a batch A of shape
 * n x a maps to A*W_l), then the bias b_l of b floats. Hidden layers use
 * ReLU, the last is followed by softmax cross-entropy.
 *
 * The parameters live wherever the backend keeps them (host memory for cpu,
 * device memory for cuda). The trainer thread runs steps; the loop thread
 * reads and mixes slices through model_gather / model_average_in, and must
 * not wait for a whole step to do so (on a busy machine a step takes
 * milliseconds, and every exchange would wait several of them). So the
 * lock is a read-write lock: forward and backward only read the
 * parameters and hold it shared, and gathers run alongside (where the
 * backend allows); the SGD update holds it exclusively. A mix that finds
 * the lock taken is queued and applied by the trainer right after its
 * update, so the loop never waits for more than an update.
 */
#ifndef GD_MODEL_H
#define GD_MODEL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"	/* struct model_range, struct sgd_hparams */
#include "kinds.h"	/* struct model_spec, MODEL_MAX_LAYERS */
#include "util.h"

/* A run of consecutive coordinates [off, off + len). Masks are arrays of these. */

struct model {
	struct model_spec spec;
	size_t d;
	struct backend *be;
	pthread_rwlock_t lock;
};

/* "784-256-128-10" (an optional "mlp:" prefix is accepted). */
int model_spec_parse(const char *s, struct model_spec *spec, struct errbuf *err);
int model_spec_format(const struct model_spec *spec, char *buf, size_t len);
int model_spec_equal(const struct model_spec *a, const struct model_spec *b);
size_t model_spec_nparams(const struct model_spec *spec);

/* device: "cpu", "cuda" or "cuda:N". threads: BLAS threads for cpu.
 * Parameters get a deterministic He initialisation from seed; momentum 0. */
int model_new(const struct model_spec *spec, const char *device, int threads,
    int max_batch, uint64_t seed, struct model **out, struct errbuf *err);
void model_free(struct model *m);

/* One SGD step (forward, backward, momentum update) on n samples. */
int model_train_step(struct model *m, const float *x, const uint8_t *y, int n,
    const struct sgd_hparams *h, float *loss);
/* Offsets (one per class, copied; NULL: none) added to the logits in the
 * training loss, not in evaluation. -ENOTSUP for an external trainer's
 * model, which has no loss here. */
int model_set_logit_offset(struct model *m, const float *off);
/* Mean loss and accuracy over n samples, evaluated in batches. */
int model_evaluate(struct model *m, const float *x, const uint8_t *y, size_t n,
    double *loss, double *accuracy);

/* The gossip interface. values holds sum(len) floats in range order. */
int model_gather(struct model *m, const struct model_range *r, size_t nr, float *values);
/* x[S] <- (x[S] + values) / 2 on the ranges. */
int model_average_in(struct model *m, const struct model_range *r, size_t nr,
    const float *values);
/* x[S] += values, applied or queued as a mix is, in order with the mixes
 * (an outer optimizer's step: an increment, so that a training step taken
 * meanwhile is kept); not counted in model_mixes. -ENOTSUP on a backend
 * without it (cuda). */
int model_add_in(struct model *m, const struct model_range *r, size_t nr, const float *values);
/* Copy parameters (x) and momentum (v) to host memory; v may be NULL.
 * Queued mixes are applied first, unless the vector is held. */
int model_snapshot(struct model *m, float *x, float *v);
/* Replace parameters and momentum (v NULL = zero) from host memory. */
int model_restore(struct model *m, const float *x, const float *v);

/*
 * An external trainer's model (gossipd-attach(7)): the parameters are a
 * vector a training process shares with the daemon, with no layers the
 * daemon knows of (spec.nlayers 0). It has d = 0 until model_share binds
 * the vector, once. While the process computes a step the vector is held:
 * mixes queue (past MODEL_PENDING_MODELS models' worth, model_average_in
 * returns -EBUSY rather than wait for a process that may never return);
 * model_release, at the process's step boundary, applies them.
 */
int model_new_shared(struct model **out, struct errbuf *err);
void model_share(struct model *m, float *mem, size_t d);
void model_hold(struct model *m);
int model_release(struct model *m);
/* Mixes applied so far (queued ones once applied). */
uint64_t model_mixes(struct model *m);

#endif
