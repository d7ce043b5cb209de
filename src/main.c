/*
 * main: the gossipd daemon. It wires the modules together and owns the
 * process: configuration, daemonising, signals, the libuv loop on the main
 * thread, the trainer thread, and the control commands. The loop thread
 * does all I/O and never trains; the trainer never does I/O other than
 * checkpoint files. They meet only through the model lock, the trainer's
 * progress record and a uv_async wake-up.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "bootstrap.h"
#include "ckpt.h"
#include "config.h"
#include "control.h"
#include "data.h"
#include "gossip.h"
#include "gossipd/control.h"
#include "log.h"
#include "mask.h"
#include "member.h"
#include "metrics.h"
#include "model.h"
#include "pace.h"
#include "select.h"
#include "session.h"
#include "train.h"
#include "transport.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
/* Partners tried in one round when each answers BUSY. */
#define DAEMON_BUSY_RETRIES 2
/* Seconds a joiner waits to know enough members to pick donors from. */
#define DAEMON_DONOR_WAIT 1.0

/* A checkpoint request waiting for the trainer. */
struct pending_ckpt {
	uint64_t client;
	uint64_t ticket;
	struct pending_ckpt *next;
};

struct daemon {
	struct config cfg;
	uv_loop_t *loop;
	uint64_t id;
	struct data_set train, test;
	size_t *shard, shard_n;
	struct model *model;
	struct trainer *trainer;
	struct control *control;
	struct transport *transport;   /* NULL without --listen */
	struct member *member;         /* NULL without --listen */
	uv_timer_t member_timer;
	struct gossip *gossip;         /* NULL without --listen */
	struct select *select;
	struct bootstrap *boot;        /* while a joiner pulls the model */
	uv_timer_t gossip_timer;       /* exchange and pull deadlines */
	uv_async_t step_async;         /* the trainer finished a step */
	struct pace *pace;             /* holds the trainer back (lag); with gossip */
	uint64_t round_step;           /* step at which the last round began */
	int busy_retries;              /* partners that answered BUSY this round */
	struct member_info *info;      /* scratch for member lists */
	const char **addrs;
	size_t info_cap;
	uv_async_t wake;
	uv_signal_t sigterm, sigint;
	struct pending_ckpt *pending;
	int trained;                   /* the trainer reported DONE or FAILED */
	int must_pull;                 /* a joiner without a checkpoint: pull first */
	double joined_at;              /* when it first knew a live member */
	int leaving;                   /* leave requested or budget spent */
	int stopping;
	int exit_code;
};

static const char *
state_name(enum train_state s)
{
	switch (s) {
	case TRAIN_TRAINING: return "training";
	case TRAIN_LEAVING: return "leaving";
	case TRAIN_DONE: return "done";
	case TRAIN_FAILED: return "failed";
	}
	return "unknown";
}

/* The trainer's progress; zeros while a joiner still pulls the model. */
static void
daemon_progress(struct daemon *d, struct train_progress *p)
{
	if (d->trainer != NULL) {
		train_get_progress(d->trainer, p);
		return;
	}
	memset(p, 0, sizeof(*p));
	p->accuracy = p->test_loss = -1;
}

/* What status calls the peer's state: the trainer's, except while it
 * looks for the job, pulls the model, or announces its leave. */
static const char *
daemon_state(struct daemon *d, const struct train_progress *p)
{
	if (d->leaving)
		return p->state == TRAIN_FAILED ? "failed" : "leaving";
	if ((d->member != NULL && !member_joined(d->member)) || d->trainer == NULL)
		return "joining";
	return state_name(p->state);
}

static json_t *
daemon_status(struct daemon *d)
{
	struct train_progress p;
	uint64_t sent = 0, received = 0;
	int members = 1;
	char id[17];
	json_t *st;

	daemon_progress(d, &p);
	if (d->member != NULL)
		members = (int)member_count(d->member, MEMBER_ALIVE);
	snprintf(id, sizeof(id), "%016" PRIx64, d->id);
	if (d->transport != NULL) {
		sent = transport_bytes_sent(d->transport);
		received = transport_bytes_received(d->transport);
	}
	st = json_pack("{s:b, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I,"
	    " s:f, s:f, s:i, s:I, s:I, s:I}",
	    "ok", 1, "id", id, "job", d->cfg.job, "state", daemon_state(d, &p),
	    "step", (json_int_t)p.step, "total_steps", (json_int_t)p.total_steps,
	    "epoch", (json_int_t)p.epoch, "lr", p.lr, "loss", p.loss,
	    "accuracy", p.accuracy, "test_loss", p.test_loss,
	    "eval_step", (json_int_t)p.eval_step, "samples_per_s", p.samples_per_s,
	    "elapsed", p.elapsed, "members", members, "bytes_sent", (json_int_t)sent,
	    "bytes_received", (json_int_t)received, "exchanges",
	    (json_int_t)(d->gossip ? gossip_exchanges(d->gossip) : 0));
	if (st != NULL && d->gossip != NULL) {
		double dist = gossip_consensus_distance(d->gossip), waited;
		json_t *net = json_object();
		uint64_t waits;

		pace_stats(d->pace, &waited, &waits);
		json_object_set_new(st, "lag_wait_s", json_real(waited));
		json_object_set_new(st, "lag_waits", json_integer((json_int_t)waits));

		json_object_set_new(st, "consensus_distance", dist < 0 ? json_null() :
		    json_real(dist));
		transport_stats_json(d->transport, net);
		json_object_set(st, "bytes_sent_by_type", json_object_get(net, "bytes_sent"));
		json_object_set(st, "bytes_received_by_type",
		    json_object_get(net, "bytes_received"));
		json_decref(net);
	}
	return st;
}

static json_t *
daemon_stats(struct daemon *d)
{
	struct train_progress p;
	json_t *stats, *net;

	daemon_progress(d, &p);
	stats = json_pack("{s:b, s:{s:I, s:I, s:i, s:f, s:I}, s:{s:s, s:s, s:I, s:i}}",
	    "ok", 1,
	    "train", "steps", (json_int_t)p.step, "checkpoints", (json_int_t)p.ckpt_done,
	    "shard_samples", (int)d->shard_n, "samples_per_s", p.samples_per_s,
	    "evaluations_at", (json_int_t)p.eval_step,
	    "model", "device", d->cfg.device, "log_level", d->cfg.log_level,
	    "parameters", (json_int_t)d->model->d, "threads", d->cfg.threads);
	if (d->transport != NULL) {
		net = json_object();
		transport_stats_json(d->transport, net);
		json_object_set_new(stats, "transport", net);
	}
	if (d->member != NULL)
		member_stats_json(d->member, stats);
	if (d->gossip != NULL) {
		gossip_stats_json(d->gossip, stats);
		select_stats_json(d->select, stats);
	}
	if (d->boot != NULL)
		bootstrap_stats_json(d->boot, stats);
	return stats;
}

static json_t *
daemon_peers(struct daemon *d)
{
	struct member_info *info;
	json_t *list = json_array();
	size_t n, i;
	double now = util_now();

	if (d->member == NULL)
		return json_pack("{s:b, s:o}", "ok", 1, "peers", list);
	n = member_list(d->member, NULL, 0);
	info = xcalloc(n ? n : 1, sizeof(*info));
	n = member_list(d->member, info, n);
	for (i = 0; i < n; i++) {
		struct member_info *e = &info[i];
		const struct select_link *l = d->select ? select_link(d->select, e->addr) : NULL;
		json_t *refused = json_object();
		char id[17];

		for (int r = 0; r < GOSSIP_REFUSE_N; r++)
			json_object_set_new(refused, gossip_refusal_name((enum gossip_refusal)r),
			    json_integer((json_int_t)(l ? l->offences[r] : 0)));

		snprintf(id, sizeof(id), "%016" PRIx64, e->id);
		json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:I, s:b, s:o, s:o,"
		    " s:o, s:f, s:o, s:o, s:I, s:I, s:o}",
		    "id", id, "addr", e->addr, "state", member_state_name(e->state),
		    "incarnation", (json_int_t)e->incarnation, "self", e->self,
		    "rtt", e->rtt < 0 ? json_null() : json_real(e->rtt),
		    "bandwidth", l == NULL || l->bandwidth < 0 ? json_null() :
		    json_real(l->bandwidth),
		    "last_contact", e->self ? json_real(0) : e->last_contact < 0 ?
		    json_null() : json_real(now - e->last_contact),
		    "since", now - e->since,
		    "exchange_rtt", l == NULL || l->rtt < 0 ? json_null() : json_real(l->rtt),
		    "last_exchange", l == NULL || l->last_used < 0 ? json_null() :
		    json_real(now - l->last_used),
		    "selected", (json_int_t)(l ? l->selected : 0),
		    "exchanges", (json_int_t)(l ? l->exchanges : 0), "refused", refused));
	}
	free(info);
	return json_pack("{s:b, s:o}", "ok", 1, "peers", list);
}

static json_t *
daemon_metrics(struct daemon *d)
{
	json_t *status = daemon_status(d), *stats = daemon_stats(d), *r;
	char *text = metrics_render(status, stats);

	json_decref(status);
	json_decref(stats);
	if (text == NULL)
		return control_error("out of memory");
	r = json_pack("{s:b, s:s}", "ok", 1, "text", text);
	free(text);
	return r;
}

static void daemon_shutdown(struct daemon *d);

static void
daemon_gossip_params(const struct config *c, struct gossip_params *gp, struct select_params *sp)
{
	*gp = (struct gossip_params){ c->mode, c->values, c->density, (size_t)c->mask_block,
	    c->seed, c->exchange_timeout };
	*sp = (struct select_params){ c->select, c->bw_ratio, c->stale_after };
}

/* Hand runtime-tunable gossip keys to the running modules. */
static void
daemon_apply_gossip(struct daemon *d)
{
	struct gossip_params gp;
	struct select_params sp;

	if (d->gossip == NULL)
		return;
	daemon_gossip_params(&d->cfg, &gp, &sp);
	gossip_set_params(d->gossip, &gp);
	select_set_params(d->select, &sp);
	if (d->cfg.lag == 0)
		pace_release(d->pace);
}
static void daemon_begin_leave(struct daemon *d, const char *why);
static void daemon_member_schedule(struct daemon *d);
static void daemon_gossip_schedule(struct daemon *d);
static void daemon_maybe_bootstrap(struct daemon *d);

/* gossipctl set: keep probe_timeout < probe_interval and a density and
 * mask_block that build a mask of this model (a set that breaks either is
 * undone), then hand the new values to the running protocols. */
static int
daemon_set(struct daemon *d, const char *key, const char *value, struct errbuf *err)
{
	int interval = d->cfg.probe_interval, timeout = d->cfg.probe_timeout;
	int suspicion = d->cfg.suspicion_timeout, block = d->cfg.mask_block, rc;
	double density = d->cfg.density;

	if ((rc = config_set(&d->cfg, key, value, err)) < 0)
		return rc;
	if (d->cfg.probe_timeout >= d->cfg.probe_interval) {
		d->cfg.probe_interval = interval;
		d->cfg.probe_timeout = timeout;
		d->cfg.suspicion_timeout = suspicion;
		return errbuf_set(err, -EINVAL,
		    "probe_timeout must stay shorter than probe_interval");
	}
	if ((rc = mask_check(d->model->d, d->cfg.density, (size_t)d->cfg.mask_block, err)) < 0) {
		d->cfg.density = density;
		d->cfg.mask_block = block;
		return rc;
	}
	if (d->member != NULL) {
		member_set_timing(d->member, (unsigned)d->cfg.probe_interval,
		    (unsigned)d->cfg.probe_timeout, (unsigned)d->cfg.suspicion_timeout);
		daemon_member_schedule(d);
	}
	daemon_apply_gossip(d);
	return 0;
}

static int
daemon_command(struct control *ctl, uint64_t client, const char *cmd, json_t *req,
    json_t **reply, void *arg)
{
	struct daemon *d = arg;

	(void)ctl;
	if (strcmp(cmd, GD_CMD_STATUS) == 0) {
		*reply = daemon_status(d);
	} else if (strcmp(cmd, GD_CMD_STATS) == 0) {
		*reply = daemon_stats(d);
	} else if (strcmp(cmd, GD_CMD_PEERS) == 0) {
		*reply = daemon_peers(d);
	} else if (strcmp(cmd, GD_CMD_METRICS) == 0) {
		*reply = daemon_metrics(d);
	} else if (strcmp(cmd, GD_CMD_WATCH) == 0) {
		control_watch(d->control, client);
		*reply = daemon_status(d);
		json_object_set_new(*reply, "watching", json_true());
	} else if (strcmp(cmd, GD_CMD_CHECKPOINT) == 0) {
		struct pending_ckpt *pc;

		if (d->cfg.checkpoint_dir == NULL) {
			*reply = control_error("no checkpoint_dir configured");
			return CONTROL_REPLIED;
		}
		if (d->stopping || d->leaving) {
			*reply = control_error("peer is leaving; its final checkpoint is on the way");
			return CONTROL_REPLIED;
		}
		if (d->trainer == NULL) {
			*reply = control_error("peer is still joining: no model to save yet");
			return CONTROL_REPLIED;
		}
		pc = xmalloc(sizeof(*pc));
		pc->client = client;
		pc->ticket = train_request_checkpoint(d->trainer);
		pc->next = d->pending;
		d->pending = pc;
		return CONTROL_DEFERRED;
	} else if (strcmp(cmd, GD_CMD_LEAVE) == 0) {
		log_info("leave requested through the control socket");
		*reply = json_pack("{s:b, s:s}", "ok", 1, "state", "leaving");
		daemon_begin_leave(d, "leave requested");
	} else if (strcmp(cmd, GD_CMD_SET) == 0) {
		const char *key = json_string_value(json_object_get(req, "key"));
		const char *value = json_string_value(json_object_get(req, "value"));
		struct errbuf err = { "" };
		enum log_level l;

		if (key == NULL || value == NULL) {
			*reply = control_error("set needs \"key\" and \"value\" strings");
		} else if (daemon_set(d, key, value, &err) < 0) {
			*reply = control_error("%s", err.msg);
		} else {
			if (log_level_parse(d->cfg.log_level, &l) == 0)
				log_set_level(l);
			log_info("set %s = %s", key, value);
			*reply = json_pack("{s:b, s:s, s:s}", "ok", 1, "key", key, "value", value);
		}
	} else {
		*reply = control_error("unknown command '%s' (try status, peers, stats, "
		    "metrics, watch, checkpoint, leave, set)", cmd);
	}
	return CONTROL_REPLIED;
}

static void
daemon_answer_checkpoints(struct daemon *d, const struct train_progress *p, int final)
{
	struct pending_ckpt **pp = &d->pending;

	while (*pp != NULL) {
		struct pending_ckpt *pc = *pp;
		json_t *r;

		if (pc->ticket > p->ckpt_done && !final) {
			pp = &pc->next;
			continue;
		}
		if (pc->ticket > p->ckpt_done)
			r = control_error("peer stopped before the checkpoint was written");
		else if (p->ckpt_rc < 0)
			r = control_error("checkpoint failed: %s", p->ckpt_msg);
		else
			r = json_pack("{s:b, s:s, s:I}", "ok", 1, "path", p->ckpt_msg,
			    "step", (json_int_t)p->step);
		control_reply(d->control, pc->client, r);
		*pp = pc->next;
		free(pc);
	}
}

/* Exit once the trainer has stopped and the leave went out. */
static void
daemon_maybe_exit(struct daemon *d)
{
	if (!d->leaving || !d->trained || d->stopping)
		return;
	if (d->member != NULL && !member_leave_done(d->member, util_now()))
		return;
	daemon_shutdown(d);
}

/* Leaving: announce `left` while the trainer finishes its step and writes
 * the final checkpoint; daemon_maybe_exit ends the process when both are
 * done (the announcement is bounded by leave_timeout). */
static void
daemon_begin_leave(struct daemon *d, const char *why)
{
	if (d->leaving)
		return;
	d->leaving = 1;
	log_info("%s: leaving", why);
	if (d->pace != NULL)
		pace_close(d->pace);
	if (d->trainer != NULL)
		train_request_stop(d->trainer);
	else
		d->trained = 1;	/* a joiner that never got its model */
	if (d->member != NULL) {
		member_leave(d->member, util_now());
		daemon_member_schedule(d);
	}
	daemon_maybe_exit(d);
}

/* Runs on the loop thread whenever the trainer has news. */
static void
daemon_wake(uv_async_t *h)
{
	struct daemon *d = h->data;
	struct train_progress p;

	if (d->trainer == NULL)
		return;
	train_get_progress(d->trainer, &p);
	daemon_answer_checkpoints(d, &p, 0);
	if (control_watchers(d->control) > 0) {
		json_t *msg = daemon_status(d);

		json_object_del(msg, "ok");
		json_object_set_new(msg, "event", json_string("progress"));
		control_broadcast(d->control, msg);
		json_decref(msg);
	}
	if ((p.state == TRAIN_DONE || p.state == TRAIN_FAILED) && !d->trained) {
		d->trained = 1;
		if (p.state == TRAIN_FAILED) {
			log_error("training failed: %s", p.error);
			d->exit_code = EXIT_RUNTIME;
		} else {
			log_info("done: %" PRIu64 " steps in %.1f s, test accuracy %.4f, loss %.4f",
			    p.step, p.elapsed, p.accuracy, p.test_loss);
		}
		daemon_answer_checkpoints(d, &p, 1);
		if (p.state == TRAIN_DONE && d->cfg.linger && d->member != NULL && !d->leaving)
			log_info("training budget spent; lingering as a member until told to leave");
		else
			daemon_begin_leave(d, "training finished");
	}
	daemon_maybe_exit(d);
}

/* Messages are routed by type range to the module that owns it. */
static void
daemon_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	struct daemon *d = arg;

	if (d->member != NULL && type >= MEMBER_T_FIRST && type <= MEMBER_T_LAST) {
		member_recv(d->member, util_now(), sender, addr, type, payload, len);
		daemon_member_schedule(d);
		daemon_maybe_bootstrap(d);
		return;
	}
	if (d->gossip != NULL && type >= GOSSIP_T_FIRST && type <= GOSSIP_T_LAST) {
		if (type == GOSSIP_T_CHUNK && d->boot != NULL) {
			bootstrap_recv(d->boot, util_now(), addr, payload, len);
			daemon_maybe_bootstrap(d);
		} else {
			gossip_recv(d->gossip, util_now(), addr, type, payload, len);
		}
		daemon_gossip_schedule(d);
		return;
	}
	log_debug("message type %u of %zu bytes from %016" PRIx64 " at %s: no handler",
	    type, len, sender, addr);
}

static void
daemon_peer_down(void *arg, const char *addr, uint64_t id, int status)
{
	struct daemon *d = arg;

	log_info("peer %016" PRIx64 " at %s unreachable: %s", id, addr, strerror(-status));
	if (d->member != NULL) {
		member_peer_down(d->member, util_now(), addr);
		daemon_member_schedule(d);
	}
	if (d->boot != NULL) {
		bootstrap_donor_down(d->boot, util_now(), addr);
		daemon_maybe_bootstrap(d);
		daemon_gossip_schedule(d);
	}
}

static int
daemon_send(void *arg, const char *addr, uint8_t type, const void *buf,
    size_t len, member_send_cb cb, void *cbarg)
{
	struct daemon *d = arg;

	if (d->transport == NULL)
		return -ESHUTDOWN;
	return transport_send(d->transport, addr, type, buf, len, cb, cbarg);
}

static void
daemon_member_change(void *arg, const char *addr, uint64_t id, enum member_state old,
    enum member_state now)
{
	struct daemon *d = arg;
	char hex[17];

	snprintf(hex, sizeof(hex), "%016" PRIx64, id);
	if (old == now)
		log_info("member %s (%s) appeared: %s", addr, hex, member_state_name(now));
	else
		log_info("member %s (%s): %s -> %s", addr, hex, member_state_name(old),
		    member_state_name(now));
	if (control_watchers(d->control) > 0) {
		json_t *msg = json_pack("{s:s, s:s, s:s, s:s, s:s}", "event", "member",
		    "addr", addr, "id", hex, "state", member_state_name(now),
		    "was", old == now ? "unknown" : member_state_name(old));

		control_broadcast(d->control, msg);
		json_decref(msg);
	}
}

static void
daemon_member_timer(uv_timer_t *h)
{
	struct daemon *d = h->data;

	if (d->member == NULL)
		return;
	member_tick(d->member, util_now());
	daemon_member_schedule(d);
	daemon_maybe_bootstrap(d);
	daemon_maybe_exit(d);
}

/* Arm the timer for the protocol's next deadline; while leaving, look
 * often whether the announcement is through. */
static void
daemon_member_schedule(struct daemon *d)
{
	double now = util_now(), at;

	if (d->member == NULL || d->stopping)
		return;
	at = member_next_deadline(d->member);
	if (d->leaving && at > now + 0.02)
		at = now + 0.02;
	util_timer_at(&d->member_timer, daemon_member_timer, at, now);
}

/* --- gossip rounds and the joiner's model pull --------------------------- */

static void daemon_start_training(struct daemon *d, uint64_t start_step);

/* Live members other than this peer, into d->addrs; returns how many. */
static size_t
daemon_live_peers(struct daemon *d)
{
	size_t n = member_list(d->member, NULL, 0), k = 0;

	if (n > d->info_cap) {
		free(d->info);
		free(d->addrs);
		d->info_cap = 2 * n;
		d->info = xcalloc(d->info_cap, sizeof(*d->info));
		d->addrs = xcalloc(d->info_cap, sizeof(*d->addrs));
	}
	n = member_list(d->member, d->info, d->info_cap);
	for (size_t i = 0; i < n && i < d->info_cap; i++) {
		if (!d->info[i].self && d->info[i].state == MEMBER_ALIVE)
			d->addrs[k++] = d->info[i].addr;
	}
	return k;
}

static uint64_t
daemon_step_now(void *arg)
{
	struct daemon *d = arg;
	struct train_progress p;

	daemon_progress(d, &p);
	return p.step;
}

static void daemon_gossip_timer(uv_timer_t *h);

/* Arm the timer for the nearest exchange or pull deadline. */
static void
daemon_gossip_schedule(struct daemon *d)
{
	double now = util_now(), next = -1, t;

	if (d->gossip == NULL || d->stopping)
		return;
	next = gossip_tick(d->gossip, now);
	if (d->boot != NULL && (t = bootstrap_tick(d->boot, now)) >= 0 &&
	    (next < 0 || t < next))
		next = t;
	if (next < 0) {
		uv_timer_stop(&d->gossip_timer);
		return;
	}
	util_timer_at(&d->gossip_timer, daemon_gossip_timer, next, now);
}

/* One exchange with a partner chosen by the select policy. With lag, the
 * round holds the trainer from lag rounds after its first step until the
 * exchange ends, BUSY retries included; a round that starts nothing
 * releases it at once. */
static void
daemon_round(struct daemon *d, const char *exclude)
{
	double now = util_now();
	const char *partner;
	size_t n;
	int rc;

	if (d->gossip == NULL || d->leaving || d->stopping || gossip_active(d->gossip))
		return;
	n = daemon_live_peers(d);
	partner = select_pick(d->select, now, d->addrs, n, exclude);
	/* -EDOM: our own values are not finite; the partner is not to blame. */
	if (partner != NULL && (rc = gossip_start(d->gossip, now, partner)) < 0 && rc != -EDOM)
		select_record(d->select, partner, now, 0, 0, 0);
	if (gossip_active(d->gossip) && d->cfg.lag > 0)
		pace_hold(d->pace, d->round_step +
		    (uint64_t)d->cfg.lag * (uint64_t)d->cfg.interval);
	else
		pace_release(d->pace);
	daemon_gossip_schedule(d);
}

/* Start a round if `interval` steps have passed since the last one began.
 * The trainer waits for it only with lag (daemon_notify_step). */
static void
daemon_maybe_round(struct daemon *d)
{
	uint64_t step;

	if (d->gossip == NULL || d->trainer == NULL || gossip_active(d->gossip))
		return;
	step = daemon_step_now(d);
	if (step < d->round_step + (uint64_t)d->cfg.interval)
		return;
	d->round_step = step;
	d->busy_retries = 0;
	daemon_round(d, NULL);
}

/* The trainer took a step. */
static void
daemon_step(uv_async_t *h)
{
	daemon_maybe_round(h->data);
}

static void
daemon_gossip_done(void *arg, const char *addr, double now, enum gossip_result r,
    size_t bytes, double seconds)
{
	struct daemon *d = arg;

	/* BUSY says nothing about the link: neither a sample nor a failure. */
	if (r != GOSSIP_BUSY)
		select_record(d->select, addr, now, bytes, seconds, r == GOSSIP_OK);
	else if (d->busy_retries++ < DAEMON_BUSY_RETRIES) {
		daemon_round(d, addr);
		return;
	}
	pace_release(d->pace);
	/* Paced, the trainer is likely waiting at the next round's first
	 * step: start that round now rather than one step later. */
	if (d->cfg.lag > 0)
		daemon_maybe_round(d);
}

_Static_assert(GOSSIP_REFUSE_N <= SELECT_REASONS, "select counts every gossip refusal");

/* Values from addr were refused: selection avoids it for a while. */
static void
daemon_gossip_refused(void *arg, const char *addr, enum gossip_refusal why)
{
	struct daemon *d = arg;

	select_offence(d->select, addr, util_now(), (unsigned)why);
}

/* A joiner starts training once it holds the job's model: it pulls it
 * from donors as soon as it knows a live member, and tries again with
 * other donors if a pull fails. */
static void
daemon_maybe_bootstrap(struct daemon *d)
{
	struct bootstrap_ops ops = { daemon_send, d };
	char donors[3 * 64] = "";
	uint64_t step;
	size_t n;
	int rc;

	if (!d->must_pull || d->leaving || d->stopping || d->member == NULL)
		return;
	if (d->boot == NULL) {
		if (!member_joined(d->member) || (n = daemon_live_peers(d)) == 0)
			return;
		/* The first member to answer sends its whole table a moment
		 * later: wait for it, to pick donors among everyone. */
		if (d->joined_at == 0)
			d->joined_at = util_now();
		if (n < BOOTSTRAP_MAX_DONORS && util_now() - d->joined_at < DAEMON_DONOR_WAIT)
			return;
		if ((rc = bootstrap_new(d->model->d, d->cfg.exchange_timeout, &ops,
		    &d->boot)) < 0 || (rc = bootstrap_start(d->boot, util_now(), d->addrs,
		    n)) < 0) {
			log_error("bootstrap: cannot start: %s", strerror(-rc));
			bootstrap_free(d->boot);
			d->boot = NULL;
			return;
		}
		log_info("bootstrap: pulling the model from up to %d of %zu members",
		    BOOTSTRAP_MAX_DONORS, n);
		daemon_gossip_schedule(d);
		return;
	}
	if (bootstrap_failed(d->boot)) {
		log_warn("bootstrap: every donor failed; trying others");
		bootstrap_free(d->boot);
		d->boot = NULL;
		return;
	}
	if (!bootstrap_done(d->boot))
		return;
	step = bootstrap_step(d->boot);
	rc = model_restore(d->model, bootstrap_params(d->boot), NULL);
	for (int i = 0; bootstrap_donor(d->boot, i) != NULL; i++)
		snprintf(donors + strlen(donors), sizeof(donors) - strlen(donors), "%s%s",
		    i ? "," : "", bootstrap_donor(d->boot, i));
	bootstrap_free(d->boot);
	d->boot = NULL;
	if (rc < 0) {
		log_error("bootstrap: cannot load the pulled model: %s", strerror(-rc));
		return;
	}
	log_info("bootstrap: model pulled from %s; continuing from the donors' step %" PRIu64,
	    donors, step);
	d->must_pull = 0;
	daemon_start_training(d, step);
}

static void
daemon_gossip_timer(uv_timer_t *h)
{
	struct daemon *d = h->data;

	daemon_gossip_schedule(d);
	daemon_maybe_bootstrap(d);
}

static int
daemon_open_gossip(struct daemon *d, struct errbuf *err)
{
	struct gossip_ops ops = { daemon_send, daemon_gossip_done, daemon_step_now,
	    daemon_gossip_refused, d };
	struct gossip_params gp;
	struct select_params sp;
	int rc;

	daemon_gossip_params(&d->cfg, &gp, &sp);
	if ((rc = gossip_new(&gp, d->model, &ops, &d->gossip)) < 0 ||
	    (rc = select_new(&sp, &d->select)) < 0 || (rc = pace_new(&d->pace)) < 0)
		return errbuf_set(err, rc, "gossip: %s", strerror(-rc));
	gossip_set_ready(d->gossip, !d->must_pull);
	uv_timer_init(d->loop, &d->gossip_timer);
	d->gossip_timer.data = d;
	transport_name_type(d->transport, GOSSIP_T_REQ, "gossip_req");
	transport_name_type(d->transport, GOSSIP_T_REPLY, "gossip_reply");
	transport_name_type(d->transport, GOSSIP_T_PULL, "model_pull");
	transport_name_type(d->transport, GOSSIP_T_CHUNK, "model_chunk");
	return 0;
}

/* --peers: "A:P,B:P" or "@FILE" with one address a line, # comments. */
static int
daemon_add_seeds(struct daemon *d, const char *list, struct errbuf *err)
{
	char *text = NULL, *tok, *save, host[256];
	const char *sep = ",";
	double now = util_now();
	int port, rc = 0, n = 0;

	if (list[0] == '@') {
		FILE *f = fopen(list + 1, "r");
		char line[512];
		size_t len = 0, cap = 1;

		if (f == NULL)
			return errbuf_set(err, -EINVAL, "peers: cannot open %s: %s", list + 1,
			    strerror(errno));
		text = xcalloc(1, 1);
		while (fgets(line, sizeof(line), f) != NULL) {
			size_t l;

			line[strcspn(line, "#")] = '\0';
			l = strlen(line);
			text = realloc(text, cap += l + 1);
			if (text == NULL)
				abort();
			memcpy(text + len, line, l);
			len += l;
			text[len++] = '\n';
			text[len] = '\0';
		}
		fclose(f);
		sep = " \t\r\n";
	} else {
		text = xstrdup(list);
	}
	for (tok = strtok_r(text, sep, &save); tok != NULL; tok = strtok_r(NULL, sep, &save)) {
		if (config_split_hostport(tok, host, sizeof(host), &port) < 0) {
			rc = errbuf_set(err, -EINVAL, "peers: '%s' is not HOST:PORT", tok);
			goto out;
		}
		if ((rc = member_add_seed(d->member, tok, now)) < 0) {
			rc = errbuf_set(err, rc, "peers: cannot use '%s': %s", tok, strerror(-rc));
			goto out;
		}
		n++;
	}
	if (n == 0)
		rc = errbuf_set(err, -EINVAL, "peers: no address in '%s'", list);
out:
	free(text);
	return rc;
}

static int
daemon_open_member(struct daemon *d, struct errbuf *err)
{
	struct member_ops ops = { daemon_send, daemon_member_change, d };
	struct member_params mp;
	struct timespec ts;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	memset(&mp, 0, sizeof(mp));
	mp.self_addr = d->cfg.listen;
	mp.self_id = d->id;
	/* wall-clock ms: a restart on this address outranks its old records */
	mp.incarnation = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	mp.period_ms = (unsigned)d->cfg.probe_interval;
	mp.ping_timeout_ms = (unsigned)d->cfg.probe_timeout;
	mp.suspicion_ms = (unsigned)d->cfg.suspicion_timeout;
	mp.indirect_checks = (unsigned)d->cfg.indirect_checks;
	mp.leave_ms = (unsigned)d->cfg.leave_timeout;
	uv_timer_init(d->loop, &d->member_timer);
	d->member_timer.data = d;
	if ((rc = member_new(&mp, &ops, util_now(), &d->member, err)) < 0)
		return rc;
	transport_name_type(d->transport, MEMBER_T_PING, "ping");
	transport_name_type(d->transport, MEMBER_T_ACK, "ping_ack");
	transport_name_type(d->transport, MEMBER_T_PING_REQ, "ping_req");
	transport_name_type(d->transport, MEMBER_T_SYNC, "sync");
	transport_name_type(d->transport, MEMBER_T_GOSSIP, "member_gossip");
	if (d->cfg.peers != NULL && (rc = daemon_add_seeds(d, d->cfg.peers, err)) < 0)
		return rc;
	if (d->cfg.join != NULL && (rc = member_add_seed(d->member, d->cfg.join,
	    util_now())) < 0)
		return errbuf_set(err, rc, "join: cannot use '%s'", d->cfg.join);
	daemon_member_schedule(d);
	return 0;
}

/* Key errors are configuration errors (exit 2); an endpoint that cannot
 * open is a runtime failure (exit 1). */
static int
daemon_open_transport(struct daemon *d, int *exit_code, struct errbuf *err)
{
	struct transport_callbacks cbs = { daemon_recv, daemon_peer_down, d };
	struct transport_params tp;
	struct errbuf why = { "" };
	uint8_t key[SESSION_KEY_SIZE];
	int rc;

	if (d->cfg.listen == NULL)
		return 0;
	if ((rc = session_key_load(d->cfg.key_file, key, &why)) < 0) {
		*exit_code = EXIT_USAGE;
		return errbuf_set(err, rc, "key_file: %s", why.msg);
	}
	memset(&tp, 0, sizeof(tp));
	tp.listen = d->cfg.listen;
	tp.provider = d->cfg.provider;
	tp.key = key;
	tp.job = d->cfg.job;
	tp.self_id = d->id;
	tp.max_message_size = d->cfg.max_message_size;
	rc = transport_open(d->loop, &tp, &cbs, &d->transport, &why);
	sodium_memzero(key, sizeof(key));
	if (rc < 0) {
		*exit_code = EXIT_RUNTIME;
		return errbuf_set(err, rc, "listen %s (provider %s): %s", d->cfg.listen,
		    d->cfg.provider, why.msg);
	}
	log_info("fabric endpoint on %s (provider %s)", d->cfg.listen, d->cfg.provider);
	if ((rc = daemon_open_member(d, &why)) < 0 || (rc = daemon_open_gossip(d, &why)) < 0) {
		transport_close(d->transport, NULL, NULL);
		d->transport = NULL;
		member_free(d->member);
		d->member = NULL;
		uv_close((uv_handle_t *)&d->member_timer, NULL);
		*exit_code = EXIT_USAGE;
		return errbuf_set(err, rc, "%s", why.msg);
	}
	return 0;
}

static void
daemon_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	daemon_begin_leave(d, strsignal(signum));
}

static void
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
	control_close(d->control);
	if (d->transport != NULL) {
		/* fails what is still in flight: no send callback after this */
		transport_close(d->transport, NULL, NULL);
		d->transport = NULL;
	}
	if (d->member != NULL) {
		member_free(d->member);
		d->member = NULL;
		uv_close((uv_handle_t *)&d->member_timer, NULL);
	}
	/* gossip itself lives on until daemon_free: the transport's close
	 * still fails its sends in flight, whose callbacks point into it. */
	if (d->gossip != NULL)
		uv_close((uv_handle_t *)&d->gossip_timer, NULL);
	uv_close((uv_handle_t *)&d->step_async, NULL);
	uv_close((uv_handle_t *)&d->wake, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
}

static void
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

static void
daemon_start_training(struct daemon *d, uint64_t start_step)
{
	struct train_hooks hooks = { daemon_notify, daemon_notify_step, d };
	struct errbuf err = { "" };
	int rc;

	rc = train_new(&d->cfg, d->model, &d->train, d->shard, d->shard_n, &d->test, start_step,
	    &hooks, &d->trainer, &err);
	if (rc == 0)
		rc = train_start(d->trainer, &err);
	if (rc < 0) {
		log_error("%s", err.msg);
		train_free(d->trainer);
		d->trainer = NULL;
		d->exit_code = EXIT_USAGE;
		daemon_shutdown(d);
		return;
	}
	if (d->gossip != NULL)
		gossip_set_ready(d->gossip, 1);
	d->round_step = start_step;
	log_info("peer %016" PRIx64 " training %s on %s from step %" PRIu64
	    ", control socket %s", d->id, d->cfg.job, d->cfg.device, start_step, d->cfg.control);
}

/* Detach from the terminal. Done before any thread or libfabric exists
 * (verbs is not fork-safe). Paths were made absolute by the caller. */
static int
daemon_detach(const struct config *c)
{
	int fd;

	switch (fork()) {
	case -1:
		return -errno;
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -errno;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (c->log_file == NULL)
		dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
	return 0;
}

static int
daemon_open_log(const struct config *c)
{
	int fd;

	if (c->log_file == NULL)
		return 0;
	fd = open(c->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "gossipd: log_file: cannot open %s: %s\n", c->log_file,
		    strerror(errno));
		return -errno;
	}
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/* Relative paths would break once a daemon changes directory. */
static void
daemon_absolute(char **path)
{
	char *abs;

	if (*path == NULL || (*path)[0] == '/')
		return;
	abs = realpath(*path, NULL);
	if (abs == NULL) {
		char cwd[4096];
		size_t n;

		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return;
		n = strlen(cwd) + strlen(*path) + 2;
		abs = xmalloc(n);
		snprintf(abs, n, "%s/%s", cwd, *path);
	}
	free(*path);
	*path = abs;
}

static int
daemon_load_data(struct daemon *d, struct errbuf *err)
{
	struct errbuf why = { "" };
	int rc;

	if ((rc = data_load(d->cfg.data_dir, "train", &d->train, &why)) < 0 ||
	    (rc = data_load(d->cfg.data_dir, "t10k", &d->test, &why)) < 0)
		return errbuf_set(err, rc, "data: %s", why.msg);
	if (d->train.dim != (size_t)d->cfg.model.sizes[0])
		return errbuf_set(err, -EINVAL, "model: %d inputs but the data has %zu features",
		    d->cfg.model.sizes[0], d->train.dim);
	rc = data_shard(&d->train, d->cfg.shard_index, d->cfg.shard_count, &d->cfg.partition,
	    d->cfg.seed, &d->shard, &d->shard_n, &why);
	if (rc < 0)
		return errbuf_set(err, rc, "shard: %s", why.msg);
	log_info("data: %zu training samples in shard %u/%u, %zu test samples", d->shard_n,
	    d->cfg.shard_index, d->cfg.shard_count, d->test.n);
	return 0;
}

/* With --resume, continue from the newest checkpoint; none is no error. */
static int
daemon_resume(struct daemon *d, uint64_t *step, struct errbuf *err)
{
	struct ckpt_state st;
	struct errbuf why = { "" };
	char path[4096], want[128], have[128];
	int rc;

	*step = 0;
	if (!d->cfg.resume)
		return 0;
	rc = ckpt_find_latest(d->cfg.checkpoint_dir, path, sizeof(path), &why);
	if (rc == -ENOENT) {
		log_info("resume: no checkpoint in %s, starting fresh", d->cfg.checkpoint_dir);
		return 0;
	}
	if (rc < 0)
		return errbuf_set(err, rc, "resume: %s", why.msg);
	if ((rc = ckpt_load(path, &st, &why)) < 0)
		return errbuf_set(err, rc, "resume: refusing the newest checkpoint: %s", why.msg);
	if (!model_spec_equal(&st.spec, &d->model->spec)) {
		model_spec_format(&st.spec, have, sizeof(have));
		model_spec_format(&d->model->spec, want, sizeof(want));
		rc = errbuf_set(err, -EINVAL, "resume: refusing %s: it holds model %s, not %s",
		    path, have, want);
		goto out;
	}
	if (st.seed != d->cfg.seed) {
		rc = errbuf_set(err, -EINVAL,
		    "resume: refusing %s: it was made with seed %" PRIu64 ", not %" PRIu64,
		    path, st.seed, d->cfg.seed);
		goto out;
	}
	if ((rc = model_restore(d->model, st.x, st.v)) < 0) {
		rc = errbuf_set(err, rc, "resume: cannot load parameters: %s", strerror(-rc));
		goto out;
	}
	*step = st.step;
	log_info("resumed from %s at step %" PRIu64 ", epoch %u", path, st.step, st.epoch);
out:
	ckpt_state_free(&st);
	return rc;
}

static void
daemon_free(struct daemon *d)
{
	while (d->pending) {
		struct pending_ckpt *pc = d->pending;

		d->pending = pc->next;
		free(pc);
	}
	train_free(d->trainer);
	bootstrap_free(d->boot);
	gossip_free(d->gossip);
	select_free(d->select);
	pace_free(d->pace);
	free(d->info);
	free(d->addrs);
	model_free(d->model);
	free(d->shard);
	data_free(&d->train);
	data_free(&d->test);
	config_free(&d->cfg);
}

/*
 * libinfinipath, which libfabric's psm provider pulls in, installs handlers
 * from its constructor for SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and
 * SIGTERM that print a backtrace and call exit(1) inside the handler. A
 * crash then looks like a runtime error (exit 1) and leaves no core, and a
 * SIGTERM before the loop's own handler exists runs exit() at an arbitrary
 * point (seen: the peer trained on). SIGTERM and SIGINT are ours: default
 * until the loop handles them. The crash signals get their default action
 * back only where that library holds them, so a sanitizer's stay.
 */
static void
daemon_reclaim_signals(void)
{
	static const int crash[] = { SIGSEGV, SIGBUS, SIGILL, SIGABRT };
	struct sigaction sa;
	Dl_info info;
	size_t i;

	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	for (i = 0; i < sizeof(crash) / sizeof(crash[0]); i++) {
		if (sigaction(crash[i], NULL, &sa) != 0 ||
		    !(sa.sa_flags & SA_SIGINFO))
			continue;
		if (dladdr((void *)(uintptr_t)sa.sa_sigaction, &info) != 0 &&
		    info.dli_fname != NULL &&
		    strstr(info.dli_fname, "libinfinipath") != NULL)
			signal(crash[i], SIG_DFL);
	}
}

int
main(int argc, char **argv)
{
	struct daemon d;
	struct errbuf err = { "" };
	enum log_level level;
	uint64_t start_step;
	int rc, code;

	daemon_reclaim_signals();
	memset(&d, 0, sizeof(d));
	d.exit_code = 0;
	rc = config_load(&d.cfg, argc, argv, &err);
	if (rc == 1) {
		config_free(&d.cfg);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "gossipd: %s\n", err.msg);
		config_free(&d.cfg);
		return EXIT_USAGE;
	}
	if (log_level_parse(d.cfg.log_level, &level) == 0)
		log_set_level(level);
	daemon_absolute(&d.cfg.data_dir);
	daemon_absolute(&d.cfg.checkpoint_dir);
	daemon_absolute(&d.cfg.control);
	daemon_absolute(&d.cfg.log_file);
	daemon_absolute(&d.cfg.key_file);
	if (daemon_open_log(&d.cfg) < 0) {
		config_free(&d.cfg);
		return EXIT_USAGE;
	}
	if (!d.cfg.foreground && (rc = daemon_detach(&d.cfg)) < 0) {
		log_error("cannot detach: %s", strerror(-rc));
		config_free(&d.cfg);
		return EXIT_RUNTIME;
	}
	if (sodium_init() < 0) {
		log_error("libsodium failed to initialise");
		config_free(&d.cfg);
		return EXIT_RUNTIME;
	}
	signal(SIGPIPE, SIG_IGN);
	randombytes_buf(&d.id, sizeof(d.id));

	if ((rc = daemon_load_data(&d, &err)) < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_USAGE;
	}
	rc = model_new(&d.cfg.model, d.cfg.device, d.cfg.threads, d.cfg.batch_size, d.cfg.seed,
	    &d.model, &err);
	if (rc < 0) {
		log_error("device %s: %s", d.cfg.device, err.msg);
		daemon_free(&d);
		return EXIT_RUNTIME;
	}
	if (mask_check(d.model->d, d.cfg.density, (size_t)d.cfg.mask_block, &err) < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_USAGE;
	}
	if ((rc = daemon_resume(&d, &start_step, &err)) < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_RUNTIME;
	}

	d.loop = uv_default_loop();
	/* Before the control socket appears: whoever sees the socket may
	 * signal us, and a signal must then mean a clean leave, never the
	 * default death that leaves the socket file behind. It is handled
	 * once the loop runs, when everything below exists. */
	uv_signal_init(d.loop, &d.sigterm);
	uv_signal_init(d.loop, &d.sigint);
	d.sigterm.data = d.sigint.data = &d;
	uv_signal_start(&d.sigterm, daemon_signal, SIGTERM);
	uv_signal_start(&d.sigint, daemon_signal, SIGINT);
	rc = control_open(d.loop, d.cfg.control, daemon_command, &d, &d.control, &err);
	if (rc < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_RUNTIME;
	}
	d.must_pull = d.cfg.join != NULL && start_step == 0;
	if (daemon_open_transport(&d, &code, &err) < 0) {
		log_error("%s", err.msg);
		control_close(d.control);
		uv_close((uv_handle_t *)&d.sigterm, NULL);
		uv_close((uv_handle_t *)&d.sigint, NULL);
		uv_run(d.loop, UV_RUN_DEFAULT);
		uv_loop_close(d.loop);
		daemon_free(&d);
		return code;
	}
	uv_async_init(d.loop, &d.wake, daemon_wake);
	d.wake.data = &d;
	uv_async_init(d.loop, &d.step_async, daemon_step);
	d.step_async.data = &d;

	if (d.must_pull)
		log_info("joining through %s: the model comes from donors before training",
		    d.cfg.join);
	else
		daemon_start_training(&d, start_step);

	uv_run(d.loop, UV_RUN_DEFAULT);
	uv_loop_close(d.loop);
	rc = d.exit_code;
	daemon_free(&d);
	return rc;
}
