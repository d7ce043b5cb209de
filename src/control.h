/*
 * control: the control socket server. It owns the Unix socket, its private
 * directory, the connections, the JSON-lines framing and the caller's uid
 * check; it knows nothing of what the commands do. Each request line is
 * parsed and handed to one handler; the handler answers at once or later
 * (a checkpoint waits for the trainer), by client id, so a client that
 * disconnects in the meantime is simply not answered (one that only shuts
 * its writing side still is). Watching clients get every broadcast line
 * until they hang up. Idle clients are closed after a few seconds and a
 * full table evicts the longest idle (control.c says how).
 *
 * Protocol: one JSON object per line each way (include/gossipd/control.h).
 */
#ifndef GD_CONTROL_H
#define GD_CONTROL_H

#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "util.h"

struct control;

/* Return values of a handler. */
#define CONTROL_REPLIED 0   /* *reply is set (taken over by control) */
#define CONTROL_DEFERRED 1  /* the handler will call control_reply(id) later */

/* req is the parsed request object (borrowed); cmd its "cmd" string. */
typedef int (*control_handler_fn)(struct control *ctl, uint64_t client, const char *cmd,
    json_t *req, json_t **reply, void *arg);

/* A pinned client's connection ended (it closed, died or was closed). */
typedef void (*control_gone_fn)(struct control *ctl, uint64_t client, void *arg);

/* Creates the socket's directory (0700) if missing, refuses a directory
 * others can enter, replaces a stale socket, refuses a live one. */
int control_open(uv_loop_t *loop, const char *path, control_handler_fn fn, void *arg,
    struct control **out, struct errbuf *err);
/* Answer a deferred request; steals reply. A vanished client is ignored. */
void control_reply(struct control *ctl, uint64_t client, json_t *reply);
/* Answer with a file descriptor passed along (SCM_RIGHTS); steals reply,
 * borrows fd (the caller keeps it open). -EAGAIN when replies are still
 * queued for the client (the fd could overtake them), -EPIPE when it is
 * gone; the caller then answers with control_reply. */
int control_reply_fd(struct control *ctl, uint64_t client, json_t *reply, int fd);
/* A pinned client (an attached trainer) is never closed for idleness, and
 * when its connection ends, for whatever reason, or it shuts its writing
 * side, gone is called (once: the client is unpinned). gone must answer
 * whatever that client waits for, or a half-closed client stays open. */
void control_pin(struct control *ctl, uint64_t client, int pinned);
void control_on_gone(struct control *ctl, control_gone_fn fn);
/* The client's process id (SO_PEERCRED), 0 if unknown. */
int control_peer_pid(struct control *ctl, uint64_t client);
/* Subscribe a client to broadcasts (the watch command). */
void control_watch(struct control *ctl, uint64_t client);
/* Send to every watching client; slow ones miss lines instead of growing
 * an unbounded queue. Does not steal msg. */
void control_broadcast(struct control *ctl, json_t *msg);
int control_watchers(struct control *ctl);
/* Closes every connection and the listener, removes the socket file. */
void control_close(struct control *ctl);

/* {"ok":false,"error":msg}, the message mended into valid UTF-8. */
json_t *control_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
