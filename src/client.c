/*
 * client: libgossipd, the C client of the attach protocol; see
 * include/gossipd/client.h and gossipd-attach(7).
 *
 * It owns one control connection (the attachment) and the mapping of the
 * shared vector, and nothing of the daemon: it links only libc and jansson,
 * so that a training program can load it next to anything else. The rules,
 * each from a way a library call can hurt its caller:
 *
 * - Every wait has a deadline (poll on a non-blocking socket, the time
 *   left recomputed after a signal), so a hung or stopped daemon gives an
 *   error instead of a hung trainer; sends use MSG_NOSIGNAL, so a daemon
 *   gone never kills the caller with SIGPIPE.
 * - Requests go one at a time and the next line read is their reply.
 *   Bytes after that line's newline stay buffered for the next reply; a
 *   line longer than GD_CONTROL_MAX_LINE is a broken protocol.
 * - Descriptors arrive only with MSG_CMSG_CLOEXEC. The attach reply's first
 *   descriptor is the memory; any other descriptor, with any reply, is
 *   closed at once, so a confused or hostile daemon cannot leak ours full.
 * - The memory is mapped only once it is known to be exactly 4 * params
 *   bytes and sealed against shrinking: a daemon could otherwise cut the
 *   file under the mapping and the caller would die of SIGBUS.
 * - The server must run as this process's uid or as root (SO_PEERCRED):
 *   nobody else's socket gets to hand us memory for our model.
 * - A refusal ({"ok":false}) leaves the connection as it was. Anything
 *   else that goes wrong mid-request leaves the stream at an unknown
 *   place, so the connection is closed (the daemon then detaches us) and
 *   the client answers -ENOTCONN from then on, with the first reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "gossipd/client.h"
#include "gossipd/control.h"

#define CLIENT_VERSION 1
#define CLIENT_DTYPE "float32"
#define CLIENT_MAX_PARAMS ((size_t)INT32_MAX)
/* How long connect() may wait on a full listen backlog. */
#define CLIENT_CONNECT_TIMEOUT_S 10
/* Descriptors one recvmsg takes; more are closed by the kernel. */
#define CLIENT_MAX_FDS 8
/* samples and epoch are sent as JSON integers: exact in a double. */
#define CLIENT_MAX_COUNT 9007199254740992.0

struct gd_client {
	int fd;                 /* the attachment; -1 once lost */
	float *params;
	size_t nparams;
	size_t bytes;
	uint64_t start_step;
	int fresh;
	int timeout_ms;
	int wait_ms;            /* the timeout of the request under way */
	const char *optimizer;  /* client_optimizers[]; NULL: none named */
	int optimizer_told;     /* a step reply came since it was named */
	json_t *whole;          /* the ranges to go whole, as sent; NULL: none named */
	int whole_told;         /* a step reply came since they were named */
	uid_t server_uid;       /* SO_PEERCRED of the server */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lost[256];         /* why fd was closed */
	size_t len;             /* bytes buffered in buf */
	char buf[GD_CONTROL_MAX_LINE];
};

/* A received line and the descriptors that came while it was read. */
struct client_reply {
	json_t *json;
	int fds[CLIENT_MAX_FDS];
	int nfds;
};

static int
client_err(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
client_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Closes the connection for good: the daemon detaches us. */
static int
client_lose(struct gd_client *c, char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int
client_lose(struct gd_client *c, char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(c->lost, sizeof(c->lost), fmt, ap);
	va_end(ap);
	n = strlen(c->lost);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
		if (c->params != NULL)
			snprintf(c->lost + n, sizeof(c->lost) - n, " (connection closed: detached)");
	}
	return client_err(err, errlen, rc, "%s", c->lost);
}

static int
client_check(struct gd_client *c, char *err, size_t errlen)
{
	if (c == NULL)
		return client_err(err, errlen, -EINVAL, "no client");
	if (c->fd < 0)
		return client_err(err, errlen, -ENOTCONN, "not attached: %s", c->lost);
	return 0;
}

static int64_t
client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline timeout_ms from now; -1 (none) for timeout_ms <= 0. */
static int64_t
client_deadline(int timeout_ms)
{
	return timeout_ms > 0 ? client_now_ms() + timeout_ms : -1;
}

/* Waits until fd is ready for events or the deadline passes: 1 ready,
 * 0 timed out, negative errno. */
static int
client_wait(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int ms = -1, rc;

		if (deadline >= 0) {
			int64_t left = deadline - client_now_ms();

			if (left <= 0)
				return 0;
			ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		rc = poll(&p, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc > 0)
			return 1;
	}
}

/* Sends req as one line. Errors leave the connection to the caller. */
static int
client_send(struct gd_client *c, json_t *req, int64_t deadline, char *err, size_t errlen)
{
	char *s = json_dumps(req, JSON_COMPACT);
	size_t n, off = 0;
	int rc = 0;

	if (s == NULL)
		return client_err(err, errlen, -ENOMEM, "cannot format the request");
	n = strlen(s);
	if (n + 1 > GD_CONTROL_MAX_LINE) {
		free(s);
		return client_err(err, errlen, -EMSGSIZE, "request longer than %d bytes",
		    GD_CONTROL_MAX_LINE);
	}
	s[n++] = '\n';	/* json_dumps leaves room for its NUL */
	while (off < n) {
		ssize_t w = send(c->fd, s + off, n - off, MSG_NOSIGNAL);

		if (w >= 0) {
			off += (size_t)w;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			rc = client_err(err, errlen, -errno, "cannot send to gossipd at %s: %s",
			    c->path, strerror(errno));
			break;
		}
		rc = client_wait(c->fd, POLLOUT, deadline);
		if (rc <= 0) {
			rc = client_err(err, errlen, rc < 0 ? rc : -ETIMEDOUT,
			    "gossipd at %s did not take the request within %d ms%s%s", c->path,
			    c->wait_ms, rc < 0 ? ": " : "", rc < 0 ? strerror(-rc) : "");
			break;
		}
		rc = 0;
	}
	free(s);
	return rc;
}

/* Reads into buf, keeping the descriptors that come with the bytes in r
 * (the rest closed): >0 bytes read, 0 at the end of the stream, or a
 * negative errno (-EAGAIN: nothing yet). */
static ssize_t
client_read(struct gd_client *c, struct client_reply *r)
{
	union {
		char buf[CMSG_SPACE(CLIENT_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { c->buf + c->len, sizeof(c->buf) - c->len };
	struct msghdr msg = { 0 };
	struct cmsghdr *cm;
	ssize_t got;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	got = recvmsg(c->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (got < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t k, n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < n; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
			if (r != NULL && r->nfds < CLIENT_MAX_FDS)
				r->fds[r->nfds++] = fd;
			else
				close(fd);
		}
	}
	c->len += (size_t)got;
	return got;
}

static void
client_reply_clear(struct client_reply *r)
{
	for (int i = 0; i < r->nfds; i++)
		close(r->fds[i]);
	r->nfds = 0;
	json_decref(r->json);
	r->json = NULL;
}

/* The next line, parsed into r->json (an object with a boolean "ok"); its
 * text (without the newline) in *text when text is not NULL. Errors lose
 * the connection. */
static int
client_recv(struct gd_client *c, struct client_reply *r, char **text, int64_t deadline,
    char *err, size_t errlen)
{
	json_error_t jerr;
	char *nl;
	size_t line;

	while ((nl = memchr(c->buf, '\n', c->len)) == NULL) {
		ssize_t got;
		int rc;

		if (c->len == sizeof(c->buf))
			return client_lose(c, err, errlen, -EPROTO,
			    "gossipd at %s sent a line longer than %d bytes", c->path,
			    GD_CONTROL_MAX_LINE);
		got = client_read(c, r);
		if (got > 0)
			continue;
		if (got == 0)
			return client_lose(c, err, errlen, -ECONNRESET,
			    "gossipd at %s closed the connection", c->path);
		if (got == -EINTR)
			continue;
		if (got != -EAGAIN && got != -EWOULDBLOCK)
			return client_lose(c, err, errlen, (int)got, "cannot read from gossipd at %s: %s",
			    c->path, strerror((int)-got));
		rc = client_wait(c->fd, POLLIN, deadline);
		if (rc < 0)
			return client_lose(c, err, errlen, rc, "waiting for gossipd at %s: %s",
			    c->path, strerror(-rc));
		if (rc == 0)
			return client_lose(c, err, errlen, -ETIMEDOUT,
			    "no reply from gossipd at %s within %d ms", c->path, c->wait_ms);
	}
	line = (size_t)(nl - c->buf);
	r->json = json_loadb(c->buf, line, JSON_REJECT_DUPLICATES, &jerr);
	if (r->json != NULL && text != NULL) {
		*text = strndup(c->buf, line);
		if (*text == NULL) {
			json_decref(r->json);
			r->json = NULL;
			memmove(c->buf, nl + 1, c->len - line - 1);
			c->len -= line + 1;
			return client_err(err, errlen, -ENOMEM, "out of memory");
		}
	}
	memmove(c->buf, nl + 1, c->len - line - 1);
	c->len -= line + 1;
	if (r->json == NULL)
		return client_lose(c, err, errlen, -EPROTO, "gossipd at %s sent a bad reply: %s",
		    c->path, jerr.text);
	if (!json_is_object(r->json) || !json_is_boolean(json_object_get(r->json, "ok"))) {
		if (text != NULL) {
			free(*text);
			*text = NULL;
		}
		return client_lose(c, err, errlen, -EPROTO,
		    "gossipd at %s sent a reply without \"ok\"", c->path);
	}
	return 0;
}

/* The errno of a refusal, guessed from the daemon's words. */
static int
client_refusal_errno(const char *msg)
{
	static const struct {
		const char *words;
		int err;
	} map[] = {
		{ "is attached (pid", EBUSY },
		{ "already attached", EBUSY },
		{ "permission denied", EACCES },
		{ "uid", EACCES },
		{ "leaving", ESHUTDOWN },
		{ "builtin", EOPNOTSUPP },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcasestr(msg, map[i].words) != NULL)
			return -map[i].err;
	return -EINVAL;
}

/*
 * Sends req (consumed) and reads its reply into r (the caller clears r);
 * the reply's text too when text is not NULL. A refusal returns its errno
 * and the daemon's message with the connection kept.
 */
static int
client_request(struct gd_client *c, json_t *req, int timeout_ms, struct client_reply *r,
    char **text, char *err, size_t errlen)
{
	int64_t deadline = client_deadline(timeout_ms);
	const char *msg;
	char why[256];
	int rc;

	if (req == NULL)
		return client_err(err, errlen, -ENOMEM, "cannot build the request");
	c->wait_ms = timeout_ms;
	rc = client_send(c, req, deadline, why, sizeof(why));
	json_decref(req);
	if (rc == -EPIPE || rc == -ECONNRESET) {
		/* It closed on us; its last line may say why (a caller of
		 * another uid is told so, then closed). */
		while (client_read(c, NULL) > 0 && memchr(c->buf, '\n', c->len) == NULL)
			;
		if (memchr(c->buf, '\n', c->len) != NULL &&
		    client_recv(c, r, NULL, deadline, NULL, 0) == 0 &&
		    (msg = json_string_value(json_object_get(r->json, "error"))) != NULL)
			return client_lose(c, err, errlen, client_refusal_errno(msg),
			    "gossipd refused: %s", msg);
	}
	if (rc < 0)
		return client_lose(c, err, errlen, rc, "%s", why);
	if ((rc = client_recv(c, r, text, deadline, err, errlen)) < 0)
		return rc;
	if (json_is_true(json_object_get(r->json, "ok")))
		return 0;
	if (text != NULL) {
		free(*text);
		*text = NULL;
	}
	msg = json_string_value(json_object_get(r->json, "error"));
	if (msg == NULL)
		msg = "refused without a reason";
	return client_err(err, errlen, client_refusal_errno(msg), "gossipd refused: %s", msg);
}

/* Connects to path with a close-on-exec, non-blocking socket served by our
 * uid or root. */
static int
client_connect(struct gd_client *c, char *err, size_t errlen)
{
	struct timeval tv = { .tv_sec = CLIENT_CONNECT_TIMEOUT_S };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int e;

	memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return client_err(err, errlen, -errno, "socket: %s", strerror(errno));
	/* A blocking connect on a full backlog waits SO_SNDTIMEO at most. */
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		goto fail;
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		e = errno;
		close(c->fd);
		c->fd = -1;
		return client_err(err, errlen, -e, "cannot connect to gossipd at %s: %s%s",
		    c->path, strerror(e),
		    e == ENOENT || e == ECONNREFUSED ? " (is gossipd running?)" :
		    e == EAGAIN ? " (gossipd does not accept connections)" : "");
	}
	tv.tv_sec = 0;
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		goto fail;
	c->server_uid = cred.uid;
	if (cred.uid != getuid() && cred.uid != geteuid() && cred.uid != 0) {
		close(c->fd);
		c->fd = -1;
		return client_err(err, errlen, -EACCES, "the server at %s runs as uid %u, "
		    "neither this process's (%u) nor root's: not attaching to it", c->path,
		    (unsigned)cred.uid, (unsigned)geteuid());
	}
	return 0;
fail:
	e = errno;
	close(c->fd);
	c->fd = -1;
	return client_err(err, errlen, -e, "socket %s: %s", c->path, strerror(e));
}

/* The attach reply's fields, checked against what was asked for. */
static int
client_check_reply(struct gd_client *c, json_t *j, size_t *bytes, char *err, size_t errlen)
{
	json_t *step = json_object_get(j, "step"), *fresh = json_object_get(j, "fresh");
	json_t *version = json_object_get(j, "version"), *params = json_object_get(j, "params");
	json_t *b = json_object_get(j, "bytes");
	const char *dtype = json_string_value(json_object_get(j, "dtype"));

	if (!json_is_integer(version) || json_integer_value(version) != CLIENT_VERSION)
		return client_err(err, errlen, -EPROTO, "attach reply: version is not %d",
		    CLIENT_VERSION);
	if (dtype == NULL || strcmp(dtype, CLIENT_DTYPE) != 0)
		return client_err(err, errlen, -EPROTO, "attach reply: dtype is not " CLIENT_DTYPE);
	if (!json_is_integer(params) || json_integer_value(params) < 0 ||
	    (uint64_t)json_integer_value(params) != c->nparams)
		return client_err(err, errlen, -EPROTO, "attach reply: params is not %zu",
		    c->nparams);
	if (!json_is_integer(b) || json_integer_value(b) < 0 ||
	    (uint64_t)json_integer_value(b) != 4 * (uint64_t)c->nparams)
		return client_err(err, errlen, -EPROTO, "attach reply: bytes is not 4 * %zu",
		    c->nparams);
	if (!json_is_integer(step) || json_integer_value(step) < 0)
		return client_err(err, errlen, -EPROTO, "attach reply: no step");
	if (!json_is_boolean(fresh))
		return client_err(err, errlen, -EPROTO, "attach reply: no fresh");
	*bytes = (size_t)json_integer_value(b);
	c->start_step = (uint64_t)json_integer_value(step);
	c->fresh = json_is_true(fresh);
	return 0;
}

/* Maps the memory fd once it is bytes long and sealed against shrinking. */
static int
client_map(struct gd_client *c, int fd, size_t bytes, char *err, size_t errlen)
{
	struct stat st;
	int seals;
	void *p;

	if (fstat(fd, &st) < 0)
		return client_err(err, errlen, -errno, "fstat of the memory: %s", strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size != bytes)
		return client_err(err, errlen, -EPROTO, "the memory is not a file of %zu bytes "
		    "(size %lld)", bytes, (long long)st.st_size);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return client_err(err, errlen, -EPROTO, "the memory is not sealed against "
		    "shrinking");
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return client_err(err, errlen, -errno, "mmap of %zu bytes: %s", bytes,
		    strerror(errno));
	c->params = p;
	c->bytes = bytes;
	return 0;
}

/* The attach request; with init, its digest (gossipd-attach(7)). */
static json_t *
client_attach_req(const float *init, size_t params)
{
	unsigned char digest[crypto_generichash_BYTES];
	char hex[2 * crypto_generichash_BYTES + 1];
	json_t *req = json_pack("{s:s, s:i, s:I, s:s}", "cmd", "attach", "version",
	    CLIENT_VERSION, "params", (json_int_t)params, "dtype", CLIENT_DTYPE);

	if (req == NULL || init == NULL)
		return req;
	crypto_generichash(digest, sizeof(digest), (const unsigned char *)init,
	    params * sizeof(float), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
	if (json_object_set_new(req, "digest", json_string(hex)) < 0) {
		json_decref(req);
		return NULL;
	}
	return req;
}

/* gd_client_attach, and with init gd_client_attach_from. */
static int
client_attach(const char *socket_path, const float *init, size_t params,
    struct gd_client **out, char *err, size_t errlen)
{
	struct client_reply r = { 0 };
	struct gd_client *c = NULL;
	size_t bytes = 0;
	int rc, n;

	if (out == NULL)
		return client_err(err, errlen, -EINVAL, "no place for the client");
	*out = NULL;
	if (params < 1 || params > CLIENT_MAX_PARAMS)
		return client_err(err, errlen, -EINVAL, "params must be 1 to %zu, not %zu",
		    CLIENT_MAX_PARAMS, params);
	if (init != NULL && sodium_init() < 0)
		return client_err(err, errlen, -EIO, "libsodium cannot be initialised");
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return client_err(err, errlen, -ENOMEM, "out of memory");
	c->fd = -1;
	c->nparams = params;
	c->timeout_ms = GD_CLIENT_TIMEOUT_MS;
	if (socket_path != NULL)
		n = snprintf(c->path, sizeof(c->path), "%s", socket_path);
	else
		n = snprintf(c->path, sizeof(c->path), GD_CONTROL_DIR_FMT "/%s.sock",
		    (unsigned)getuid(), GD_CONTROL_DEFAULT_JOB);
	if (n < 0 || (size_t)n >= sizeof(c->path)) {
		rc = client_err(err, errlen, -ENAMETOOLONG, "socket path too long: %s",
		    socket_path ? socket_path : "(default)");
		goto out;
	}
	if ((rc = client_connect(c, err, errlen)) < 0)
		goto out;
	rc = client_request(c, client_attach_req(init, params), GD_CLIENT_ATTACH_TIMEOUT_MS, &r,
	    NULL, err, errlen);
	/* A server of another uid (root) closes on callers it does not serve. */
	if ((rc == -ECONNRESET || rc == -EPIPE) && geteuid() != 0 && geteuid() != c->server_uid)
		rc = client_err(err, errlen, -EACCES, "gossipd at %s closed the connection: it "
		    "serves only its uid (%u) and root, and this process runs as uid %u",
		    c->path, (unsigned)c->server_uid, (unsigned)geteuid());
	if (rc < 0)
		goto out;
	if ((rc = client_check_reply(c, r.json, &bytes, err, errlen)) < 0)
		goto out;
	if (r.nfds == 0) {
		rc = client_err(err, errlen, -EPROTO, "the attach reply came without the memory's "
		    "descriptor");
		goto out;
	}
	if ((rc = client_map(c, r.fds[0], bytes, err, errlen)) < 0)
		goto out;
	if (init != NULL && c->fresh)
		memcpy(c->params, init, bytes);
	*out = c;
	c = NULL;
	rc = 0;
out:
	client_reply_clear(&r);
	if (c != NULL) {
		if (c->fd >= 0)
			close(c->fd);
		free(c);
	}
	return rc;
}

int
gd_client_attach(const char *socket_path, size_t params, struct gd_client **out,
    char *err, size_t errlen)
{
	return client_attach(socket_path, NULL, params, out, err, errlen);
}

int
gd_client_attach_from(const char *socket_path, const float *init, size_t params,
    struct gd_client **out, char *err, size_t errlen)
{
	if (init == NULL)
		return client_err(err, errlen, -EINVAL, "no initial parameters");
	return client_attach(socket_path, init, params, out, err, errlen);
}

float *
gd_client_params(struct gd_client *c)
{
	return c != NULL ? c->params : NULL;
}

size_t
gd_client_nparams(const struct gd_client *c)
{
	return c != NULL ? c->nparams : 0;
}

uint64_t
gd_client_start_step(const struct gd_client *c)
{
	return c != NULL ? c->start_step : 0;
}

int
gd_client_fresh(const struct gd_client *c)
{
	return c != NULL && c->fresh;
}

void
gd_client_set_timeout(struct gd_client *c, int timeout_ms)
{
	if (c != NULL)
		c->timeout_ms = timeout_ms;
}

/* The kinds a step request's "optimizer" names (gossipd-attach(7)): the
 * daemon's config_optimizer_names, which this library, linking none of
 * the daemon's code, cannot use. */
static const char *const client_optimizers[] = { "sgd", "adaptive" };

int
gd_client_set_optimizer(struct gd_client *c, const char *kind, char *err, size_t errlen)
{
	int rc;

	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	if (kind == NULL)
		return client_err(err, errlen, -EINVAL, "optimizer: none named");
	for (size_t i = 0; i < sizeof(client_optimizers) / sizeof(client_optimizers[0]); i++)
		if (strcmp(kind, client_optimizers[i]) == 0) {
			c->optimizer = client_optimizers[i];
			c->optimizer_told = 0;
			return 0;
		}
	return client_err(err, errlen, -EINVAL, "optimizer: \"sgd\" or \"adaptive\", not \"%s\"",
	    kind);
}

int
gd_client_set_whole(struct gd_client *c, const size_t *ranges, size_t n, char *err,
    size_t errlen)
{
	size_t end = 0;
	json_t *w;
	int rc;

	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	if (n > 0 && ranges == NULL)
		return client_err(err, errlen, -EINVAL, "whole: no ranges given");
	for (size_t i = 0; i < n; i++) {
		size_t off = ranges[2 * i], len = ranges[2 * i + 1];

		if (off < end || len < 1 || off > c->nparams || len > c->nparams - off)
			return client_err(err, errlen, -EINVAL, "whole: range %zu (%zu, %zu): want "
			    "count at least 1, after the range before and within the %zu values",
			    i, off, len, c->nparams);
		end = off + len;
	}
	if ((w = json_array()) == NULL)
		return client_err(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(w, json_pack("[I, I]", (json_int_t)ranges[2 * i],
		    (json_int_t)ranges[2 * i + 1])) < 0) {
			json_decref(w);
			return client_err(err, errlen, -ENOMEM, "out of memory");
		}
	json_decref(c->whole);
	c->whole = w;
	c->whole_told = 0;
	return 0;
}

/* Adds a report field that is a finite number; counts must be whole and
 * not negative. */
static int
client_report_field(json_t *req, const char *key, double v, int count, char *err,
    size_t errlen)
{
	if (!isfinite(v))
		return 0;
	if (count) {
		if (v < 0 || v > CLIENT_MAX_COUNT || v != floor(v))
			return client_err(err, errlen, -EINVAL, "report: %s must be a whole number "
			    "from 0 to 2^53, not %g", key, v);
		return json_object_set_new(req, key, json_integer((json_int_t)v)) < 0 ? -ENOMEM : 0;
	}
	return json_object_set_new(req, key, json_real(v)) < 0 ? -ENOMEM : 0;
}

int
gd_client_step(struct gd_client *c, uint64_t step, const struct gd_client_report *report,
    int *stop, char *err, size_t errlen)
{
	struct client_reply r = { 0 };
	json_t *req, *mixed, *s, *st;
	int rc;

	if (stop != NULL)
		*stop = 0;
	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	if (step > INT64_MAX)
		return client_err(err, errlen, -EINVAL, "step %" PRIu64 " is too large", step);
	req = json_pack("{s:s, s:I}", "cmd", "step", "step", (json_int_t)step);
	if (req == NULL)
		return client_err(err, errlen, -ENOMEM, "out of memory");
	if (report != NULL &&
	    ((rc = client_report_field(req, "loss", report->loss, 0, err, errlen)) < 0 ||
	    (rc = client_report_field(req, "samples", report->samples, 1, err, errlen)) < 0 ||
	    (rc = client_report_field(req, "epoch", report->epoch, 1, err, errlen)) < 0 ||
	    (rc = client_report_field(req, "accuracy", report->accuracy, 0, err, errlen)) < 0 ||
	    (rc = client_report_field(req, "test_loss", report->test_loss, 0, err, errlen)) < 0)) {
		json_decref(req);
		return rc == -ENOMEM ? client_err(err, errlen, rc, "out of memory") : rc;
	}
	if ((c->optimizer != NULL && !c->optimizer_told &&
	    json_object_set_new(req, "optimizer", json_string(c->optimizer)) < 0) ||
	    (c->whole != NULL && !c->whole_told && json_object_set(req, "whole", c->whole) < 0)) {
		json_decref(req);
		return client_err(err, errlen, -ENOMEM, "out of memory");
	}
	if ((rc = client_request(c, req, c->timeout_ms, &r, NULL, err, errlen)) < 0)
		goto out;
	mixed = json_object_get(r.json, "mixed");
	s = json_object_get(r.json, "step");
	st = json_object_get(r.json, "stop");
	if (!json_is_integer(s) || (uint64_t)json_integer_value(s) != step ||
	    !json_is_integer(mixed) || json_integer_value(mixed) < 0 || !json_is_boolean(st)) {
		rc = client_lose(c, err, errlen, -EPROTO, "gossipd at %s answered step %" PRIu64
		    " with a reply that is not its own", c->path, step);
		goto out;
	}
	if (stop != NULL)
		*stop = json_is_true(st);
	c->optimizer_told = 1;
	c->whole_told = 1;
	rc = json_integer_value(mixed) > INT_MAX ? INT_MAX : (int)json_integer_value(mixed);
out:
	client_reply_clear(&r);
	return rc;
}

/* A request named cmd whose reply's boolean key says what it did: 1 or 0,
 * or a negative errno. */
static int
client_flag_request(struct gd_client *c, const char *cmd, const char *key, char *err,
    size_t errlen)
{
	struct client_reply r = { 0 };
	json_t *v;
	int rc;

	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	if ((rc = client_request(c, json_pack("{s:s}", "cmd", cmd), c->timeout_ms, &r, NULL,
	    err, errlen)) < 0)
		goto out;
	v = json_object_get(r.json, key);
	if (!json_is_boolean(v)) {
		rc = client_lose(c, err, errlen, -EPROTO, "gossipd at %s answered %s without "
		    "\"%s\"", c->path, cmd, key);
		goto out;
	}
	rc = json_is_true(v);
out:
	client_reply_clear(&r);
	return rc;
}

int
gd_client_evaluate(struct gd_client *c, char *err, size_t errlen)
{
	return client_flag_request(c, "evaluate", "job_model", err, errlen);
}

int
gd_client_train(struct gd_client *c, char *err, size_t errlen)
{
	return client_flag_request(c, "train", "restored", err, errlen);
}

int
gd_client_status(struct gd_client *c, char **json, char *err, size_t errlen)
{
	struct client_reply r = { 0 };
	char *text = NULL;
	int rc;

	if (json == NULL)
		return client_err(err, errlen, -EINVAL, "no place for the status");
	*json = NULL;
	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	rc = client_request(c, json_pack("{s:s}", "cmd", "status"), c->timeout_ms, &r, &text,
	    err, errlen);
	client_reply_clear(&r);
	if (rc < 0)
		return rc;
	*json = text;
	return 0;
}

int
gd_client_leave(struct gd_client *c, char *err, size_t errlen)
{
	struct client_reply r = { 0 };
	int rc;

	if ((rc = client_check(c, err, errlen)) < 0)
		return rc;
	rc = client_request(c, json_pack("{s:s}", "cmd", "leave"), c->timeout_ms, &r, NULL,
	    err, errlen);
	client_reply_clear(&r);
	return rc;
}

void
gd_client_detach(struct gd_client *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0) {
		struct client_reply r = { 0 };

		/* Best effort, briefly: closing detaches as well. */
		client_request(c, json_pack("{s:s}", "cmd", "detach"), 2000, &r, NULL, NULL, 0);
		client_reply_clear(&r);
	}
	if (c->params != NULL)
		munmap(c->params, c->bytes);
	if (c->fd >= 0)
		close(c->fd);
	json_decref(c->whole);
	free(c);
}
