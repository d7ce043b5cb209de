/*
 * commands: what the control socket's commands do. One table, built from
 * GD_COMMANDS in include/gossipd/control.h (the protocol's list, which
 * gossipctl reads too), maps each name to its handler here; the table also
 * checks a request's arguments and names the commands in the error for an
 * unknown one. The views (status, stats, peers, metrics) are JSON built
 * from the modules' own counters. A checkpoint request is answered later,
 * when the trainer has written it: those wait in d->pending.
 */
#ifndef GD_COMMANDS_H
#define GD_COMMANDS_H

#include <stdint.h>

#include <jansson.h>

#include "control.h"
#include "daemon.h"

/* The control socket's handler; arg is the daemon. */
int commands_handle(struct control *ctl, uint64_t client, const char *cmd, json_t *req,
    json_t **reply, void *arg);
/* What status calls the peer's state: training, joining, waiting, ... */
const char *commands_state(struct daemon *d, const struct train_progress *p);
/* The status object, as `status` replies and `watch` streams it. */
json_t *commands_status(struct daemon *d);
/* The Prometheus exposition of status, stats and peers (metrics.h), a
 * malloc'd text or NULL; arg is the daemon (an httpd_render_fn). */
char *commands_metrics(void *arg);
/* Answer the checkpoint requests the trainer has written by now (all of
 * them, as failed if not written, when final). */
void commands_answer_checkpoints(struct daemon *d, const struct train_progress *p,
    int final);
void commands_pending_free(struct daemon *d);

#endif
