/*
 * server: one peer assembled (server.h). It opens the modules in order,
 * connects every callback (the transport's, membership's, the trainer's
 * wake-ups, signals) to what should follow, and frees it all. The
 * daemon's libuv handles are all created first thing in server_open, so
 * that whatever fails later, daemon_shutdown closes the same set and the
 * loop runs out. This is the one file that sees every part of a peer:
 * the commands (commands.c), the exchange policy (rounds.c) and the
 * peer's state (daemon.c) see only what is below them.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "attach.h"
#include "ckpt.h"
#include "commands.h"
#include "control.h"
#include "gossip.h"
#include "httpd.h"
#include "log.h"
#include "member.h"
#include "model.h"
#include "origin.h"
#include "pace.h"
#include "pull.h"
#include "rounds.h"
#include "share.h"
#include "server.h"
#include "service.h"
#include "session.h"
#include "transport.h"

static void
server_signal(uv_signal_t *h, int signum)
{
	daemon_begin_leave(h->data, strsignal(signum));
}

/* Stopped and continued (a debugger, an operator, a soak's SIGSTOP). */
static void
server_continued(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	(void)signum;
	log_info("continued after a stop");
	rounds_resumed(d->rounds, util_now());
}

/* Runs on the loop thread whenever the trainer has news. */
static void
server_wake(uv_async_t *h)
{
	struct daemon *d = h->data;
	struct train_progress p;

	if (!trainer_active(d->trainer))
		return;
	daemon_progress(d, &p);
	commands_answer_checkpoints(d, &p, 0);
	if (p.state == TRAIN_TRAINING && !daemon_leaving(d))
		service_progress(commands_state(d, &p), &p);
	if (control_watchers(d->control) > 0) {
		json_t *msg = commands_status(d);

		json_object_del(msg, "ok");
		json_object_set_new(msg, "event", json_string("progress"));
		control_broadcast(d->control, msg);
		json_decref(msg);
	}
	if ((p.state == TRAIN_DONE || p.state == TRAIN_FAILED) && !d->trained) {
		d->trained = 1;
		if (p.state == TRAIN_FAILED) {
			log_error("training failed: %s", p.error);
			d->exit_code = DAEMON_EXIT_RUNTIME;
		} else {
			log_info("done: %" PRIu64 " steps in %.1f s, test accuracy %.4f, loss %.4f",
			    p.step, p.elapsed, p.accuracy, p.test_loss);
		}
		commands_answer_checkpoints(d, &p, 1);
		if (p.state == TRAIN_DONE)
			daemon_trained(d);
		else
			daemon_after_training(d);
	}
	daemon_maybe_exit(d);
}

static void
server_step(uv_async_t *h)
{
	struct daemon *d = h->data;

	rounds_on_step(d->rounds, util_now());
}

static void
server_member_timer(uv_timer_t *h)
{
	struct daemon *d = h->data;

	if (d->member == NULL)
		return;
	member_tick(d->member, util_now());
	daemon_member_schedule(d);
	rounds_members_changed(d->rounds, util_now());
	daemon_maybe_exit(d);
}

static void
server_member_change(void *arg, const char *addr, uint64_t id, enum member_state old,
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
	if (now != MEMBER_ALIVE)
		rounds_partner_gone(d->rounds, util_now(), addr);
	if (control_watchers(d->control) > 0) {
		json_t *msg = json_pack("{s:s, s:s, s:s, s:s, s:s}", "event", "member",
		    "addr", addr, "id", hex, "state", member_state_name(now),
		    "was", old == now ? "unknown" : member_state_name(old));

		control_broadcast(d->control, msg);
		json_decref(msg);
	}
}

/* A membership message (member_proto's range). */
static void
server_member_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	struct daemon *d = arg;

	if (d->member == NULL)
		return;
	member_recv(d->member, util_now(), sender, addr, type, payload, len);
	daemon_member_schedule(d);
	rounds_members_changed(d->rounds, util_now());
}

static void
server_peer_down(void *arg, const char *addr, uint64_t id, int status)
{
	struct daemon *d = arg;

	log_info("peer %016" PRIx64 " at %s unreachable: %s", id, addr, strerror(-status));
	if (d->member != NULL) {
		member_peer_down(d->member, util_now(), addr);
		daemon_member_schedule(d);
	}
	rounds_peer_down(d->rounds, util_now(), addr);
}

/* rounds' calls into the peer (rounds.h). */
static void
server_rounds_probe(void *arg, double now, const char *addr)
{
	struct daemon *d = arg;

	if (d->member != NULL && member_probe(d->member, now, addr) == 0)
		daemon_member_schedule(d);
}

static void
server_rounds_progress(void *arg, struct train_progress *p)
{
	daemon_progress(arg, p);
}

static size_t
server_rounds_live(void *arg, char (*out)[WIRE_ADDR_MAX + 1], size_t max)
{
	struct daemon *d = arg;

	return d->member != NULL ? member_live(d->member, out, max) : 0;
}

static uint64_t
server_rounds_bytes_sent(void *arg)
{
	struct daemon *d = arg;

	return d->transport != NULL ? transport_bytes_sent(d->transport) : 0;
}

static void
server_rounds_released(void *arg)
{
	struct daemon *d = arg;

	trainer_resume(d->trainer);
}

static void
server_rounds_pulled(void *arg, uint64_t step, int own)
{
	daemon_start_training(arg, step, own);
}

static int
server_rounds_catch_up(void *arg, uint64_t step)
{
	struct daemon *d = arg;

	return trainer_catch_up(d->trainer, step);
}

static void
server_rounds_timer(uv_timer_t *h)
{
	struct daemon *d = h->data;

	if (d->rounds != NULL)
		rounds_timer(d->rounds, util_now());
}

static void
server_rounds_schedule(void *arg, double at)
{
	struct daemon *d = arg;
	double now = util_now();

	if (d->state == PEER_STOPPED)
		return;
	if (at < 0)
		uv_timer_stop(&d->rounds_timer);
	else
		util_timer_at(&d->rounds_timer, server_rounds_timer, at, now);
}

/* Messages of the protocols rounds runs: gossip_proto's, pull_proto's and
 * share_proto's. */
static void
server_rounds_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	struct daemon *d = arg;

	(void)sender;
	rounds_recv(d->rounds, util_now(), addr, type, payload, len);
}

static int
server_open_rounds(struct daemon *d, struct errbuf *err)
{
	struct rounds_ops ops = { daemon_send, server_rounds_progress, server_rounds_live,
	    server_rounds_bytes_sent, server_rounds_released, server_rounds_pulled,
	    daemon_end_closing, server_rounds_schedule, daemon_no_job, server_rounds_catch_up,
	    server_rounds_probe, d };
	int rc;

	if ((rc = rounds_new(&d->cfg, d->model, d->state == PEER_JOINING, &ops, &d->rounds,
	    err)) < 0 ||
	    (rc = transport_register(d->transport, &gossip_proto, server_rounds_recv, d,
	    err)) < 0 ||
	    (rc = transport_register(d->transport, &share_proto, server_rounds_recv, d,
	    err)) < 0)
		return rc;
	return transport_register(d->transport, &pull_proto, server_rounds_recv, d, err);
}

static int
server_open_member(struct daemon *d, struct errbuf *err)
{
	struct member_ops ops = { daemon_send, server_member_change, d };
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
	if ((rc = member_new(&mp, &ops, util_now(), &d->member, err)) < 0 ||
	    (rc = transport_register(d->transport, &member_proto, server_member_recv, d,
	    err)) < 0)
		return rc;
	for (size_t i = 0; i < d->cfg.npeers; i++) {
		if ((rc = member_add_seed(d->member, d->cfg.peer_list[i], util_now())) < 0)
			return errbuf_set(err, rc, "peers: cannot use '%s': %s",
			    d->cfg.peer_list[i], strerror(-rc));
	}
	if (d->cfg.join != NULL && (rc = member_add_seed(d->member, d->cfg.join,
	    util_now())) < 0)
		return errbuf_set(err, rc, "join: cannot use '%s'", d->cfg.join);
	daemon_member_schedule(d);
	return 0;
}

/* Key errors are configuration errors (exit 2); an endpoint that cannot
 * open is a runtime failure (exit 1). */
static int
server_open_transport(struct daemon *d, struct errbuf *err)
{
	struct transport_params tp;
	struct errbuf why = { "" };
	uint8_t key[SESSION_KEY_SIZE];
	int rc;

	if (d->cfg.listen == NULL)
		return 0;
	if ((rc = session_key_load(d->cfg.key_file, key, &why)) < 0) {
		d->exit_code = DAEMON_EXIT_USAGE;
		return errbuf_set(err, rc, "key_file: %s", why.msg);
	}
	memset(&tp, 0, sizeof(tp));
	tp.listen = d->cfg.listen;
	tp.provider = d->cfg.provider;
	tp.key = key;
	tp.job = d->cfg.job;
	tp.self_id = d->id;
	tp.max_message_size = d->cfg.max_message_size;
	rc = transport_open(d->loop, &tp, server_peer_down, d, &d->transport, &why);
	sodium_memzero(key, sizeof(key));
	if (rc < 0) {
		d->exit_code = DAEMON_EXIT_RUNTIME;
		return errbuf_set(err, rc, "listen %s (provider %s): %s", d->cfg.listen,
		    d->cfg.provider, why.msg);
	}
	log_info("fabric endpoint on %s (provider %s)", d->cfg.listen, d->cfg.provider);
	if ((rc = server_open_member(d, &why)) < 0 || (rc = server_open_rounds(d, &why)) < 0) {
		d->exit_code = DAEMON_EXIT_USAGE;
		return errbuf_set(err, rc, "%s", why.msg);
	}
	return 0;
}

/* The built-in trainer's model starts as a pure function of its spec and
 * the job's seed (model.h), so a peer that starts past step 0, resumed or
 * pulled by a joiner, keeps that start as it is made, for trust to judge
 * the members' ways from (gossip.c) as the peers that started with the job
 * do. A peer given another seed than its job's regenerates another start,
 * from which every way looks alike: it judges no member behind, and no
 * worse. One without --listen has nobody to judge, and one with neither
 * --join nor --resume starts at step 0, where the model at ready is the
 * origin (gossip.c). */
static void
server_builtin_start(struct daemon *d)
{
	struct model_range whole = { 0, d->model->d };

	if (d->cfg.listen == NULL || (d->cfg.join == NULL && !d->cfg.resume) ||
	    d->model->d == 0 || (d->start_x = malloc(d->model->d * sizeof(float))) == NULL)
		return;
	if (model_gather(d->model, &whole, 1, d->start_x) < 0) {
		free(d->start_x);
		d->start_x = NULL;
		return;
	}
	d->start_regen = 1;
}

/* The built-in trainer: its data, its model, the trainer thread (not yet
 * started). Data and a model that does not fit it are usage errors, a
 * device that fails a runtime one. */
static int
server_open_builtin(struct daemon *d, struct errbuf *err)
{
	struct train_hooks hooks = { daemon_notify, daemon_notify_step, d };
	struct data_set train = { 0 }, test = { 0 };
	struct errbuf why = { "" };
	size_t *shard = NULL, n = 0;
	struct train *t;
	int rc;

	d->exit_code = DAEMON_EXIT_USAGE;
	if ((rc = data_load(d->cfg.data_dir, "train", &train, &why)) < 0 ||
	    (rc = data_load(d->cfg.data_dir, "t10k", &test, &why)) < 0) {
		rc = errbuf_set(err, rc, "data: %s", why.msg);
		goto fail;
	}
	if (train.dim != (size_t)d->cfg.model.sizes[0]) {
		rc = errbuf_set(err, -EINVAL, "model: %d inputs but the data has %zu features",
		    d->cfg.model.sizes[0], train.dim);
		goto fail;
	}
	if ((rc = data_shard(&train, d->cfg.shard_index, d->cfg.shard_count, &d->cfg.partition,
	    d->cfg.seed, &shard, &n, &why)) < 0) {
		rc = errbuf_set(err, rc, "shard: %s", why.msg);
		goto fail;
	}
	log_info("data: %zu training samples in shard %u/%u, %zu test samples", n,
	    d->cfg.shard_index, d->cfg.shard_count, test.n);
	if ((rc = model_new(&d->cfg.model, d->cfg.device, d->cfg.threads, d->cfg.batch_size,
	    d->cfg.seed, &d->model, &why)) < 0) {
		d->exit_code = DAEMON_EXIT_RUNTIME;
		rc = errbuf_set(err, rc, "device %s: %s", d->cfg.device, why.msg);
		goto fail;
	}
	server_builtin_start(d);
	/* From here the data are the trainer's, whatever happens. */
	if ((rc = train_new(&d->cfg, d->model, &train, &test, shard, n, &hooks, &t, err)) < 0)
		return rc;
	d->trainer = trainer_new(&train_ops, t);
	d->exit_code = 0;
	return 0;
fail:
	free(shard);
	data_free(&train);
	data_free(&test);
	return rc;
}

/* A resumed peer judges ways from the job's start if it kept it (origin.h),
 * or has it regenerated (server_builtin_start); one without --listen has
 * nobody to judge. */
static void
server_resume_start(struct daemon *d)
{
	struct errbuf why = { "" };
	float *kept = NULL;
	int rc;

	if (d->cfg.listen == NULL)
		return;
	rc = origin_load(d->cfg.checkpoint_dir, &d->model->spec, d->model->d, d->cfg.seed,
	    &kept, &why);
	if (rc == 0) {
		free(d->start_x);
		d->start_x = kept;
		d->start_regen = 0;
		log_info("resume: the job's start model is kept in %s: trust judges the "
		    "members' ways from it", d->cfg.checkpoint_dir);
	} else if (d->start_x != NULL) {
		/* regenerated: daemon_start_training says so */
		if (rc != -ENOENT)
			log_warn("resume: %s", why.msg);
	} else if (rc == -ENOENT)
		log_info("resume: no start model kept in %s (this peer joined the job, or its "
		    "checkpoints are older): trust judges no ways", d->cfg.checkpoint_dir);
	else
		log_warn("resume: %s: trust judges no ways", why.msg);
}

/* With --resume, continue from the newest checkpoint; none is no error.
 * Whether or not, what a killed save left in the directory goes first. */
static int
server_resume(struct daemon *d, uint64_t *step, struct errbuf *err)
{
	struct ckpt_state st;
	struct errbuf why = { "" };
	char path[4096];
	int rc;

	*step = 0;
	if (d->cfg.checkpoint_dir != NULL && ckpt_clean(d->cfg.checkpoint_dir, &why) < 0)
		log_warn("checkpoint: stale temporary files stay: %s", why.msg);
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
	if (st.seed != d->cfg.seed) {
		rc = errbuf_set(err, -EINVAL,
		    "resume: refusing %s: it was made with seed %" PRIu64 ", not %" PRIu64,
		    path, st.seed, d->cfg.seed);
		goto out;
	}
	/* The start model kept here stays this job's: an attached trainer's
	 * load makes the peer ready, and its model is not the start. */
	d->start_kept = 1;
	if ((rc = trainer_load(d->trainer, &st, &why)) < 0) {
		rc = errbuf_set(err, rc, "resume: refusing %s: %s", path, why.msg);
		goto out;
	}
	*step = st.step;
	log_info("resumed from %s at step %" PRIu64 ", epoch %u", path, st.step, st.epoch);
	server_resume_start(d);
out:
	ckpt_state_free(&st);
	return rc;
}

_Static_assert(ATTACH_DIGEST_BYTES == PULL_DIGEST_BYTES, "the attach digest is the pull's");

/* The external trainer's calls (attach.h), on the loop thread. */
static int
server_attach_bound(void *arg, size_t n, const uint8_t *digest)
{
	struct daemon *d = arg;

	d->cfg.shared_params = n;
	if (d->state != PEER_JOINING)
		return 0;
	if (digest != NULL)
		rounds_start_digest(d->rounds, digest);
	rounds_members_changed(d->rounds, util_now());
	return 1;
}

static void
server_attach_ready(void *arg)
{
	struct daemon *d = arg;

	rounds_set_ready(d->rounds, 1);
	daemon_keep_start(d);
}

static void
server_attach_step(void *arg, uint64_t step)
{
	struct daemon *d = arg;

	(void)step;
	rounds_on_step(d->rounds, util_now());
}

static int
server_attach_held(void *arg, uint64_t step)
{
	struct daemon *d = arg;

	struct pace *pace = rounds_pace(d->rounds);

	return pace != NULL && pace_holds(pace, step);
}

static void
server_attach_waited(void *arg, double seconds)
{
	struct daemon *d = arg;

	struct pace *pace = rounds_pace(d->rounds);

	if (pace != NULL)
		pace_waited(pace, seconds);
}

static void
server_attach_optimizer(void *arg, int kind)
{
	struct daemon *d = arg;

	rounds_set_optimizer(d->rounds, kind);
}

static int
server_attach_whole(void *arg, const struct model_range *w, size_t n, size_t params,
    struct errbuf *err)
{
	struct daemon *d = arg;

	return rounds_set_whole(d->rounds, w, n, params, err);
}

static int
server_attach_job_model(void *arg, float *out, size_t n)
{
	struct daemon *d = arg;

	return rounds_job_model(d->rounds, out, n);
}

static void
server_trainer_gone(struct control *ctl, uint64_t client, void *arg)
{
	struct daemon *d = arg;

	(void)ctl;
	trainer_gone(d->trainer, client);
}

/* With --trainer external: the attach side over the shared model. */
static int
server_open_attach(struct daemon *d, struct errbuf *err)
{
	struct attach_hooks hooks = { daemon_notify, server_attach_bound,
	    server_attach_ready, server_attach_step, server_attach_held, server_attach_waited,
	    server_attach_optimizer, server_attach_whole, server_attach_job_model, d };
	struct attach *a;
	int rc;

	if ((rc = attach_new(&d->cfg, d->model, d->control, d->loop, &hooks, &a, err)) < 0)
		return rc;
	d->trainer = trainer_new(&attach_ops, a);
	return 0;
}

/* Every handle the daemon will close, created before anything can fail. */
static void
server_init_handles(struct daemon *d)
{
	uv_timer_init(d->loop, &d->member_timer);
	uv_timer_init(d->loop, &d->rounds_timer);
	uv_async_init(d->loop, &d->wake, server_wake);
	uv_async_init(d->loop, &d->step_async, server_step);
	d->member_timer.data = d->rounds_timer.data = d;
	d->on_member_timer = server_member_timer;
	d->wake.data = d->step_async.data = d;
	for (size_t i = 0; i < GD_ARRAY_SIZE(d->signals); i++) {
		uv_signal_init(d->loop, &d->signals[i]);
		d->signals[i].data = d;
	}
}

/* Whether this peer agrees a fresh job's starting model with the others
 * (pull.h): its process will attach, no checkpoint gave it the model, and
 * it is a member of a job it does not join. */
static int
server_agrees(struct daemon *d)
{
	return d->cfg.trainer == TRAINER_EXTERNAL && d->cfg.start == START_AGREE &&
	    d->cfg.listen != NULL && d->cfg.join == NULL && trainer_no_model(d->trainer) != NULL;
}

int
server_open(struct daemon *d, uv_loop_t *loop, struct errbuf *err)
{
	uint64_t start_step;
	int agree, rc;

	d->loop = loop;
	server_init_handles(d);
	randombytes_buf(&d->id, sizeof(d->id));
	/* The one place that asks which kind of trainer the peer has (and
	 * below, where the attach side is made once control exists). */
	if (d->cfg.trainer == TRAINER_EXTERNAL) {
		if ((rc = model_new_shared(&d->model, err)) < 0)
			goto runtime;
	} else if ((rc = server_open_builtin(d, err)) < 0) {
		goto out;
	}
	/* Signals are ours from before the control socket appears: whoever
	 * sees the socket may signal us, and a signal must then mean a clean
	 * leave, never the default death that leaves the socket file behind.
	 * They are handled once the loop runs, when everything below exists.
	 * Until here they keep their default action (tests/daemon.sh). */
	uv_signal_start(&d->signals[0], server_signal, SIGTERM);
	uv_signal_start(&d->signals[1], server_signal, SIGINT);
	uv_signal_start(&d->signals[2], server_continued, SIGCONT);
	if ((rc = control_open(d->loop, d->cfg.control, commands_handle, d, &d->control,
	    err)) < 0)
		goto runtime;
	if (d->cfg.metrics_listen != NULL && (rc = httpd_open(d->loop, d->cfg.metrics_listen,
	    commands_metrics, d, &d->httpd, err)) < 0)
		goto runtime;
	if (d->cfg.trainer == TRAINER_EXTERNAL && (rc = server_open_attach(d, err)) < 0)
		goto runtime;
	control_on_gone(d->control, server_trainer_gone);
	/* Nothing is served before the loop runs: the socket may exist. */
	if ((rc = server_resume(d, &start_step, err)) < 0)
		goto runtime;
	/* A joiner without a checkpoint stays joining until its pull is in,
	 * and so does a fresh job's attached peer until its start is agreed. */
	agree = server_agrees(d);
	if ((d->cfg.join == NULL && !agree) || start_step > 0)
		daemon_set_state(d, PEER_TRAINING);
	if ((rc = server_open_transport(d, err)) < 0)
		goto out;
	if (agree) {
		rounds_agree(d->rounds, d->cfg.listen);
		log_info("peer %016" PRIx64 " waits for its training process to attach, then "
		    "for the job's starting model (start = agree), control socket %s", d->id,
		    d->cfg.control);
		service_status("waits for its training process, then the job's starting model");
	} else if (d->state == PEER_JOINING) {
		log_info("joining through %s: the model comes from donors before training",
		    d->cfg.join);
		service_status("joining through %s: pulling the model", d->cfg.join);
	} else {
		if (start_step > 0)
			rounds_catch_up(d->rounds);
		daemon_start_training(d, start_step, start_step == 0);
	}
	/* Ready before a joiner's pull, not after it: service.h says why.
	 * The socket listens; what connects is served once the loop runs,
	 * right after this. */
	if (d->state != PEER_STOPPED)
		service_ready();
	return 0;
runtime:
	d->exit_code = DAEMON_EXIT_RUNTIME;
out:
	daemon_shutdown(d);
	return rc;
}

void
server_free(struct daemon *d)
{
	commands_pending_free(d);
	free(d->start_x);
	trainer_free(d->trainer);
	rounds_free(d->rounds);
	model_free(d->model);
	config_free(&d->cfg);
}
