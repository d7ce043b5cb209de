/*
 * server: one peer assembled from its modules and wired to the loop. The
 * only entry points main() needs; server.c says how it is put together.
 */
#ifndef GD_SERVER_H
#define GD_SERVER_H

#include <uv.h>

#include "daemon.h"

/* Everything up to the running loop: data, model, checkpoint, control
 * socket, transport and protocols, the trainer (or the wait for a pull).
 * d holds the loaded config. On failure d->exit_code says why
 * (DAEMON_EXIT_*) and what was opened is closing: the caller runs the
 * loop out and calls server_free, as after a normal end. */
int server_open(struct daemon *d, uv_loop_t *loop, struct errbuf *err);
/* Frees what server_open made, and the config; NULL-safe field by field. */
void server_free(struct daemon *d);

#endif
