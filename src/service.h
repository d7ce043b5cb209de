/*
 * service: what the service manager that started this peer is told about
 * it, through sd_notify(3): READY=1 once the peer serves, STATUS= lines as
 * its state changes, STOPPING=1 when its leave begins. systemd's
 * Type=notify waits for READY=1 before it calls the unit started (and
 * starts what is ordered after it), shows the last STATUS= in `systemctl
 * status`, and knows from STOPPING=1 that the exit that follows is wanted.
 *
 * When is a peer ready? Once its control socket accepts connections and
 * its endpoint is open, i.e. once server_open has put every part in place
 * and the loop is about to run: a `gossipctl status` made then is
 * answered. A joiner (--join without a checkpoint) is ready before its
 * model pull, not after: it is a member from then on (it answers probes,
 * the others see it alive), its control socket shows the pull under way,
 * and the pull takes as long as the donors need, possibly longer than any
 * start timeout, so waiting for it would turn a slow pull into a failed
 * start and hold back whatever is ordered after the unit. The same holds
 * for an external trainer: its process attaches through the control
 * socket, so the peer must be ready before that process can start.
 *
 * Everything here is a no-op without NOTIFY_SOCKET (a peer started by
 * hand). A message that cannot be sent is logged once and otherwise
 * ignored: the manager's view of the peer is a courtesy that must never
 * stop training. Loop thread only.
 */
#ifndef GD_SERVICE_H
#define GD_SERVICE_H

#include "train.h"

/* READY=1: the peer serves. */
void service_ready(void);
/* STATUS=: one line on what the peer does now. */
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* STATUS= from the trainer's progress, the peer's state named by state
 * (as status names it). At most as often as progress is reported. */
void service_progress(const char *state, const struct train_progress *p);
/* STOPPING=1: the peer leaves, saying why. */
void service_stopping(const char *why);

#endif
