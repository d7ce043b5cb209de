/*
 * main: the gossipd daemon. It wires the modules together and owns the
 * process: configuration, daemonising, signals, the libuv loop on the main
 * thread, the trainer thread, and the control commands. The loop thread
 * does all I/O and never trains; the trainer never does I/O other than
 * checkpoint files. They meet only through the model lock, the trainer's
 * progress record and a uv_async wake-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "ckpt.h"
#include "config.h"
#include "control.h"
#include "data.h"
#include "gossipd/control.h"
#include "log.h"
#include "model.h"
#include "session.h"
#include "train.h"
#include "transport.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

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
	uv_async_t wake;
	uv_signal_t sigterm, sigint;
	struct pending_ckpt *pending;
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

static json_t *
daemon_status(struct daemon *d)
{
	struct train_progress p;
	uint64_t sent = 0, received = 0;
	char id[17];

	train_get_progress(d->trainer, &p);
	snprintf(id, sizeof(id), "%016" PRIx64, d->id);
	if (d->transport != NULL) {
		sent = transport_bytes_sent(d->transport);
		received = transport_bytes_received(d->transport);
	}
	return json_pack("{s:b, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I,"
	    " s:f, s:f, s:i, s:I, s:I, s:I}",
	    "ok", 1, "id", id, "job", d->cfg.job, "state", state_name(p.state),
	    "step", (json_int_t)p.step, "total_steps", (json_int_t)p.total_steps,
	    "epoch", (json_int_t)p.epoch, "lr", p.lr, "loss", p.loss,
	    "accuracy", p.accuracy, "test_loss", p.test_loss,
	    "eval_step", (json_int_t)p.eval_step, "samples_per_s", p.samples_per_s,
	    "elapsed", p.elapsed, "members", 1, "bytes_sent", (json_int_t)sent,
	    "bytes_received", (json_int_t)received, "exchanges", (json_int_t)0);
}

static json_t *
daemon_stats(struct daemon *d)
{
	struct train_progress p;
	json_t *stats, *net;

	train_get_progress(d->trainer, &p);
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
	return stats;
}

static void daemon_shutdown(struct daemon *d);

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
		if (d->stopping) {
			*reply = control_error("peer is leaving; its final checkpoint is on the way");
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
		train_request_stop(d->trainer);
	} else if (strcmp(cmd, GD_CMD_SET) == 0) {
		const char *key = json_string_value(json_object_get(req, "key"));
		const char *value = json_string_value(json_object_get(req, "value"));
		struct errbuf err = { "" };
		enum log_level l;

		if (key == NULL || value == NULL) {
			*reply = control_error("set needs \"key\" and \"value\" strings");
		} else if (config_set(&d->cfg, key, value, &err) < 0) {
			*reply = control_error("%s", err.msg);
		} else {
			if (log_level_parse(d->cfg.log_level, &l) == 0)
				log_set_level(l);
			log_info("set %s = %s", key, value);
			*reply = json_pack("{s:b, s:s, s:s}", "ok", 1, "key", key, "value", value);
		}
	} else {
		*reply = control_error("unknown command '%s' (try status, stats, watch, "
		    "checkpoint, leave, set)", cmd);
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
	if (p.state == TRAIN_DONE || p.state == TRAIN_FAILED) {
		if (p.state == TRAIN_FAILED) {
			log_error("training failed: %s", p.error);
			d->exit_code = EXIT_RUNTIME;
		} else {
			log_info("done: %" PRIu64 " steps in %.1f s, test accuracy %.4f, loss %.4f",
			    p.step, p.elapsed, p.accuracy, p.test_loss);
		}
		daemon_answer_checkpoints(d, &p, 1);
		daemon_shutdown(d);
	}
}

/* No application speaks over the transport yet: membership and gossip
 * register their message types here when they land. */
static void
daemon_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *payload, size_t len)
{
	(void)arg;
	(void)payload;
	log_debug("message type %u of %zu bytes from %016" PRIx64 " at %s: no handler",
	    type, len, sender, addr);
}

static void
daemon_peer_down(void *arg, const char *addr, uint64_t id, int status)
{
	(void)arg;
	log_info("peer %016" PRIx64 " at %s unreachable: %s", id, addr, strerror(-status));
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
	return 0;
}

static void
daemon_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	log_info("%s: leaving", strsignal(signum));
	train_request_stop(d->trainer);
}

static void
daemon_shutdown(struct daemon *d)
{
	if (d->stopping)
		return;
	d->stopping = 1;
	if (d->trainer != NULL)
		train_request_stop(d->trainer);
	control_close(d->control);
	if (d->transport != NULL) {
		transport_close(d->transport, NULL, NULL);
		d->transport = NULL;
	}
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
	model_free(d->model);
	free(d->shard);
	data_free(&d->train);
	data_free(&d->test);
	config_free(&d->cfg);
}

int
main(int argc, char **argv)
{
	struct daemon d;
	struct errbuf err = { "" };
	enum log_level level;
	uint64_t start_step;
	int rc, code;

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
	if ((rc = daemon_resume(&d, &start_step, &err)) < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_RUNTIME;
	}

	d.loop = uv_default_loop();
	rc = control_open(d.loop, d.cfg.control, daemon_command, &d, &d.control, &err);
	if (rc < 0) {
		log_error("%s", err.msg);
		daemon_free(&d);
		return EXIT_RUNTIME;
	}
	if (daemon_open_transport(&d, &code, &err) < 0) {
		log_error("%s", err.msg);
		control_close(d.control);
		uv_run(d.loop, UV_RUN_DEFAULT);
		uv_loop_close(d.loop);
		daemon_free(&d);
		return code;
	}
	uv_async_init(d.loop, &d.wake, daemon_wake);
	d.wake.data = &d;
	uv_signal_init(d.loop, &d.sigterm);
	uv_signal_init(d.loop, &d.sigint);
	d.sigterm.data = d.sigint.data = &d;
	uv_signal_start(&d.sigterm, daemon_signal, SIGTERM);
	uv_signal_start(&d.sigint, daemon_signal, SIGINT);

	rc = train_new(&d.cfg, d.model, &d.train, d.shard, d.shard_n, &d.test, start_step,
	    daemon_notify, &d, &d.trainer, &err);
	if (rc == 0)
		rc = train_start(d.trainer, &err);
	if (rc < 0) {
		log_error("%s", err.msg);
		d.exit_code = EXIT_USAGE;
		daemon_shutdown(&d);
	} else {
		log_info("peer %016" PRIx64 " training %s on %s, control socket %s", d.id,
		    d.cfg.job, d.cfg.device, d.cfg.control);
	}

	uv_run(d.loop, UV_RUN_DEFAULT);
	uv_loop_close(d.loop);
	rc = d.exit_code;
	daemon_free(&d);
	return rc;
}
