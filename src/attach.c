/*
 * attach: see attach.h; the protocol is gossipd-attach(7).
 *
 * Who owns the vector when: the process, from an attach or step reply
 * until its next step request (the model is held: mixes queue); the
 * daemon otherwise (no process, a step reply held back by pace, a process
 * that detached). Mixes are therefore written only while the process
 * waits, and the reply's "mixed" counts every mix applied since the
 * previous reply, queued or not, so a process that stages the vector to a
 * GPU knows whether to copy it back.
 *
 * An evaluation (gossipd-attach(7), "evaluate") puts the job's model in
 * the vector, in a mode whose members share one, and keeps the process's
 * own here until "train" puts it back: what a loop evaluates is then
 * what the job learnt, as under DDP, not its own last few steps, and
 * its training goes on from where it was. Mixes that land meanwhile
 * queue as at any time the process holds the vector; as increments they
 * apply as well to the own model put back. A process that steps without
 * "train" trained on the job's model: its own is let go.
 *
 * Checkpoints copy the vector at a boundary (or whenever the daemon owns
 * it) and write the copy on libuv's thread pool, so the loop never waits
 * for a disk; one write at a time, and requests made meanwhile are served
 * by the next one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include <sodium.h>

#include "attach.h"
#include "attach_report.h"
#include "ckpt.h"
#include "gossip_mode.h"
#include "log.h"

#define ATTACH_VERSION 1
#define ATTACH_MAX_PARAMS 2147483647.0

enum attach_state { ATTACH_WAITING, ATTACH_ATTACHED, ATTACH_DETACHED };

static const char *const attach_state_names[] = {
	[ATTACH_WAITING] = "waiting", [ATTACH_ATTACHED] = "attached",
	[ATTACH_DETACHED] = "detached",
};

struct attach {
	const struct config *cfg;
	struct model *m;
	struct control *ctl;
	struct attach_hooks h;
	uv_timer_t stop_timer;
	uv_timer_t ckpt_timer;    /* a checkpoint's wait for a boundary */
	uv_work_t work;

	int fd;                   /* the memfd; -1 until the first attach */
	float *mem;
	size_t d;
	int has_model;            /* the vector holds the job's model */
	int pulling;              /* a joiner's pull fills it first */

	enum attach_state state;
	uint64_t client;          /* the attached connection */
	uint64_t waiting;         /* an attach answered after the pull */
	int pid;
	char name[64];
	int holding;              /* a step reply waits for pace */
	double held_since;        /* when pace began to hold it; 0: not held */
	uint64_t mixes_told;      /* model_mixes at the last reply */
	double last_boundary;
	double last_news;         /* last progress notification of a step */
	int stall_logged;
	int optimizer;            /* enum optimizer_kind it named; auto: none yet */
	float *own;               /* the process's model while it evaluates the job's */
	int evaluating;           /* own holds it */

	struct train_progress p;  /* as the process reports it */
	double started;
	struct attach_report_rate rate;

	uint64_t ckpt_asked;      /* tickets handed out */
	uint64_t ckpt_taken;      /* tickets the running or last write serves */
	uint64_t ckpt_last_step;  /* step of the last periodic checkpoint */
	int writing;
	struct ckpt_state snap;
	int snap_rc;
	char snap_msg[256];

	int stop;                 /* leave asked */
	int stop_written;         /* the final checkpoint is taken */
	int closing;
};

static void attach_checkpoint(struct attach *a);

/* Progress worth showing, at most 4 times a second as the built-in
 * trainer's (a process may take hundreds of steps a second). */
#define ATTACH_NEWS_S 0.25

/* Not once closing: the daemon's wake-up handle is closed too. */
static void
attach_notify(struct attach *a)
{
	if (!a->closing)
		a->h.notify(a->h.arg);
}

/* The process owns the vector: no process, or one that waits for a reply. */
static int
attach_ours(const struct attach *a)
{
	return a->state != ATTACH_ATTACHED || a->holding;
}

static void
attach_ckpt_work(uv_work_t *w)
{
	struct attach *a = w->data;
	struct errbuf err = { "" };

	a->snap_rc = ckpt_save(a->cfg->checkpoint_dir, &a->snap, a->cfg->checkpoint_keep,
	    a->snap_msg, sizeof(a->snap_msg), &err);
	if (a->snap_rc < 0)
		snprintf(a->snap_msg, sizeof(a->snap_msg), "%s", err.msg);
}

/* The DONE state once a leave's final checkpoint is through. */
static void
attach_maybe_done(struct attach *a)
{
	if (a->stop && a->stop_written && !a->writing && a->ckpt_taken >= a->ckpt_asked &&
	    a->p.state != TRAIN_DONE) {
		a->p.state = TRAIN_DONE;
		uv_timer_stop(&a->stop_timer);
		attach_notify(a);
	}
}

static void
attach_ckpt_done(uv_work_t *w, int status)
{
	struct attach *a = w->data;

	a->writing = 0;
	a->p.ckpt_done = a->ckpt_taken;
	a->p.ckpt_rc = status < 0 ? status : a->snap_rc;
	snprintf(a->p.ckpt_msg, sizeof(a->p.ckpt_msg), "%s",
	    status < 0 ? uv_strerror(status) : a->snap_msg);
	if (a->p.ckpt_rc < 0)
		log_error("checkpoint failed: %s", a->p.ckpt_msg);
	else
		log_info("checkpoint written: %s", a->p.ckpt_msg);
	/* Requests made while it was written wait for another boundary,
	 * or go now if the vector is ours. */
	if (a->ckpt_asked > a->ckpt_taken && attach_ours(a) && !a->closing)
		attach_checkpoint(a);
	attach_maybe_done(a);
	attach_notify(a);
}

/* Copy the vector now (the caller made sure it may) and write the copy. */
static void
attach_checkpoint(struct attach *a)
{
	int rc;

	if (a->writing || a->closing)
		return;
	uv_timer_stop(&a->ckpt_timer);
	/* A vector that does not hold the job's model yet (zeros, or a pull
	 * under way) must never become a checkpoint --resume would load. */
	if (a->cfg->checkpoint_dir == NULL || !a->has_model) {
		a->ckpt_taken = a->p.ckpt_done = a->ckpt_asked;
		a->p.ckpt_rc = -ENOENT;
		snprintf(a->p.ckpt_msg, sizeof(a->p.ckpt_msg), "%s", !a->has_model ?
		    "no model yet: no process has attached and stepped" : "no checkpoint_dir set");
		attach_maybe_done(a);
		attach_notify(a);
		return;
	}
	if (a->snap.x == NULL) {
		a->snap.x = xcalloc(a->d, sizeof(float));
		a->snap.v = xcalloc(a->d, sizeof(float));
	}
	if ((rc = model_snapshot(a->m, a->snap.x, NULL)) < 0) {
		a->ckpt_taken = a->p.ckpt_done = a->ckpt_asked;
		a->p.ckpt_rc = rc;
		snprintf(a->p.ckpt_msg, sizeof(a->p.ckpt_msg), "snapshot: %s", strerror(-rc));
		attach_notify(a);
		return;
	}
	a->snap.d = a->d;
	a->snap.step = a->p.step;
	a->snap.epoch = a->p.epoch;
	a->snap.seed = a->cfg->seed;
	a->ckpt_taken = a->ckpt_asked;
	a->writing = 1;
	a->work.data = a;
	if ((rc = uv_queue_work(uv_handle_get_loop((uv_handle_t *)&a->stop_timer), &a->work,
	    attach_ckpt_work, attach_ckpt_done)) < 0) {
		a->writing = 0;
		a->p.ckpt_done = a->ckpt_taken;
		a->p.ckpt_rc = rc;
		snprintf(a->p.ckpt_msg, sizeof(a->p.ckpt_msg), "%s", uv_strerror(rc));
		attach_notify(a);
	}
}

int
attach_new(const struct config *cfg, struct model *m, struct control *ctl,
    uv_loop_t *loop, const struct attach_hooks *hooks, struct attach **out,
    struct errbuf *err)
{
	struct attach *a = xcalloc(1, sizeof(*a));

	(void)err;
	a->cfg = cfg;
	a->m = m;
	a->ctl = ctl;
	a->h = *hooks;
	a->fd = -1;
	a->p.state = TRAIN_TRAINING;
	a->p.loss = a->p.test_loss = a->p.accuracy = -1;
	a->started = util_now();
	uv_timer_init(loop, &a->stop_timer);
	a->stop_timer.data = a;
	uv_timer_init(loop, &a->ckpt_timer);
	a->ckpt_timer.data = a;
	*out = a;
	return 0;
}

static void
attach_close(void *impl)
{
	struct attach *a = impl;

	if (a == NULL || a->closing)
		return;
	a->closing = 1;
	uv_close((uv_handle_t *)&a->stop_timer, NULL);
	uv_close((uv_handle_t *)&a->ckpt_timer, NULL);
}

static void
attach_free(void *impl)
{
	struct attach *a = impl;

	if (a == NULL)
		return;
	if (a->mem != NULL)
		munmap(a->mem, a->d * sizeof(float));
	if (a->fd >= 0)
		close(a->fd);
	ckpt_state_free(&a->snap);
	free(a->own);
	free(a);
}

/* The sealed vector of d zeros, mapped, and the model bound to it. */
static int
attach_create(struct attach *a, size_t d, struct errbuf *err)
{
	size_t bytes = d * sizeof(float);
	void *mem;
	int fd;

	fd = memfd_create("gossipd-params", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errbuf_set(err, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int e = errno;

		close(fd);
		return errbuf_set(err, -e, "shared memory of %zu bytes: %s", bytes, strerror(e));
	}
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		int e = errno;

		close(fd);
		return errbuf_set(err, -e, "mmap of %zu bytes: %s", bytes, strerror(e));
	}
	a->fd = fd;
	a->mem = mem;
	a->d = d;
	model_share(a->m, a->mem, d);
	return 0;
}

static int
attach_load(struct attach *a, const float *x, size_t d, uint64_t step, struct errbuf *err)
{
	int rc;

	if ((rc = attach_create(a, d, err)) < 0)
		return rc;
	memcpy(a->mem, x, d * sizeof(float));
	a->has_model = 1;
	a->p.step = a->ckpt_last_step = step;
	a->h.ready(a->h.arg);
	return 0;
}

static json_t *
attach_reply(struct attach *a)
{
	return json_pack("{s:b, s:i, s:I, s:s, s:I, s:I, s:b}", "ok", 1,
	    "version", ATTACH_VERSION, "params", (json_int_t)a->d, "dtype", "float32",
	    "bytes", (json_int_t)(a->d * sizeof(float)), "step", (json_int_t)a->p.step,
	    "fresh", !a->has_model);
}

/* Hand the vector to client: from here until its first step request the
 * process owns it. */
static void
attach_grant(struct attach *a, uint64_t client)
{
	int fresh = !a->has_model, rc;

	a->client = client;
	a->state = ATTACH_ATTACHED;
	a->holding = 0;
	a->last_boundary = util_now();
	a->stall_logged = 0;
	a->mixes_told = model_mixes(a->m);
	model_hold(a->m);
	control_pin(a->ctl, client, 1);
	if ((rc = control_reply_fd(a->ctl, client, attach_reply(a), a->fd)) < 0) {
		control_pin(a->ctl, client, 0);
		a->client = 0;
		a->state = ATTACH_DETACHED;
		model_release(a->m);
		control_reply(a->ctl, client, control_error("cannot pass the shared memory: %s",
		    strerror(-rc)));
		return;
	}
	log_info("trainer attached: pid %d%s%s, %zu parameters, %s at step %" PRIu64, a->pid,
	    a->name[0] ? " " : "", a->name, a->d, fresh ? "fresh" : "holding the job's model",
	    a->p.step);
	attach_notify(a);
}

/* Why an attach request cannot be served; NULL if it can. */
static json_t *
attach_refusal(struct attach *a, json_t *req, size_t *d)
{
	json_t *v = json_object_get(req, "version"), *n = json_object_get(req, "params");
	const char *dtype = json_string_value(json_object_get(req, "dtype"));
	const struct gossip_mode_row *row = gossip_mode_row(a->cfg->mode);
	struct errbuf why = { "" };
	double x;

	if (a->stop)
		return control_error("the peer is leaving");
	if (a->state == ATTACH_ATTACHED || a->waiting != 0)
		return control_error("another training process is attached (pid %d)", a->pid);
	if (!json_is_integer(v) || json_integer_value(v) != ATTACH_VERSION)
		return control_error("version: this gossipd speaks attach version %d",
		    ATTACH_VERSION);
	if (dtype == NULL || strcmp(dtype, "float32") != 0)
		return control_error("dtype: only \"float32\" is supported");
	x = json_is_integer(n) ? (double)json_integer_value(n) : -1;
	if (x < 1 || x > ATTACH_MAX_PARAMS)
		return control_error("params: want an integer from 1 to %.0f", ATTACH_MAX_PARAMS);
	*d = (size_t)x;
	if (a->d != 0 && *d != a->d)
		return control_error("params: %zu announced, but the job's model here has %zu",
		    *d, a->d);
	if (row->check != NULL &&
	    row->check(*d, a->cfg->density, (size_t)a->cfg->mask_block, &why) < 0)
		return control_error("density or mask_block do not fit %zu parameters: %s", *d,
		    why.msg);
	return NULL;
}

/* The request's optional "digest" of the process's starting model
 * (pull.h) into out; NULL, or the error to answer. */
static json_t *
attach_digest(json_t *req, uint8_t out[ATTACH_DIGEST_BYTES], int *has)
{
	json_t *v = json_object_get(req, "digest");
	const char *hex = json_string_value(v);
	size_t n = 0;

	*has = v != NULL;
	if (v == NULL)
		return NULL;
	if (hex == NULL || strlen(hex) != 2 * ATTACH_DIGEST_BYTES ||
	    sodium_hex2bin(out, ATTACH_DIGEST_BYTES, hex, strlen(hex), NULL, &n, NULL) != 0 ||
	    n != ATTACH_DIGEST_BYTES)
		return control_error("digest: want %d hex digits, the BLAKE2b-256 of the "
		    "initial parameters as float32", 2 * ATTACH_DIGEST_BYTES);
	return NULL;
}

static int
attach_on_attach(struct attach *a, uint64_t client, json_t *req, json_t **reply)
{
	const char *name = json_string_value(json_object_get(req, "name"));
	uint8_t digest[ATTACH_DIGEST_BYTES];
	struct errbuf err = { "" };
	size_t d = 0;
	int has_digest;

	if ((*reply = attach_refusal(a, req, &d)) != NULL ||
	    (*reply = attach_digest(req, digest, &has_digest)) != NULL)
		return CONTROL_REPLIED;
	if (a->fd < 0) {
		if (attach_create(a, d, &err) < 0) {
			*reply = control_error("%s", err.msg);
			return CONTROL_REPLIED;
		}
		a->pulling = a->h.bound(a->h.arg, d, has_digest ? digest : NULL);
	}
	a->pid = control_peer_pid(a->ctl, client);
	snprintf(a->name, sizeof(a->name), "%s", name ? name : "");
	util_utf8_fix(a->name);
	if (a->pulling) {
		log_info("trainer pid %d waits for the job's model from the members", a->pid);
		a->waiting = client;
		control_pin(a->ctl, client, 1);
		return CONTROL_DEFERRED;
	}
	attach_grant(a, client);
	return CONTROL_DEFERRED;
}

static void
attach_start(struct attach *a, uint64_t step)
{
	uint64_t client = a->waiting;

	a->pulling = 0;
	a->has_model = 1;
	a->p.step = a->ckpt_last_step = step;
	a->h.ready(a->h.arg);
	if (client != 0) {
		a->waiting = 0;
		attach_grant(a, client);
	}
}

/* A start agreement chose this peer's own model: the process waiting (or
 * the next to attach) is answered fresh and brings its values. */
static void
attach_start_own(struct attach *a)
{
	uint64_t client = a->waiting;

	a->pulling = 0;
	if (client != 0) {
		a->waiting = 0;
		attach_grant(a, client);
	}
}

/* The boundary's reply; the process owns the vector again. */
static void
attach_answer_step(struct attach *a)
{
	uint64_t mixes = model_mixes(a->m), stop = a->stop;
	json_t *r;

	a->holding = 0;
	if (a->held_since > 0) {
		a->h.waited(a->h.arg, util_now() - a->held_since);
		a->held_since = 0;
	}
	r = json_pack("{s:b, s:I, s:I, s:b}", "ok", 1, "step", (json_int_t)a->p.step,
	    "mixed", (json_int_t)(mixes - a->mixes_told), "stop", (int)stop);
	a->mixes_told = mixes;
	/* After stop the vector stays ours: the final checkpoint has it. */
	if (!stop)
		model_hold(a->m);
	control_reply(a->ctl, a->client, r);
}

/* A leave's final checkpoint, at a boundary or when the vector is ours. */
static void
attach_final(struct attach *a)
{
	if (a->stop_written)
		return;
	a->stop_written = 1;
	a->ckpt_asked++;
	attach_checkpoint(a);
	attach_maybe_done(a);
}

/* The process named the ranges w[0..n) to go whole in every share. */
static void
attach_set_whole(struct attach *a, const struct model_range *w, size_t n)
{
	struct errbuf err = { "" };
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += w[i].len;
	if (a->h.whole(a->h.arg, w, n, a->d, &err) < 0)
		log_warn("whole: %s", err.msg);
	else if (n > 0 && gossip_mode_row(a->cfg->mode)->shares)
		log_info("share: %zu of the %zu values (%zu ranges) go whole in every share",
		    total, a->d, n);
}

static int
attach_on_step(struct attach *a, uint64_t client, json_t *req, json_t **reply)
{
	double now = util_now();
	struct model_range *whole;
	size_t nwhole;
	uint64_t n;
	int rc, kind;

	if (a->state != ATTACH_ATTACHED || client != a->client) {
		*reply = control_error("not attached on this connection (send attach first)");
		return CONTROL_REPLIED;
	}
	if (a->holding) {
		*reply = control_error("step: the previous step has not been answered yet");
		return CONTROL_REPLIED;
	}
	if ((*reply = attach_report_refusal(req, &a->p)) != NULL ||
	    (*reply = attach_report_whole(req, a->d, &whole, &nwhole)) != NULL)
		return CONTROL_REPLIED;
	if (whole != NULL)
		attach_set_whole(a, whole, nwhole);
	free(whole);
	n = (uint64_t)json_integer_value(json_object_get(req, "step"));
	a->evaluating = 0;
	if ((rc = model_release(a->m)) < 0)
		log_error("applying queued mixes: %s", strerror(-rc));
	a->holding = 1;
	a->p.step = n;
	a->last_boundary = now;
	if (a->stall_logged) {
		log_info("trainer pid %d reached a step boundary again", a->pid);
		a->stall_logged = 0;
	}
	attach_report_take(req, &a->p, &a->rate, now);
	if ((kind = attach_report_optimizer(req)) >= 0 && kind != a->optimizer) {
		a->optimizer = kind;
		a->h.optimizer(a->h.arg, kind);
	}
	if (!a->has_model) {
		a->has_model = 1;
		a->h.ready(a->h.arg);
	}
	if (a->stop) {
		attach_final(a);
		attach_answer_step(a);
		return CONTROL_DEFERRED;
	}
	if (a->cfg->checkpoint_every > 0 &&
	    n / (uint64_t)a->cfg->checkpoint_every >
	    a->ckpt_last_step / (uint64_t)a->cfg->checkpoint_every) {
		a->ckpt_last_step = n;
		a->ckpt_asked++;
	}
	if (a->ckpt_asked > a->ckpt_taken)
		attach_checkpoint(a);
	a->h.step(a->h.arg, n);
	if (now - a->last_news >= ATTACH_NEWS_S) {
		a->last_news = now;
		attach_notify(a);
	}
	/* The step hook may have started a round that pace holds us for. */
	if (a->state == ATTACH_ATTACHED && a->holding) {
		if (!a->h.held(a->h.arg, n))
			attach_answer_step(a);
		else
			a->held_since = now;
	}
	return CONTROL_DEFERRED;
}

static void
attach_resume(void *impl)
{
	struct attach *a = impl;

	if ( a->state != ATTACH_ATTACHED || !a->holding)
		return;
	if (a->stop || !a->h.held(a->h.arg, a->p.step))
		attach_answer_step(a);
}

/* The process let go of the vector: it is ours, mixes land at once. */
static void
attach_let_go(struct attach *a, const char *how)
{
	int rc;

	control_pin(a->ctl, a->client, 0);
	a->client = 0;
	a->state = ATTACH_DETACHED;
	a->holding = 0;
	a->evaluating = 0;
	a->held_since = 0;
	if ((rc = model_release(a->m)) < 0)
		log_error("applying queued mixes: %s", strerror(-rc));
	log_info("trainer pid %d %s at step %" PRIu64 "; serving its last parameters", a->pid,
	    how, a->p.step);
	if (a->ckpt_asked > a->ckpt_taken)
		attach_checkpoint(a);
	if (a->stop)
		attach_final(a);
	attach_notify(a);
}

/* Why the process may not hand the vector over now; NULL: it may. */
static const char *
attach_cannot_hand(const struct attach *a, uint64_t client)
{
	if (a->state != ATTACH_ATTACHED || client != a->client)
		return "not attached on this connection (send attach first)";
	if (a->holding)
		return "the previous step has not been answered yet";
	if (!a->has_model)
		return "no model yet: send the first step first";
	return NULL;
}

/* The job's model in the vector for an evaluation, the process's own
 * kept (see the top); "job_model" false where there is none (another
 * mode, no model yet, closing) and the vector is as it was. */
static int
attach_on_evaluate(struct attach *a, uint64_t client, json_t *req, json_t **reply)
{
	const char *why = attach_cannot_hand(a, client);
	uint64_t mixes;
	int rc;

	(void)req;
	if (why != NULL) {
		*reply = control_error("evaluate: %s", why);
		return CONTROL_REPLIED;
	}
	if (!a->evaluating && a->h.job_model(a->h.arg, NULL, a->d) == 0) {
		if (a->own == NULL)
			a->own = xcalloc(a->d, sizeof(float));
		/* What landed since the boundary goes into the own model first:
		 * the job's model has it already. */
		if ((rc = model_release(a->m)) < 0)
			log_error("applying queued mixes: %s", strerror(-rc));
		memcpy(a->own, a->mem, a->d * sizeof(float));
		a->evaluating = a->h.job_model(a->h.arg, a->mem, a->d) == 0;
		model_hold(a->m);
	}
	mixes = model_mixes(a->m);
	*reply = json_pack("{s:b, s:b, s:I}", "ok", 1, "job_model", a->evaluating, "mixed",
	    (json_int_t)(mixes - a->mixes_told));
	a->mixes_told = mixes;
	return CONTROL_REPLIED;
}

/* The process's own model back after an evaluation ("restored" false
 * when none was kept: no evaluate, or a step since). */
static int
attach_on_train(struct attach *a, uint64_t client, json_t *req, json_t **reply)
{
	const char *why = attach_cannot_hand(a, client);
	int restored = a->evaluating;

	(void)req;
	if (why != NULL) {
		*reply = control_error("train: %s", why);
		return CONTROL_REPLIED;
	}
	if (restored)
		memcpy(a->mem, a->own, a->d * sizeof(float));
	a->evaluating = 0;
	*reply = json_pack("{s:b, s:b}", "ok", 1, "restored", restored);
	return CONTROL_REPLIED;
}

static int
attach_on_detach(struct attach *a, uint64_t client, json_t *req, json_t **reply)
{
	(void)req;
	if (a->state != ATTACH_ATTACHED || client != a->client) {
		*reply = control_error("not attached on this connection");
		return CONTROL_REPLIED;
	}
	if (a->holding && !a->stop) {
		*reply = control_error("detach: the previous step has not been answered yet");
		return CONTROL_REPLIED;
	}
	attach_let_go(a, "detached");
	*reply = json_pack("{s:b}", "ok", 1);
	return CONTROL_REPLIED;
}

static void
attach_gone(void *impl, uint64_t client)
{
	struct attach *a = impl;

	if (client == a->waiting) {
		a->waiting = 0;
		control_pin(a->ctl, client, 0);
		log_info("trainer pid %d went away before the model was pulled", a->pid);
		control_reply(a->ctl, client, control_error("attach: the connection ended "
		    "before the model was pulled"));
		return;
	}
	if (a->state != ATTACH_ATTACHED || client != a->client)
		return;
	/* A step reply held back for pace has no one to go to now. */
	if (a->holding)
		control_reply(a->ctl, client, control_error("step: the connection ended; "
		    "detached"));
	attach_let_go(a, "went away (connection closed)");
}

static void
attach_stop_expired(uv_timer_t *t)
{
	struct attach *a = t->data;

	log_warn("leave: the training process reached no step boundary in %d s; leaving "
	    "without it%s", ATTACH_BOUNDARY_WAIT_MS / 1000, a->has_model ?
	    " (the final checkpoint takes its parameters as they are)" : "");
	attach_final(a);
}

static int
attach_request_stop(void *impl)
{
	struct attach *a = impl;

	if (a->stop)
		return 0;
	a->stop = 1;
	if (attach_ours(a)) {
		attach_final(a);
		if (a->holding)
			attach_answer_step(a);
		return 0;
	}
	uv_timer_start(&a->stop_timer, attach_stop_expired, ATTACH_BOUNDARY_WAIT_MS, 0);
	return 0;
}

/* The process kept the vector past the wait: the checkpoints asked fail
 * with the reason rather than wait for a boundary that may never come. A
 * write under way is let finish first (it serves earlier tickets). */
static void
attach_ckpt_expired(uv_timer_t *t)
{
	struct attach *a = t->data;

	if (a->ckpt_asked <= a->ckpt_taken || attach_ours(a))
		return;
	if (a->writing) {
		uv_timer_start(&a->ckpt_timer, attach_ckpt_expired, 1000, 0);
		return;
	}
	log_warn("checkpoint: the training process reached no step boundary in %d s",
	    ATTACH_BOUNDARY_WAIT_MS / 1000);
	a->ckpt_taken = a->p.ckpt_done = a->ckpt_asked;
	a->p.ckpt_rc = -ETIMEDOUT;
	snprintf(a->p.ckpt_msg, sizeof(a->p.ckpt_msg), "the training process (pid %d) "
	    "reached no step boundary in %d s; it holds the model", a->pid,
	    ATTACH_BOUNDARY_WAIT_MS / 1000);
	attach_notify(a);
}

static uint64_t
attach_request_checkpoint(void *impl)
{
	struct attach *a = impl;
	uint64_t ticket = ++a->ckpt_asked;

	if (attach_ours(a))
		attach_checkpoint(a);
	else if (!uv_is_active((uv_handle_t *)&a->ckpt_timer))
		uv_timer_start(&a->ckpt_timer, attach_ckpt_expired, ATTACH_BOUNDARY_WAIT_MS, 0);
	return ticket;
}

static int
attach_active(void *impl)
{
	(void)impl;
	return 1;
}

static int
attach_attached(void *impl)
{
	struct attach *a = impl;

	return a->state == ATTACH_ATTACHED;
}

static const char *
attach_no_model(void *impl)
{
	struct attach *a = impl;

	return a->has_model ? NULL : "no model yet: no training process has attached and stepped";
}

static void
attach_get_progress(void *impl, struct train_progress *p)
{
	struct attach *a = impl;
	double now = util_now();

	if (a->state == ATTACH_ATTACHED && !a->holding && !a->stall_logged &&
	    now - a->last_boundary > ATTACH_STALL_S) {
		log_warn("trainer pid %d stalled: no step boundary for %.0f s (mixes wait)",
		    a->pid, ATTACH_STALL_S);
		a->stall_logged = 1;
	}
	*p = a->p;
	p->elapsed = now - a->started;
}

static void
attach_status(void *impl, json_t *st)
{
	struct attach *a = impl;
	const char *state = attach_state_names[a->state];
	double idle = 0;

	if (a->state == ATTACH_ATTACHED) {
		idle = a->holding ? 0 : util_now() - a->last_boundary;
		if (idle > ATTACH_STALL_S)
			state = "stalled";
	}
	if (a->waiting != 0)
		state = "pulling";
	json_object_set_new(st, "attach", json_pack("{s:s, s:i, s:s, s:I, s:b, s:f}", "state",
	    state, "pid", a->state == ATTACH_WAITING && a->waiting == 0 ? 0 : a->pid, "name",
	    a->name, "params", (json_int_t)a->d, "holds_model", a->has_model, "idle_s", idle));
}

/* A checkpoint --resume found: the vector is created holding its values. */
static int
attach_op_load(void *impl, const struct ckpt_state *st, struct errbuf *err)
{
	if (st->spec.nlayers != 0)
		return errbuf_set(err, -EINVAL, "it holds a built-in model, and this peer's "
		    "trainer is external");
	return attach_load(impl, st->x, st->d, st->step, err);
}

/* A vector exists (resumed, or a pull filled it): it holds the job's
 * model at step. None yet, or a start agreement chose this peer's own
 * (fresh): the process attached or the next to attach brings it. */
static int
attach_op_start(void *impl, uint64_t step, int fresh, char *what, size_t n,
    struct errbuf *err)
{
	struct attach *a = impl;

	(void)err;
	if (a->fd < 0) {
		snprintf(what, n, "waits for its training process to attach");
		return 0;
	}
	if (fresh) {
		attach_start_own(a);
		snprintf(what, n, "starts the job from its training process's model");
		return 0;
	}
	attach_start(a, step);
	snprintf(what, n, "holds the job's model at step %" PRIu64 "; waits for its training "
	    "process to attach", step);
	return 0;
}

static const struct {
	const char *cmd;
	int (*fn)(struct attach *a, uint64_t client, json_t *req, json_t **reply);
} attach_commands[] = {
	{ "attach", attach_on_attach },
	{ "step", attach_on_step },
	{ "evaluate", attach_on_evaluate },
	{ "train", attach_on_train },
	{ "detach", attach_on_detach },
};

static int
attach_command(void *impl, uint64_t client, const char *cmd, json_t *req, json_t **reply)
{
	for (size_t i = 0; i < GD_ARRAY_SIZE(attach_commands); i++) {
		if (strcmp(cmd, attach_commands[i].cmd) == 0)
			return attach_commands[i].fn(impl, client, req, reply);
	}
	return -ENOENT;
}

const struct trainer_ops attach_ops = {
	.name = "external",
	.load = attach_op_load,
	.start = attach_op_start,
	.active = attach_active,
	.present = attach_attached,
	.progress = attach_get_progress,
	.no_model = attach_no_model,
	.checkpoint = attach_request_checkpoint,
	.stop = attach_request_stop,
	.resume = attach_resume,
	.status = attach_status,
	.command = attach_command,
	.gone = attach_gone,
	.close = attach_close,
	.free = attach_free,
};
