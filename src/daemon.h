/*
 * daemon: one running peer (struct daemon) and how it moves through its
 * states (enum peer_state): training starts, the closing phase, the peer
 * lingers or leaves, the process exits. struct daemon only wires the
 * modules together: each keeps its own state (the trainer, rounds for the
 * exchanges and the pull, membership, the transport). The files that act
 * on a whole peer share it, layered so that none includes a file above
 * it: server.c (assembles the peer, connects every callback), commands.c
 * (the control commands), and this file at the bottom. No other module
 * sees it: they get ops tables and plain values. Everything here runs on
 * the loop thread except the trainer hooks, which say so.
 */
#ifndef GD_DAEMON_H
#define GD_DAEMON_H

#include <stdint.h>

#include <uv.h>

#include "closing.h"
#include "config.h"
#include "proto.h"
#include "trainer.h"
#include "util.h"

#define DAEMON_EXIT_RUNTIME 1
#define DAEMON_EXIT_USAGE 2
/* A joiner found no live member to pull the model from (pull.h). */
#define DAEMON_EXIT_NO_JOB 3

/* Where a peer is in its life. Every change goes through daemon_set_state,
 * whose table says which moves exist; what status shows is derived from
 * it and the trainer's progress (commands_state). */
enum peer_state {
	PEER_JOINING,    /* the model comes from donors before training */
	PEER_TRAINING,   /* the trainer runs (an attached process may be away) */
	PEER_CLOSING,    /* budget spent: exchanging until the peers agree */
	PEER_LINGERING,  /* budget spent, still a member (--linger) */
	PEER_LEAVING,    /* announcing left, the trainer's final checkpoint */
	PEER_STOPPED,    /* handles closing: the loop runs out */
};

struct daemon {
	struct config cfg;
	uv_loop_t *loop;
	uint64_t id;
	enum peer_state state;
	struct model *model;
	struct trainer *trainer;       /* built-in or external (--trainer) */
	struct control *control;
	struct httpd *httpd;           /* the /metrics listener, with --metrics-listen */
	struct transport *transport;   /* NULL without --listen */
	struct member *member;         /* NULL without --listen */
	uv_timer_t member_timer;
	uv_timer_cb on_member_timer;   /* server's: what a membership deadline runs */
	struct rounds *rounds;         /* exchanges and the pull; NULL without --listen */
	uv_timer_t rounds_timer;       /* their next deadline */
	uv_async_t step_async;         /* the trainer finished a step */
	uv_async_t wake;
	uv_signal_t signals[3];        /* SIGTERM, SIGINT: leave; SIGCONT */
	struct commands_pending *pending;
	/* The job's start model for a peer that starts past step 0: the one a
	 * resume loaded (origin.h), or the built-in trainer's, regenerated
	 * (start_regen: server.c) */
	float *start_x;
	int start_regen;
	int start_kept;                /* this start's start model is settled (daemon_keep_start) */
	int trained;                   /* the trainer reported DONE or FAILED */
	int exit_code;
};

/* Move to state s; a move the table does not allow is logged and not
 * made. Returns 0 or -EINVAL. */
int daemon_set_state(struct daemon *d, enum peer_state s);
const char *daemon_state_name(enum peer_state s);
/* Leaving or stopped: the peer starts nothing new. */
int daemon_leaving(const struct daemon *d);

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
/* Start the trainer from start_step; fresh: from its own initial values
 * (trainer.h). A failure ends the peer. */
void daemon_start_training(struct daemon *d, uint64_t start_step, int fresh);
/* The model holds the job's parameters: keep the job's start model
 * beside the checkpoints, or remove a start kept there that is not this
 * peer's (origin.h). Once a start. */
void daemon_keep_start(struct daemon *d);
/* The training budget is spent and the closing phase, if any, is over:
 * linger (--linger) or leave. */
void daemon_after_training(struct daemon *d);
/* The trainer reported DONE: the closing phase, or linger or leave. */
void daemon_trained(struct daemon *d);
/* The closing phase ended for why (rounds' closed hook): the final
 * checkpoint now holds the model as closing left it; then linger or
 * leave, unless leaving already. */
void daemon_end_closing(void *arg, enum closing_reason why);
/* A joiner gave up finding a member to pull from (rounds' gave_up hook):
 * it leaves and exits DAEMON_EXIT_NO_JOB. */
void daemon_no_job(void *arg, const char *why);
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
