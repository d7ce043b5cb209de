/*
 * control_sock: see control_sock.h.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control_sock.h"

/* The socket's directory must be ours alone: anyone who can enter it could
 * replace the socket. */
static int
control_sock_prepare_dir(const char *path, struct errbuf *err)
{
	char *copy = xstrdup(path), *dir = dirname(copy);
	struct stat st;
	int rc = 0;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = errbuf_set(err, -errno, "control: cannot create directory %s: %s", dir,
		    strerror(errno));
		goto out;
	}
	if (stat(dir, &st) < 0) {
		rc = errbuf_set(err, -errno, "control: %s: %s", dir, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
		rc = errbuf_set(err, -EPERM,
		    "control: directory %s must be owned by uid %u with mode 0700 (it is %04o)",
		    dir, (unsigned)getuid(), (unsigned)(st.st_mode & 07777));
		goto out;
	}
out:
	free(copy);
	return rc;
}

/* A socket file left by a crashed peer is removed; a live one is refused. */
static int
control_sock_clear_stale(const char *path, struct errbuf *err)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, live;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : errbuf_set(err, -errno, "control: %s: %s", path,
		    strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return errbuf_set(err, -EEXIST, "control: %s exists and is not a socket", path);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errbuf_set(err, -errno, "control: socket: %s", strerror(errno));
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	if (live)
		return errbuf_set(err, -EADDRINUSE,
		    "control: %s is in use by a running gossipd (choose another --control)", path);
	if (unlink(path) < 0)
		return errbuf_set(err, -errno, "control: cannot remove stale %s: %s", path,
		    strerror(errno));
	return 0;
}

int
control_sock_prepare(const char *path, struct errbuf *err)
{
	int rc;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return errbuf_set(err, -ENAMETOOLONG, "control: path %s is too long", path);
	if ((rc = control_sock_prepare_dir(path, err)) < 0)
		return rc;
	return control_sock_clear_stale(path, err);
}

int
control_sock_cred(uv_pipe_t *pipe, struct ucred *out)
{
	socklen_t len = sizeof(*out);
	uv_os_fd_t fd;
	int rc;

	if ((rc = uv_fileno((uv_handle_t *)pipe, &fd)) < 0)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len) < 0)
		return -errno;
	return 0;
}

/* The fd rides on the buffer's first bytes: sendmsg takes what it can at
 * once and the caller queues the rest, which the fd never overtakes. */
ssize_t
control_sock_send_fd(int sock, const char *buf, size_t len, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh = { 0 };
	struct cmsghdr *cm;
	struct iovec iov;
	ssize_t n;

	iov.iov_base = (void *)buf;
	iov.iov_len = len;
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	do
		n = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n > 0 ? n : -EAGAIN;
}
