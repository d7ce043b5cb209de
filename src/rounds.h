/*
 * rounds: when a peer exchanges and with whom, and how a joiner gets its
 * model. A round starts every `interval` trainer steps, with a partner the
 * select policy picks among the live members; a partner that answers BUSY
 * is replaced by another (twice at most) within the same round; with
 * `lag`, the trainer waits for the round begun lag rounds ago (pace). A
 * joiner without a checkpoint pulls the model from donors before it
 * trains. Once the trainer's budget is spent, the closing phase starts
 * exchanges back to back (closing.h). The exchange itself is gossip's,
 * the link figures select's: this
 * file is only the policy that joins them to the daemon's timers.
 */
#ifndef GD_ROUNDS_H
#define GD_ROUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon.h"

/* Gossip, select, pace and the model pull for a peer with a transport,
 * and their message types registered with it; their deadlines arm
 * d->gossip_timer (server.c owns the loop's handles). */
int rounds_open(struct daemon *d, struct errbuf *err);
/* Gossip lives on until the transport has failed the sends in flight
 * that point into it. */
void rounds_free(struct daemon *d);

/* Hand runtime-tunable gossip keys to the running modules. */
void rounds_apply_params(struct daemon *d);
/* The trainer took a step: start a round if one is due. */
void rounds_on_step(struct daemon *d);
/* A peer became unreachable: a donor of the running pull may be gone. */
void rounds_peer_down(struct daemon *d, const char *addr);
/* Membership moved: a joiner may now know enough donors. */
void rounds_maybe_pull(struct daemon *d);
/* The built-in trainer's budget is spent: enter the closing phase
 * (closing.h) and return 1, or 0 when this peer has none (close_budget
 * 0, no gossip, an external trainer, leaving). It ends in
 * daemon_end_closing. */
int rounds_close_begin(struct daemon *d);

#endif
