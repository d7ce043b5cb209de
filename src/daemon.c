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

#include "control.h"
#include "daemon.h"
#include "httpd.h"
#include "log.h"
#include "member.h"
#include "origin.h"
#include "pace.h"
#include "rounds.h"
#include "service.h"
#include "transport.h"

static const char *const daemon_state_names[] = {
	[PEER_JOINING] = "joining", [PEER_TRAINING] = "training", [PEER_CLOSING] = "closing",
	[PEER_LINGERING] = "lingering", [PEER_LEAVING] = "leaving", [PEER_STOPPED] = "stopped",
};

#define DAEMON_TO(s) (1u << (s))
/* The moves from each state. Any state may stop (a failure, or the end). */
static const unsigned daemon_moves[] = {
	[PEER_JOINING] = DAEMON_TO(PEER_TRAINING) | DAEMON_TO(PEER_LEAVING),
	[PEER_TRAINING] = DAEMON_TO(PEER_CLOSING) | DAEMON_TO(PEER_LINGERING) |
	    DAEMON_TO(PEER_LEAVING),
	[PEER_CLOSING] = DAEMON_TO(PEER_LINGERING) | DAEMON_TO(PEER_LEAVING),
	[PEER_LINGERING] = DAEMON_TO(PEER_LEAVING),
	[PEER_LEAVING] = 0,
	[PEER_STOPPED] = 0,
};

const char *
daemon_state_name(enum peer_state s)
{
	return daemon_state_names[s];
}

int
daemon_set_state(struct daemon *d, enum peer_state s)
{
	if (s == d->state)
		return 0;
	if (s != PEER_STOPPED && !(daemon_moves[d->state] & DAEMON_TO(s))) {
		log_error("peer state: no move from %s to %s", daemon_state_names[d->state],
		    daemon_state_names[s]);
		return -EINVAL;
	}
	log_debug("peer state: %s -> %s", daemon_state_names[d->state], daemon_state_names[s]);
	d->state = s;
	return 0;
}

int
daemon_leaving(const struct daemon *d)
{
	return d->state >= PEER_LEAVING;
}

void
daemon_progress(struct daemon *d, struct train_progress *p)
{
	trainer_progress(d->trainer, p);
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
	if (d->state == PEER_STOPPED)
		return;
	daemon_set_state(d, PEER_STOPPED);
	/* The trainer signals wake and step_async from its thread: it must
	 * be gone before they close. It has finished or stops after its
	 * current step (and final checkpoint); pace lets it go. */
	rounds_stop(d->rounds);
	trainer_close(d->trainer);
	control_close(d->control);
	httpd_close(d->httpd);
	d->httpd = NULL;
	if (d->transport != NULL) {
		char suspects[4096];

		/* The totals, once: scripts read the log after the process is gone. */
		log_info("traffic: sent %" PRIu64 " bytes, received %" PRIu64 " bytes, %" PRIu64
		    " exchanges", transport_bytes_sent(d->transport),
		    transport_bytes_received(d->transport), rounds_exchanges(d->rounds));
		if (rounds_suspects_text(d->rounds, suspects, sizeof(suspects)) >= 0)
			log_info("trust: suspects at exit: %s",
			    suspects[0] != '\0' ? suspects : "none");
		/* fails what is still in flight: no send callback after this */
		transport_close(d->transport, NULL, NULL);
		d->transport = NULL;
	}
	member_free(d->member);
	d->member = NULL;
	/* rounds itself lives on until server_free: the transport's close
	 * still fails its sends in flight, whose callbacks point into it. */
	uv_close((uv_handle_t *)&d->member_timer, NULL);
	uv_close((uv_handle_t *)&d->rounds_timer, NULL);
	uv_close((uv_handle_t *)&d->step_async, NULL);
	uv_close((uv_handle_t *)&d->wake, NULL);
	for (size_t i = 0; i < GD_ARRAY_SIZE(d->signals); i++)
		uv_close((uv_handle_t *)&d->signals[i], NULL);
}

/* Exit once the trainer has stopped and the leave went out. */
void
daemon_maybe_exit(struct daemon *d)
{
	if (d->state != PEER_LEAVING || !d->trained)
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
	if (p.state == TRAIN_DONE && d->cfg.linger && d->member != NULL && !daemon_leaving(d)) {
		daemon_set_state(d, PEER_LINGERING);
		log_info("training budget spent; lingering as a member until told to leave");
		service_status("done at step %" PRIu64 ", test accuracy %.4f; lingering as a "
		    "member until told to leave", p.step, p.accuracy);
	} else {
		daemon_begin_leave(d, "training finished");
	}
}

void
daemon_trained(struct daemon *d)
{
	rounds_trained(d->rounds, util_now());
	/* The closing phase may end before rounds_close_begin returns (no
	 * member left): then daemon_end_closing has moved on already. */
	if (!daemon_leaving(d) && rounds_close_begin(d->rounds, util_now())) {
		if (rounds_closing(d->rounds)->active) {
			daemon_set_state(d, PEER_CLOSING);
			service_status("closing: exchanging with the job's members before leaving");
		}
		return;
	}
	daemon_after_training(d);
}

void
daemon_end_closing(void *arg, enum closing_reason why)
{
	struct daemon *d = arg;
	const struct closing *c = rounds_closing(d->rounds);
	char dists[48] = "unmeasured";

	/* The trainer's final checkpoint and evaluation came before closing
	 * changed the model: both again, on the loop (the peer is about to
	 * leave; for the built-in MLP a write and ~50 ms of evaluation), so
	 * the file, status and metrics hold the closed model. The "done:"
	 * line keeps the trainer's accuracy. */
	if (trainer_refresh_final(d->trainer) == 0 && d->cfg.checkpoint_dir != NULL)
		log_info("closing: final checkpoint written again (the model after closing)");
	if (isinf(c->distance))
		snprintf(dists, sizeof(dists), "unknown (a partner was still training)");
	else if (c->distance >= 0)
		snprintf(dists, sizeof(dists), "%.4f", c->distance);
	log_info("closing: done after %" PRIu64 " exchanges, %.2f MB, relative distance %s "
	    "(reason: %s)", c->exchanges, (double)c->bytes / 1e6, dists,
	    closing_reason_name(why));
	if (!daemon_leaving(d))
		daemon_after_training(d);
}

/* Leaving: announce `left` while the trainer finishes its step and writes
 * the final checkpoint; daemon_maybe_exit ends the process when both are
 * done (the announcement is bounded by leave_timeout). */
void
daemon_begin_leave(struct daemon *d, const char *why)
{
	if (daemon_leaving(d))
		return;
	daemon_set_state(d, PEER_LEAVING);
	log_info("%s: leaving", why);
	service_stopping(why);
	rounds_stop(d->rounds);
	rounds_close_end(d->rounds, util_now(), CLOSING_LEAVE);
	if (d->trainer == NULL || trainer_stop(d->trainer) < 0)
		d->trained = 1;	/* a joiner that never got its model */
	if (d->member != NULL) {
		member_leave(d->member, util_now());
		daemon_member_schedule(d);
	}
	daemon_maybe_exit(d);
}

void
daemon_no_job(void *arg, const char *why)
{
	struct daemon *d = arg;

	log_error("%s", why);
	d->exit_code = DAEMON_EXIT_NO_JOB;
	daemon_begin_leave(d, "no member to join");
}

void
daemon_notify(void *arg)
{
	struct daemon *d = arg;

	uv_async_send(&d->wake);
}

/* Tell the loop, then wait if an exchange begun lag rounds ago still
 * runs. */
void
daemon_notify_step(void *arg, uint64_t step)
{
	struct daemon *d = arg;
	struct pace *pace = rounds_pace(d->rounds);

	uv_async_send(&d->step_async);
	if (pace != NULL)
		pace_wait(pace, step);
}

void
daemon_start_training(struct daemon *d, uint64_t start_step, int fresh)
{
	struct errbuf err = { "" };
	char what[256];

	daemon_set_state(d, PEER_TRAINING);
	rounds_start_at(d->rounds, start_step);
	/* From step 0 the origin is the model at ready (gossip.c). */
	if (d->start_x != NULL && start_step > 0) {
		int rc = rounds_set_origin(d->rounds, d->start_x);

		if (rc < 0)
			log_warn("start: the job's start model cannot be used (%s): trust judges "
			    "no ways", strerror(-rc));
		else if (d->start_regen)
			log_info("start: trust judges the members' ways from the job's start "
			    "model, regenerated from the model spec and seed");
		/* A regenerated start is kept beside the checkpoints at ready. */
		if (!d->start_regen)
			d->start_kept = 1;
	}
	free(d->start_x);
	d->start_x = NULL;
	if (trainer_start(d->trainer, start_step, fresh, what, sizeof(what), &err) < 0) {
		log_error("%s", err.msg);
		d->exit_code = DAEMON_EXIT_RUNTIME;
		daemon_shutdown(d);
		return;
	}
	if (trainer_no_model(d->trainer) == NULL) {
		rounds_set_ready(d->rounds, 1);
		daemon_keep_start(d);
	}
	log_info("peer %016" PRIx64 " %s, control socket %s", d->id, what, d->cfg.control);
	service_status("%s", what);
}

void
daemon_keep_start(struct daemon *d)
{
	const float *x = rounds_origin(d->rounds);
	struct errbuf err = { "" };

	if (d->start_kept || d->cfg.checkpoint_dir == NULL || d->rounds == NULL)
		return;
	d->start_kept = 1;
	if (x == NULL)
		origin_drop(d->cfg.checkpoint_dir);
	else if (origin_save(d->loop, d->cfg.checkpoint_dir, &d->model->spec, d->model->d,
	    d->cfg.seed, x, &err) < 0)
		log_warn("start: %s", err.msg);
}

/* Arm the timer for the protocol's next deadline; while leaving, look
 * often whether the announcement is through. */
void
daemon_member_schedule(struct daemon *d)
{
	double now = util_now(), at;

	if (d->member == NULL || d->state == PEER_STOPPED)
		return;
	at = member_next_deadline(d->member);
	if (d->state == PEER_LEAVING && at > now + 0.02)
		at = now + 0.02;
	util_timer_at(&d->member_timer, d->on_member_timer, at, now);
}
