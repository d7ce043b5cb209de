/*
 * daemon: a peer's state and how it moves (daemon.h): training starts,
 * the peer leaves, the process exits. The loop thread does all I/O and
 * never trains; the trainer thread never does I/O other than checkpoint
 * files. They meet only through the model lock, the trainer's progress
 * record and two uv_async wake-ups (news, and a step taken), which the
 * trainer's hooks here send.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach.h"
#include "ckpt.h"
#include "control.h"
#include "daemon.h"
#include "gossip.h"
#include "httpd.h"
#include "log.h"
#include "member.h"
#include "model.h"
#include "pace.h"
#include "service.h"
#include "transport.h"

void
daemon_progress(struct daemon *d, struct train_progress *p)
{
	if (d->trainer != NULL) {
		train_get_progress(d->trainer, p);
		return;
	}
	if (d->attach != NULL) {
		attach_get_progress(d->attach, p);
		return;
	}
	memset(p, 0, sizeof(*p));
	p->accuracy = p->test_loss = -1;
}

int
daemon_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	struct daemon *d = arg;

	if (d->transport == NULL)
		return -ESHUTDOWN;
	return transport_send(d->transport, addr, type, buf, len, cb, cbarg);
}

void
daemon_shutdown(struct daemon *d)
{
	if (d->stopping)
		return;
	d->stopping = 1;
	/* The trainer signals wake and step_async from its thread: it must
	 * be gone before they close. It has finished or stops after its
	 * current step (and final checkpoint). */
	if (d->pace != NULL)
		pace_close(d->pace);
	if (d->trainer != NULL) {
		train_request_stop(d->trainer);
		train_join(d->trainer);
	}
	attach_close(d->attach);
	control_close(d->control);
	httpd_close(d->httpd);
	d->httpd = NULL;
	if (d->transport != NULL) {
		/* The totals, once: scripts read the log after the process is gone. */
		log_info("traffic: sent %" PRIu64 " bytes, received %" PRIu64 " bytes, %" PRIu64
		    " exchanges", transport_bytes_sent(d->transport),
		    transport_bytes_received(d->transport),
		    d->gossip != NULL ? gossip_exchanges(d->gossip) : 0);
		/* fails what is still in flight: no send callback after this */
		transport_close(d->transport, NULL, NULL);
		d->transport = NULL;
	}
	member_free(d->member);
	d->member = NULL;
	/* gossip itself lives on until daemon_free: the transport's close
	 * still fails its sends in flight, whose callbacks point into it. */
	uv_close((uv_handle_t *)&d->member_timer, NULL);
	uv_close((uv_handle_t *)&d->gossip_timer, NULL);
	uv_close((uv_handle_t *)&d->close_timer, NULL);
	uv_close((uv_handle_t *)&d->step_async, NULL);
	uv_close((uv_handle_t *)&d->wake, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
}

/* Exit once the trainer has stopped and the leave went out. */
void
daemon_maybe_exit(struct daemon *d)
{
	if (!d->leaving || !d->trained || d->stopping)
		return;
	if (d->member != NULL && !member_leave_done(d->member, util_now()))
		return;
	daemon_shutdown(d);
}

void
daemon_after_training(struct daemon *d)
{
	struct train_progress p;

	daemon_progress(d, &p);
	if (p.state == TRAIN_DONE && d->cfg.linger && d->member != NULL && !d->leaving) {
		log_info("training budget spent; lingering as a member until told to leave");
		service_status("done at step %" PRIu64 ", test accuracy %.4f; lingering as a "
		    "member until told to leave", p.step, p.accuracy);
	} else {
		daemon_begin_leave(d, "training finished");
	}
}

/* The trainer's final checkpoint was taken before closing; this one, at
 * the same step, replaces it. Written on the loop thread: the peer is
 * about to leave, and a partner's exchange waits one write at most. */
static void
daemon_closing_checkpoint(struct daemon *d)
{
	struct train_progress p;
	struct ckpt_state st;
	struct errbuf err = { "" };
	char path[512];
	int rc;

	if (d->cfg.checkpoint_dir == NULL)
		return;
	daemon_progress(d, &p);
	memset(&st, 0, sizeof(st));
	st.spec = d->model->spec;
	st.d = d->model->d;
	st.step = p.step;
	st.epoch = p.epoch;
	st.seed = d->cfg.seed;
	st.x = malloc(st.d * sizeof(float));
	st.v = malloc(st.d * sizeof(float));
	if (st.x == NULL || st.v == NULL)
		rc = errbuf_set(&err, -ENOMEM, "out of memory for a checkpoint");
	else if ((rc = model_snapshot(d->model, st.x, st.v)) < 0)
		errbuf_set(&err, rc, "model snapshot failed: %s", strerror(-rc));
	else
		rc = ckpt_save(d->cfg.checkpoint_dir, &st, d->cfg.checkpoint_keep, path,
		    sizeof(path), &err);
	if (rc < 0)
		log_error("closing: final checkpoint failed: %s", err.msg);
	else
		log_info("checkpoint %s (the model after closing)", path);
	free(st.x);
	free(st.v);
}

void
daemon_end_closing(struct daemon *d, enum closing_reason why)
{
	const struct closing *c = &d->closing;
	char dists[48] = "unmeasured";
	int rc;

	if (!c->active || d->stopping)
		return;
	closing_end(&d->closing, util_now(), transport_bytes_sent(d->transport), why);
	uv_timer_stop(&d->close_timer);
	daemon_closing_checkpoint(d);
	/* status, metrics and the log show the model closing left; the
	 * trainer's "done:" line keeps its own. About 50 ms for the built-in
	 * MLP on the whole test set, once, on the loop. */
	if (d->trainer != NULL && (rc = train_evaluate_now(d->trainer)) < 0)
		log_error("closing: evaluating the closed model failed: %s", strerror(-rc));
	if (isinf(c->distance))
		snprintf(dists, sizeof(dists), "unknown (a partner was still training)");
	else if (c->distance >= 0)
		snprintf(dists, sizeof(dists), "%.4f", c->distance);
	log_info("closing: done after %" PRIu64 " exchanges, %.2f MB, relative distance %s "
	    "(reason: %s)", c->exchanges, (double)c->bytes / 1e6, dists,
	    closing_reason_name(why));
	if (!d->leaving)
		daemon_after_training(d);
}

/* Leaving: announce `left` while the trainer finishes its step and writes
 * the final checkpoint; daemon_maybe_exit ends the process when both are
 * done (the announcement is bounded by leave_timeout). */
void
daemon_begin_leave(struct daemon *d, const char *why)
{
	if (d->leaving)
		return;
	d->leaving = 1;
	log_info("%s: leaving", why);
	service_stopping(why);
	if (d->pace != NULL)
		pace_close(d->pace);
	daemon_end_closing(d, CLOSING_LEAVE);
	if (d->trainer != NULL)
		train_request_stop(d->trainer);
	else if (d->attach != NULL)
		attach_request_stop(d->attach);
	else
		d->trained = 1;	/* a joiner that never got its model */
	if (d->member != NULL) {
		member_leave(d->member, util_now());
		daemon_member_schedule(d);
	}
	daemon_maybe_exit(d);
}

void
daemon_notify(void *arg)
{
	struct daemon *d = arg;

	uv_async_send(&d->wake);
}

/* Trainer thread: tell the loop, then wait if an exchange begun lag
 * rounds ago still runs. */
static void
daemon_notify_step(void *arg, uint64_t step)
{
	struct daemon *d = arg;

	uv_async_send(&d->step_async);
	if (d->pace != NULL)
		pace_wait(d->pace, step);
}

void
daemon_start_training(struct daemon *d, uint64_t start_step)
{
	struct train_hooks hooks = { daemon_notify, daemon_notify_step, d };
	struct errbuf err = { "" };
	int rc;

	d->round_step = start_step;
	if (d->attach != NULL) {
		attach_start(d->attach, start_step);
		log_info("peer %016" PRIx64 " holds the job's model at step %" PRIu64
		    "; its training process attaches on %s", d->id, start_step, d->cfg.control);
		service_status("holding the job's model at step %" PRIu64 "; waiting for its "
		    "training process to attach on %s", start_step, d->cfg.control);
		return;
	}
	rc = train_new(&d->cfg, d->model, &d->train, d->shard, d->shard_n, &d->test, start_step,
	    &hooks, &d->trainer, &err);
	if (rc == 0)
		rc = train_start(d->trainer, &err);
	if (rc < 0) {
		log_error("%s", err.msg);
		train_free(d->trainer);
		d->trainer = NULL;
		d->exit_code = DAEMON_EXIT_USAGE;
		daemon_shutdown(d);
		return;
	}
	if (d->gossip != NULL)
		gossip_set_ready(d->gossip, 1);
	log_info("peer %016" PRIx64 " training %s on %s from step %" PRIu64
	    ", control socket %s", d->id, d->cfg.job, d->cfg.device, start_step, d->cfg.control);
	service_status("training %s on %s from step %" PRIu64, d->cfg.job, d->cfg.device,
	    start_step);
}

/* Arm the timer for the protocol's next deadline; while leaving, look
 * often whether the announcement is through. */
void
daemon_member_schedule(struct daemon *d)
{
	double now = util_now(), at;

	if (d->member == NULL || d->stopping)
		return;
	at = member_next_deadline(d->member);
	if (d->leaving && at > now + 0.02)
		at = now + 0.02;
	util_timer_at(&d->member_timer, d->on_member_timer, at, now);
}
