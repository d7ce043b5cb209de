/*
 * daemon: one running peer's state (struct daemon) and how it moves:
 * training starts, the peer leaves, the process exits. struct daemon is
 * the only place that holds every module; the files that act on a whole
 * peer share it, layered so that none includes a file above it:
 * server.c (assembles the peer, connects every callback), commands.c
 * (the control commands), rounds.c (when and with whom to exchange, the
 * joiner's pull), and this file at the bottom. No other module sees it:
 * they get ops tables and plain values. Everything here runs on the loop
 * thread except the trainer hooks, which say so.
 */
#ifndef GD_DAEMON_H
#define GD_DAEMON_H

#include <stdint.h>

#include <uv.h>

#include "closing.h"
#include "config.h"
#include "data.h"
#include "proto.h"
#include "trainer.h"
#include "util.h"

#define DAEMON_EXIT_RUNTIME 1
#define DAEMON_EXIT_USAGE 2

struct daemon {
	struct config cfg;
	uv_loop_t *loop;
	uint64_t id;
	struct data_set train, test;
	size_t *shard, shard_n;
	struct model *model;
	struct trainer *trainer;       /* built-in or external (--trainer) */
	struct control *control;
	struct httpd *httpd;           /* the /metrics listener, with --metrics-listen */
	struct transport *transport;   /* NULL without --listen */
	struct member *member;         /* NULL without --listen */
	uv_timer_t member_timer;
	uv_timer_cb on_member_timer;   /* server's: what a membership deadline runs */
	struct gossip *gossip;         /* NULL without --listen */
	struct select *select;
	struct pull *pull;             /* model pull, both sides; with gossip */
	uv_timer_t gossip_timer;       /* exchange and pull deadlines */
	uv_async_t step_async;         /* the trainer finished a step */
	struct pace *pace;             /* holds the trainer back (lag); with gossip */
	struct closing closing;        /* the closing phase, once the budget is spent */
	uv_timer_t close_timer;        /* its next exchange, or its timeout */
	uint64_t round_step;           /* step at which the last round began */
	int busy_retries;              /* partners that answered BUSY this round */
	struct member_info *info;      /* scratch for member lists */
	const char **addrs;
	size_t info_cap;
	uv_async_t wake;
	uv_signal_t sigterm, sigint;
	struct commands_pending *pending;
	int trained;                   /* the trainer reported DONE or FAILED */
	int must_pull;                 /* a joiner without a checkpoint: pull first */
	int leaving;                   /* leave requested or budget spent */
	int stopping;
	int exit_code;
};

/* The trainer's progress; zeros while a joiner still pulls the model. */
void daemon_progress(struct daemon *d, struct train_progress *p);
/* Every protocol's send: through the transport while it is open. */
int daemon_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg);
/* The trainer has news (progress, a checkpoint, its end): wakes the loop.
 * Thread-safe: the trainer thread calls it, and the external trainer. */
void daemon_notify(void *arg);
/* Trainer thread: a step was taken; waits while pace holds it (lag). */
void daemon_notify_step(void *arg, uint64_t step);
/* Start the trainer from start_step; a failure ends the peer. */
void daemon_start_training(struct daemon *d, uint64_t start_step);
/* The training budget is spent and the closing phase, if any, is over:
 * linger (--linger) or leave. */
void daemon_after_training(struct daemon *d);
/* End the closing phase for `why`: the final checkpoint now holds the
 * model as closing left it; then linger or leave, unless leaving already. */
void daemon_end_closing(struct daemon *d, enum closing_reason why);
/* Announce `left`, stop the trainer, exit once both are through; a
 * closing phase ends at once. */
void daemon_begin_leave(struct daemon *d, const char *why);
/* Exit (daemon_shutdown) if leaving, trained and the leave went out. */
void daemon_maybe_exit(struct daemon *d);
/* Stop the trainer and close every handle, so that the loop runs out. */
void daemon_shutdown(struct daemon *d);
/* Re-arm the membership timer after its deadlines may have moved. */
void daemon_member_schedule(struct daemon *d);

#endif
