/*
 * train: see train.h.
 *
 * Budget: an epoch is a pass over the *job's* training data, not over this
 * peer's shard, so every peer of a job takes the same number of steps
 * (train_budget). With skewed shards a peer that counted passes over its
 * own shard finished in a tenth of the time of the largest one, left, and
 * kept the model it had then. The epoch that status, checkpoints and the
 * lr schedule see is this job epoch.
 *
 * Reproducibility: the order of samples in pass p over the shard (a small
 * shard is passed over more often than a job epoch, a large one less) is
 * a shuffle of the shard drawn from the stream (seed, "epoch", shard, p),
 * and the partial batch at the end of a pass is dropped, so step s always
 * sees the same samples. A resumed run therefore continues exactly where
 * the checkpointed one was, and two runs with the same seed and thread
 * count are bit-identical. With iid shards a pass and a job epoch are the
 * same length, and the order is the one counted in shard passes before.
 */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <time.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "log.h"
#include "rng.h"

/* Smoothing of the loss shown to users: about the last 50 steps. */
#define TRAIN_LOSS_ALPHA 0.02
/* Minimum time between progress notifications to the loop. */
#define TRAIN_NOTIFY_INTERVAL 0.25

struct train {
	const struct config *cfg;
	struct model *m;
	struct data_set train, test;
	size_t *idx, n;           /* this peer's shard */
	size_t *order;            /* shard order of the current pass */
	float *xb;                /* one batch, gathered */
	uint8_t *yb;
	uint64_t start_step;
	struct train_budget b;
	struct train_hooks hooks;

	pthread_t thread;
	int started;              /* the thread runs (until joined) */
	int launched;             /* start was called: progress is ours */
	atomic_bool stop;
	atomic_uint_fast64_t ckpt_requested;
	atomic_uint_fast64_t catch_up;  /* the job's step to go on from; 0: none */

	pthread_mutex_t mu;       /* guards prog */
	struct train_progress prog;
};

double
train_lr_at(const struct config *cfg, uint64_t s, uint64_t steps_per_epoch, uint64_t total)
{
	double warm = cfg->warmup_epochs * (double)steps_per_epoch;
	double base = cfg->lr, t;

	if ((double)s < warm)
		return base * ((double)s + 1.0) / warm;
	switch (cfg->lr_schedule) {
	case LR_COSINE:
		if ((double)total <= warm)
			return base;
		t = ((double)s - warm) / ((double)total - warm);
		return base * 0.5 * (1.0 + cos(M_PI * (t > 1.0 ? 1.0 : t)));
	case LR_STEP:
		return base * pow(cfg->lr_step_gamma,
		    floor((double)s / (cfg->lr_step_epochs * (double)steps_per_epoch)));
	case LR_CONSTANT:
		break;
	}
	return base;
}

/*
 * Traffic is spent late: little goes out early, when peers whose shards
 * are alike hardly need it, and the full density is reached where mixing
 * decides what each peer ends with (arXiv 2507.06542 on spending the
 * budget late).
 */
double
train_density_at(const struct config *cfg, uint64_t s, uint64_t total)
{
	double start = cfg->density_start, t;

	if (start <= 0 || start >= cfg->density || total == 0)
		return cfg->density;
	t = s >= total ? 1.0 : (double)s / (double)total;
	return start + (cfg->density - start) * t * t;
}

/*
 * Label skew is what dirichlet shards are, and what gossip mixes worst:
 * each peer's momentum keeps pulling the classifier towards its own labels
 * between mixes. Logit adjustment (arXiv 2007.07314; FedLC, arXiv
 * 2209.00189) removes that pull at its source: a shard that holds a class
 * k times as often as the training set trains with tau ln k added to that
 * class's logit, so tau 1 makes its loss minimal at the job's classifier.
 * A class the shard lacks gets about -tau ln(shard size): its logit is no
 * longer pushed down by every sample of the others. One pseudo-sample per
 * class keeps the logarithms finite.
 */
int
train_logit_offset(double tau, const uint8_t *labels, size_t train_n,
    const size_t *idx, size_t n, int classes, float *off)
{
	double *shard, *all;
	int rc = 0;

	shard = calloc((size_t)classes, sizeof(*shard));
	all = calloc((size_t)classes, sizeof(*all));
	if (shard == NULL || all == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < train_n; i++)
		if (labels[i] < classes)
			all[labels[i]]++;
	for (size_t i = 0; i < n; i++)
		if (labels[idx[i]] < classes)
			shard[labels[idx[i]]]++;
	for (int c = 0; c < classes; c++)
		off[c] = (float)(tau * log((shard[c] + 1.0) / ((double)n + classes) *
		    ((double)train_n + classes) / (all[c] + 1.0)));
out:
	free(shard);
	free(all);
	return rc;
}

/* The model learns with the offsets of this peer's shard (logit_adjust). */
static int
train_set_logit_offset(const struct config *cfg, struct model *m,
    const struct data_set *train, const size_t *idx, size_t n, struct errbuf *err)
{
	int classes = m->spec.sizes[m->spec.nlayers], rc;
	float *off, lo, hi;

	if (cfg->logit_adjust <= 0)
		return 0;
	if ((off = calloc((size_t)classes, sizeof(*off))) == NULL)
		return errbuf_set(err, -ENOMEM, "out of memory for the logit offsets");
	if ((rc = train_logit_offset(cfg->logit_adjust, train->y, train->n, idx, n,
	    classes, off)) < 0 || (rc = model_set_logit_offset(m, off)) < 0) {
		errbuf_set(err, rc, "logit_adjust: cannot set the logit offsets: %s",
		    strerror(-rc));
		goto out;
	}
	lo = hi = off[0];
	for (int c = 1; c < classes; c++) {
		lo = off[c] < lo ? off[c] : lo;
		hi = off[c] > hi ? off[c] : hi;
	}
	log_info("trainer: logit offsets of this shard's label shares (logit_adjust %g):"
	    " %.2f to %.2f", cfg->logit_adjust, (double)lo, (double)hi);
out:
	free(off);
	return rc;
}

int
train_budget(const struct config *cfg, size_t train_n, size_t shard_n,
    struct train_budget *b, struct errbuf *err)
{
	uint64_t bs = (uint64_t)cfg->batch_size, shards = cfg->shard_count ? cfg->shard_count : 1;

	if (shard_n < bs)
		return errbuf_set(err, -EINVAL,
		    "batch_size: %" PRIu64 " exceeds the %zu samples of this peer's shard", bs,
		    shard_n);
	b->job_steps_per_epoch = (uint64_t)train_n / shards / bs;
	if (b->job_steps_per_epoch == 0)
		return errbuf_set(err, -EINVAL, "batch_size: %" PRIu64 " exceeds the %zu "
		    "samples of the training set over %" PRIu64 " shards", bs, train_n, shards);
	b->shard_steps_per_pass = (uint64_t)shard_n / bs;
	b->total_steps = (uint64_t)cfg->epochs * b->job_steps_per_epoch;
	if (cfg->max_steps > 0 && cfg->max_steps < b->total_steps)
		b->total_steps = cfg->max_steps;
	return 0;
}

int
train_new(const struct config *cfg, struct model *m, struct data_set *train,
    struct data_set *test, size_t *idx, size_t n, const struct train_hooks *hooks,
    struct train **out, struct errbuf *err)
{
	size_t bs = (size_t)cfg->batch_size;
	struct train *t = xcalloc(1, sizeof(*t));
	int rc;

	pthread_mutex_init(&t->mu, NULL);
	t->train = *train;
	t->test = *test;
	t->idx = idx;
	t->n = n;
	memset(train, 0, sizeof(*train));
	memset(test, 0, sizeof(*test));
	if ((rc = train_budget(cfg, t->train.n, n, &t->b, err)) < 0)
		goto fail;
	t->cfg = cfg;
	t->m = m;
	t->order = malloc(n * sizeof(*t->order));
	t->xb = malloc(bs * t->train.dim * sizeof(*t->xb));
	t->yb = malloc(bs);
	if (t->order == NULL || t->xb == NULL || t->yb == NULL) {
		rc = errbuf_set(err, -ENOMEM, "out of memory for the trainer's buffers");
		goto fail;
	}
	if ((rc = train_set_logit_offset(cfg, m, &t->train, idx, n, err)) < 0)
		goto fail;
	t->hooks = *hooks;
	t->prog.state = TRAIN_TRAINING;
	t->prog.total_steps = t->b.total_steps;
	t->prog.shard_samples = n;
	t->prog.test_loss = -1;
	t->prog.accuracy = -1;
	*out = t;
	return 0;
fail:
	train_free(t);
	return rc;
}

static void
train_publish(struct train *t, void (*update)(struct train_progress *, const void *),
    const void *arg)
{
	pthread_mutex_lock(&t->mu);
	update(&t->prog, arg);
	pthread_mutex_unlock(&t->mu);
	if (t->hooks.notify != NULL)
		t->hooks.notify(t->hooks.arg);
}

/* The stream keeps its name "epoch": with iid shards a pass is an epoch,
 * and the orders stay those of the runs made before epochs were the job's. */
static void
train_shuffle_pass(struct train *t, uint64_t pass)
{
	struct rng r;

	memcpy(t->order, t->idx, t->n * sizeof(*t->order));
	rng_init(&r, t->cfg->seed, "epoch", t->cfg->shard_index, pass);
	rng_shuffle(&r, t->order, t->n);
	rng_clear(&r);
}

static void
train_gather_batch(struct train *t, uint64_t pos)
{
	size_t bs = (size_t)t->cfg->batch_size, dim = t->train.dim;

	for (size_t i = 0; i < bs; i++) {
		size_t k = t->order[pos * bs + i];

		memcpy(t->xb + i * dim, t->train.x + k * dim, dim * sizeof(float));
		t->yb[i] = t->train.y[k];
	}
}

struct train_eval_result {
	int rc;
	uint64_t step;
	double loss, accuracy;
};

static void
train_set_eval(struct train_progress *p, const void *arg)
{
	const struct train_eval_result *e = arg;

	p->test_loss = e->loss;
	p->accuracy = e->accuracy;
	p->eval_step = e->step;
}

/* full: the whole test set, whatever eval_samples says (final figures). */
static int
train_evaluate(struct train *t, uint64_t step, int full)
{
	struct train_eval_result e = { 0, step, 0, 0 };
	size_t n = t->test.n;

	if (!full && t->cfg->eval_samples > 0 && t->cfg->eval_samples < n)
		n = t->cfg->eval_samples;
	e.rc = model_evaluate(t->m, t->test.x, t->test.y, n, &e.loss, &e.accuracy);
	if (e.rc < 0)
		return e.rc;
	log_info("step %llu epoch %llu: test loss %.4f accuracy %.4f",
	    (unsigned long long)step, (unsigned long long)(step / t->b.job_steps_per_epoch),
	    e.loss, e.accuracy);
	train_publish(t, train_set_eval, &e);
	return 0;
}

struct train_ckpt_result {
	int rc;
	uint64_t ticket;
	char msg[256];
};

static void
train_set_ckpt(struct train_progress *p, const void *arg)
{
	const struct train_ckpt_result *c = arg;

	p->ckpt_rc = c->rc;
	if (c->ticket > p->ckpt_done)
		p->ckpt_done = c->ticket;
	snprintf(p->ckpt_msg, sizeof(p->ckpt_msg), "%s", c->msg);
}

/* Snapshot and save; the result goes to progress under `ticket`. */
static int
train_checkpoint(struct train *t, uint64_t step, uint64_t ticket)
{
	struct train_ckpt_result res = { 0, ticket, "" };
	struct ckpt_state st;
	struct errbuf err = { "" };

	if (t->cfg->checkpoint_dir == NULL) {
		res.rc = -ENOENT;
		snprintf(res.msg, sizeof(res.msg), "no checkpoint_dir configured");
		goto out;
	}
	memset(&st, 0, sizeof(st));
	st.spec = t->m->spec;
	st.d = t->m->d;
	st.step = step;
	st.epoch = (uint32_t)(step / t->b.job_steps_per_epoch);
	st.seed = t->cfg->seed;
	st.x = malloc(st.d * sizeof(float));
	st.v = malloc(st.d * sizeof(float));
	if (st.x == NULL || st.v == NULL) {
		res.rc = -ENOMEM;
		snprintf(res.msg, sizeof(res.msg), "out of memory for a checkpoint");
	} else if ((res.rc = model_snapshot(t->m, st.x, st.v)) < 0) {
		snprintf(res.msg, sizeof(res.msg), "model snapshot failed: %s", strerror(-res.rc));
	} else {
		res.rc = ckpt_save(t->cfg->checkpoint_dir, &st, t->cfg->checkpoint_keep,
		    res.msg, sizeof(res.msg), &err);
		if (res.rc < 0)
			snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		else
			log_info("checkpoint %s", res.msg);
	}
	free(st.x);
	free(st.v);
	if (res.rc < 0)
		log_error("checkpoint at step %llu failed: %s", (unsigned long long)step, res.msg);
out:
	train_publish(t, train_set_ckpt, &res);
	return res.rc;
}

struct train_step_result {
	uint64_t step, epoch;
	double lr, loss, sps, elapsed;
	int first;
};

static void
train_set_step(struct train_progress *p, const void *arg)
{
	const struct train_step_result *s = arg;

	p->step = s->step;
	p->epoch = (uint32_t)s->epoch;
	p->lr = s->lr;
	p->loss = s->first ? s->loss : p->loss + TRAIN_LOSS_ALPHA * (s->loss - p->loss);
	p->samples_per_s = s->sps;
	p->elapsed = s->elapsed;
}

static void
train_set_state(struct train_progress *p, const void *arg)
{
	p->state = *(const enum train_state *)arg;
}

static void
train_fail(struct train *t, const char *what, int rc)
{
	enum train_state st = TRAIN_FAILED;

	pthread_mutex_lock(&t->mu);
	snprintf(t->prog.error, sizeof(t->prog.error), "%s: %s", what, strerror(-rc));
	pthread_mutex_unlock(&t->mu);
	log_error("trainer: %s: %s", what, strerror(-rc));
	train_publish(t, train_set_state, &st);
}

/*
 * The trainer is CPU-bound; the loop thread is latency-bound, and every
 * exchange waits for a partner's loop to wake up. Where peers share cores,
 * a trainer at equal priority kept that wake-up waiting ~10 ms; at nice
 * +5 an exchange took 0.8 ms instead of 11.5 ms (2 peers on 2 cores). The
 * nice value is per thread on Linux, so only the trainer yields.
 */
static void
train_lower_priority(const struct config *cfg)
{
	if (cfg->trainer_nice > 0 &&
	    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), cfg->trainer_nice) < 0)
		log_warn("trainer: cannot set nice %d: %s", cfg->trainer_nice, strerror(errno));
}

/*
 * With max_step_rate the trainer waits for each step's slot: peers that
 * share a node with other work (or dozens of peers on a test host's few
 * cores) then leave the CPU to it rather than starve every event loop.
 * The wait comes in short sleeps so that a stop is seen at once.
 */
static void
train_pace(struct train *t, double *slot)
{
	double now = util_now();

	if (t->cfg->max_step_rate <= 0)
		return;
	while (now < *slot && !atomic_load(&t->stop)) {
		double wait = fmin(*slot - now, 0.05);
		struct timespec ts = { 0, (long)(wait * 1e9) };

		nanosleep(&ts, NULL);
		now = util_now();
	}
	*slot = fmax(*slot, now) + 1.0 / t->cfg->max_step_rate;
}

static void *
train_main(void *arg)
{
	struct train *t = arg;
	const struct config *cfg = t->cfg;
	struct sgd_hparams h = { 0, (float)cfg->momentum, (float)cfg->weight_decay };
	const struct train_budget *b = &t->b;
	uint64_t step = t->start_step, shuffled_pass = UINT64_MAX, ckpt_ticket_done = 0;
	uint64_t window_step = step, last_ckpt = UINT64_MAX, from = step, to;
	double t0 = util_now(), window_t = t0, last_notify = 0, sps = 0, slot = t0;
	enum train_state st;
	int first = 1, rc;

	train_lower_priority(cfg);
	/* Show at once what a resumed or pulled model is worth. */
	if (step > 0 && step < b->total_steps) {
		if ((rc = train_evaluate(t, step, 0)) < 0) {
			train_fail(t, "evaluation", rc);
			return NULL;
		}
	}
	while (step < b->total_steps && !atomic_load(&t->stop)) {
		uint64_t pass = step / b->shard_steps_per_pass, pos = step % b->shard_steps_per_pass;
		uint64_t ticket = atomic_load(&t->ckpt_requested);
		struct train_step_result sr;
		float loss;
		double now;

		if (pass != shuffled_pass) {
			train_shuffle_pass(t, pass);
			shuffled_pass = pass;
		}
		train_pace(t, &slot);
		train_gather_batch(t, pos);
		h.lr = (float)train_lr_at(cfg, step, b->job_steps_per_epoch, b->total_steps);
		rc = model_train_step(t->m, t->xb, t->yb, cfg->batch_size, &h, &loss);
		if (rc < 0) {
			train_fail(t, "training step", rc);
			return NULL;
		}
		if (!isfinite(loss)) {
			train_fail(t, "training diverged (loss is not finite; lower lr)", -EDOM);
			return NULL;
		}
		step++;
		now = util_now();
		if (now - window_t >= 1.0) {
			sps = (double)(step - window_step) * cfg->batch_size / (now - window_t);
			window_t = now;
			window_step = step;
		} else if (sps == 0 && now > t0) {
			sps = (double)(step - from) * cfg->batch_size / (now - t0);
		}
		sr = (struct train_step_result){ step, step / b->job_steps_per_epoch, h.lr, loss,
		    sps, now - t0, first };
		first = 0;
		pthread_mutex_lock(&t->mu);
		train_set_step(&t->prog, &sr);
		pthread_mutex_unlock(&t->mu);
		if (t->hooks.step != NULL)
			t->hooks.step(t->hooks.arg, step);
		if (t->hooks.notify != NULL && now - last_notify >= TRAIN_NOTIFY_INTERVAL) {
			last_notify = now;
			t->hooks.notify(t->hooks.arg);
		}

		if ((cfg->eval_every > 0 && step % (uint64_t)cfg->eval_every == 0) ||
		    (cfg->eval_every == 0 && step % b->job_steps_per_epoch == 0)) {
			if ((rc = train_evaluate(t, step, 0)) < 0) {
				train_fail(t, "evaluation", rc);
				return NULL;
			}
		}
		if (ticket > ckpt_ticket_done ||
		    (cfg->checkpoint_dir != NULL &&
		    ((cfg->checkpoint_every > 0 && step % (uint64_t)cfg->checkpoint_every == 0) ||
		    (cfg->checkpoint_every == 0 && step % b->job_steps_per_epoch == 0)))) {
			train_checkpoint(t, step, ticket);
			ckpt_ticket_done = ticket;
			last_ckpt = step;
		}
		if ((to = atomic_exchange(&t->catch_up, 0)) > step) {
			/* The skipped steps' samples go with them: the sample
			 * order follows the step (top of this file). */
			window_step += to - step;
			from += to - step;
			step = to;
		}
	}

	if (atomic_load(&t->stop)) {
		st = TRAIN_LEAVING;
		train_publish(t, train_set_state, &st);
	}
	if ((rc = train_evaluate(t, step, 1)) < 0) {
		train_fail(t, "evaluation", rc);
		return NULL;
	}
	/* The final checkpoint also answers any request still pending. */
	if ((cfg->checkpoint_dir != NULL && last_ckpt != step) ||
	    atomic_load(&t->ckpt_requested) > ckpt_ticket_done)
		train_checkpoint(t, step, atomic_load(&t->ckpt_requested));
	st = TRAIN_DONE;
	train_publish(t, train_set_state, &st);
	return NULL;
}

/* The trainer's side of trainer.h. */
static int
train_op_load(void *impl, const struct ckpt_state *st, struct errbuf *err)
{
	struct train *t = impl;
	char want[128], have[128];
	int rc;

	if (st->spec.nlayers == 0)
		return errbuf_set(err, -EINVAL, "it holds an external trainer's vector, and "
		    "this peer's trainer is builtin");
	if (!model_spec_equal(&st->spec, &t->m->spec)) {
		model_spec_format(&st->spec, have, sizeof(have));
		model_spec_format(&t->m->spec, want, sizeof(want));
		return errbuf_set(err, -EINVAL, "it holds model %s, not %s", have, want);
	}
	if ((rc = model_restore(t->m, st->x, st->v)) < 0)
		return errbuf_set(err, rc, "cannot load its parameters: %s", strerror(-rc));
	return 0;
}

static int
train_op_start(void *impl, uint64_t step, int fresh, char *what, size_t n, struct errbuf *err)
{
	struct train *t = impl;
	int rc;

	/* Fresh or not, the model is in place: every peer builds the same
	 * one from the job's seed. */
	(void)fresh;
	t->start_step = step;
	t->prog.step = step;
	t->prog.epoch = (uint32_t)(step / t->b.job_steps_per_epoch);
	if ((rc = pthread_create(&t->thread, NULL, train_main, t)) != 0)
		return errbuf_set(err, -rc, "cannot start the trainer thread: %s", strerror(rc));
	t->started = t->launched = 1;
	snprintf(what, n, "training %s on %s from step %" PRIu64, t->cfg->job, t->cfg->device,
	    step);
	return 0;
}

static int
train_op_active(void *impl)
{
	struct train *t = impl;

	return t->launched;
}

static void
train_op_progress(void *impl, struct train_progress *p)
{
	struct train *t = impl;

	pthread_mutex_lock(&t->mu);
	*p = t->prog;
	pthread_mutex_unlock(&t->mu);
}

static const char *
train_op_no_model(void *impl)
{
	struct train *t = impl;

	return t->launched ? NULL : "peer is still joining: no model to save yet";
}

static uint64_t
train_op_checkpoint(void *impl)
{
	struct train *t = impl;

	return atomic_fetch_add(&t->ckpt_requested, 1) + 1;
}

static int
train_op_stop(void *impl)
{
	struct train *t = impl;

	if (!t->launched)
		return -ENOENT;
	atomic_store(&t->stop, true);
	return 0;
}

static void
train_op_catch_up(void *impl, uint64_t step)
{
	struct train *t = impl;

	atomic_store(&t->catch_up, step < t->b.total_steps ? step : t->b.total_steps);
}

static int
train_op_refresh_final(void *impl)
{
	struct train *t = impl;
	uint64_t step;
	int rc = 0, erc;

	pthread_mutex_lock(&t->mu);
	step = t->prog.step;
	pthread_mutex_unlock(&t->mu);
	/* ticket 0: no control client waits on this one */
	if (t->cfg->checkpoint_dir != NULL)
		rc = train_checkpoint(t, step, 0);
	if ((erc = train_evaluate(t, step, 1)) < 0) {
		log_error("evaluation at step %llu failed: %s", (unsigned long long)step,
		    strerror(-erc));
		if (rc == 0)
			rc = erc;
	}
	return rc;
}

/* Waits for the thread, which stops after its current step (and final
 * checkpoint). */
static void
train_join(struct train *t)
{
	atomic_store(&t->stop, true);
	if (t->started) {
		pthread_join(t->thread, NULL);
		t->started = 0;
	}
}

static void
train_op_close(void *impl)
{
	train_join(impl);
}

static void
train_op_free(void *impl)
{
	train_free(impl);
}

const struct trainer_ops train_ops = {
	.name = "builtin",
	.load = train_op_load,
	.start = train_op_start,
	.active = train_op_active,
	.present = train_op_active,
	.progress = train_op_progress,
	.no_model = train_op_no_model,
	.checkpoint = train_op_checkpoint,
	.stop = train_op_stop,
	.refresh_final = train_op_refresh_final,
	.catch_up = train_op_catch_up,
	.close = train_op_close,
	.free = train_op_free,
};

void
train_free(struct train *t)
{
	if (t == NULL)
		return;
	train_join(t);
	pthread_mutex_destroy(&t->mu);
	free(t->idx);
	data_free(&t->train);
	data_free(&t->test);
	free(t->order);
	free(t->xb);
	free(t->yb);
	free(t);
}
