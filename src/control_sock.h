/*
 * control_sock: what the control server needs of the kernel below libuv,
 * each a rule of who may reach the daemon's control: the socket's
 * directory private to us, a stale socket replaced but a live one left
 * alone, the caller's credentials (SO_PEERCRED), and a file descriptor
 * passed along a reply (SCM_RIGHTS). Apart from control.c, which owns the
 * connections and their life cycle, because these are plain system calls
 * on a path or a socket with no state between them, and each can be read
 * against its man page alone.
 */
#ifndef GD_CONTROL_SOCK_H
#define GD_CONTROL_SOCK_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "util.h"

/* Make path ready to bind: short enough for a socket address, its
 * directory created 0700 if missing and refused if others can enter it,
 * a stale socket removed and a live one refused. 0 or a negative errno
 * with the reason in err. */
int control_sock_prepare(const char *path, struct errbuf *err);
/* The credentials of the process at the other end of pipe: 0 or a
 * negative errno. */
int control_sock_cred(uv_pipe_t *pipe, struct ucred *out);
/* Send buf's first bytes on sock with fd attached, without blocking:
 * how many went (at least one), or a negative errno (-EAGAIN: none). */
ssize_t control_sock_send_fd(int sock, const char *buf, size_t len, int fd);

#endif
