/*
 * attach_client: a small C trainer on libgossipd for tests/attach_c.sh.
 *
 * It attaches to a peer started with --trainer external, writes its
 * initial parameters when the vector is fresh, and runs least-squares SGD
 * on synthetic data (targets from one fixed weight vector, the inputs
 * from --seed), so that the values stay finite and the loss means
 * something, calling gd_client_step at every step. Each event is one JSON
 * line on stdout, for jq; the hash is FNV-1a over the vector's bytes, to
 * compare what one process left with what the next one finds.
 *
 * With --from it attaches through gd_client_attach_from, its initial
 * parameters made first (the digest travels; when fresh the library
 * writes them).
 *
 * Flags that make it behave badly on purpose:
 *   --hold S       after its steps, S seconds without a step request
 *   --close-early  unmaps the memory right after attaching, steps anyway
 *   --write-past   speaks the attach protocol itself to hold the memory's
 *                  descriptor, and shows it cannot be grown, shrunk,
 *                  written past its end or resealed
 *   --status       prints the peer's status reply after its steps
 *   --evaluate     after its steps, asks for the job's model
 *                  (gd_client_evaluate), then its own back
 *                  (gd_client_train), hashing the vector before, between
 *                  and after
 *   --leave        tells the peer to leave after its steps and steps on
 *                  until a reply says stop
 *
 * --optimizer KIND names the kind of its optimizer to the peer
 * (gd_client_set_optimizer): "sgd" or "adaptive", anything else is
 * refused by the library. --whole OFF:COUNT (up to AC_MAX_WHOLE times)
 * names ranges to go whole in every share (gd_client_set_whole), in the
 * order given: ranges out of order are refused by the library.
 *
 * Exit status: 0 done, 1 a library call failed (an "error" line says
 * which), 2 bad usage, 3 a --write-past check failed.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gossipd/client.h"

#define AC_BATCH 16
#define AC_MAX_WHOLE 8

struct ac_opts {
	const char *socket;
	size_t params;
	long steps;
	long sleep_ms;
	uint64_t seed;
	long hold_s;
	int timeout_ms;
	int close_early;
	int write_past;
	int status;
	int evaluate;
	int leave;
	int from;
	const char *optimizer;
	size_t whole[2 * AC_MAX_WHOLE];  /* offset, count of each --whole */
	size_t nwhole;
};

/* The JSON string of s, quoted, into out. */
static void
ac_quote(const char *s, char *out, size_t size)
{
	size_t o = 0;

	if (size < 3)
		return;
	out[o++] = '"';
	for (; *s != '\0' && o + 8 < size; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			o += (size_t)snprintf(out + o, size - o, "\\%c", ch);
		else if (ch < 0x20)
			o += (size_t)snprintf(out + o, size - o, "\\u%04x", ch);
		else
			out[o++] = (char)ch;
	}
	out[o++] = '"';
	out[o] = '\0';
}

static const char *
ac_errno_name(int e)
{
	switch (e) {
	case EBUSY: return "EBUSY";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ECONNRESET: return "ECONNRESET";
	case ENOTCONN: return "ENOTCONN";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EPROTO: return "EPROTO";
	case ESHUTDOWN: return "ESHUTDOWN";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EPIPE: return "EPIPE";
	default: return "other";
	}
}

static int
ac_fail(const char *where, int rc, const char *msg)
{
	char q[1024];

	ac_quote(msg, q, sizeof(q));
	printf("{\"event\":\"error\",\"where\":\"%s\",\"rc\":%d,\"errno\":\"%s\",\"message\":%s}\n",
	    where, rc, ac_errno_name(-rc), q);
	return 1;
}

/* The descriptors open at the start, to find what the library opened. */
static unsigned char ac_fds_before[4096];

static int
ac_fd_scan(int record, int *cloexec)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fresh = 0;

	*cloexec = 1;
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		long fd = strtol(e->d_name, NULL, 10);

		if (e->d_name[0] == '.' || fd == dirfd(d) || fd < 0 ||
		    fd >= (long)sizeof(ac_fds_before))
			continue;
		if (record) {
			ac_fds_before[fd] = 1;
		} else if (!ac_fds_before[fd]) {
			fresh++;
			if (!(fcntl((int)fd, F_GETFD) & FD_CLOEXEC))
				*cloexec = 0;
		}
	}
	closedir(d);
	return fresh;
}

static uint64_t
ac_hash(const float *v, size_t n)
{
	const unsigned char *p = (const unsigned char *)v;
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n * sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static int
ac_finite(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(v[i]))
			return 0;
	return 1;
}

static double
ac_sum(const float *v, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += v[i];
	return s;
}

/* xorshift64*, uniform in [-sqrt 3, sqrt 3): variance 1. */
static double
ac_uniform(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return ((double)((*s * 2685821657736338717ULL) >> 11) / 9007199254740992.0 * 2 - 1) *
	    1.7320508075688772;
}

/* The job's target weights: the same for every peer. */
static double
ac_target(size_t i)
{
	return 0.5 * sin((double)i + 1);
}

/* One SGD step on a fresh batch: w -= lr * mean((w.x - y) x). Returns the
 * batch's loss, mean (w.x - y)^2 / 2, before the update. */
static double
ac_sgd(float *w, size_t n, uint64_t *rng, double *g)
{
	double loss = 0, lr = (double)AC_BATCH / (2.0 * (double)n);
	size_t i;

	lr = lr > 0.1 ? 0.1 : lr;
	memset(g, 0, n * sizeof(*g));
	for (int b = 0; b < AC_BATCH; b++) {
		double pred = 0, y = 0, r;
		uint64_t keep = *rng;

		/* Features are drawn twice (dot product, then gradient) from
		 * the same state, so that no n-sized batch is stored. */
		for (i = 0; i < n; i++) {
			double xi = ac_uniform(rng);

			pred += w[i] * xi;
			y += ac_target(i) * xi;
		}
		y += 0.01 * ac_uniform(rng);
		r = pred - y;
		loss += r * r / 2;
		*rng = keep;
		for (i = 0; i < n; i++)
			g[i] += r * ac_uniform(rng);
		(void)ac_uniform(rng);
	}
	for (i = 0; i < n; i++)
		w[i] -= (float)(lr * g[i] / AC_BATCH);
	return loss / AC_BATCH;
}

static void
ac_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* --- --write-past: the protocol by hand, to hold the descriptor --- */

/* The value of "key" in the JSON object text s (a flat look-up: enough
 * for the attach reply), or NULL. */
static const char *
ac_field(const char *s, const char *key)
{
	char q[64];
	const char *p;

	snprintf(q, sizeof(q), "\"%s\"", key);
	if ((p = strstr(s, q)) == NULL)
		return NULL;
	p += strlen(q);
	p += strspn(p, " \t");
	if (*p++ != ':')
		return NULL;
	return p + strspn(p, " \t");
}

static int
ac_raw_attach(const char *path, size_t n, int *sock, int *memfd, size_t *bytes)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[256], buf[65536];
	size_t len = 0;
	const char *b;
	char *nl = NULL;

	*sock = *memfd = -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	*sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*sock < 0 || connect(*sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	snprintf(req, sizeof(req), "{\"cmd\":\"attach\",\"version\":1,\"params\":%zu,"
	    "\"dtype\":\"float32\",\"name\":\"write-past\"}\n", n);
	if (send(*sock, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
		return -EIO;
	while (nl == NULL && len < sizeof(buf) - 1) {
		union {
			char b[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { buf + len, sizeof(buf) - 1 - len };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
		ssize_t got = recvmsg(*sock, &msg, MSG_CMSG_CLOEXEC);

		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			int nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int k = 0; k < nfd; k++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
				if (*memfd < 0)
					*memfd = fd;
				else
					close(fd);
			}
		}
		len += (size_t)got;
		buf[len] = '\0';
		nl = strchr(buf, '\n');
	}
	if (nl == NULL || (b = ac_field(buf, "ok")) == NULL || strncmp(b, "true", 4) != 0 ||
	    *memfd < 0) {
		fprintf(stderr, "attach_client: raw attach: %s\n", buf);
		return -EPROTO;
	}
	b = ac_field(buf, "bytes");
	*bytes = b != NULL ? strtoull(b, NULL, 10) : 0;
	return 0;
}

/* Writes at offset `at` of a mapping of len bytes of fd in a child; the
 * signal that killed it, or 0. */
static int
ac_touch_in_child(int fd, size_t len, size_t at)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = SIG_DFL };
		char *p;

		/* The default action, even where a sanitizer catches SIGBUS. */
		sigaction(SIGBUS, &sa, NULL);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			_exit(2);
		p[at] = 1;
		_exit(0);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static int
ac_write_past(const struct ac_opts *o)
{
	long page = sysconf(_SC_PAGESIZE);
	int sock, fd, rc, seals, ok = 1, grow_e = 0, shrink_e = 0, pwrite_e = 0, seal_e = 0, sig;
	size_t bytes = 0, end;
	struct stat st;
	char one = 1;

	if ((rc = ac_raw_attach(o->socket, o->params, &sock, &fd, &bytes)) < 0) {
		if (sock >= 0)
			close(sock);
		if (fd >= 0)
			close(fd);
		return ac_fail("raw attach", rc, strerror(-rc));
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != bytes || bytes != 4 * o->params)
		ok = 0;
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		ok = 0;
	if (ftruncate(fd, (off_t)bytes + page) == 0)
		ok = 0;
	else
		grow_e = errno;
	if (ftruncate(fd, (off_t)bytes / 2) == 0)
		ok = 0;
	else
		shrink_e = errno;
	if (pwrite(fd, &one, 1, (off_t)bytes) >= 0)
		ok = 0;
	else
		pwrite_e = errno;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0)
		ok = 0;
	else
		seal_e = errno;
	/* A mapping may reach past the end of the file, but the first page
	 * past it cannot be touched. */
	end = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
	sig = ac_touch_in_child(fd, end + (size_t)page, end);
	if (sig != SIGBUS)
		ok = 0;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != bytes)
		ok = 0;
	printf("{\"event\":\"sealed\",\"ok\":%s,\"bytes\":%zu,\"size\":%lld,"
	    "\"seals\":{\"shrink\":%s,\"grow\":%s,\"seal\":%s,\"write\":%s},"
	    "\"grow\":\"%s\",\"shrink\":\"%s\",\"pwrite_past\":\"%s\",\"add_seal\":\"%s\","
	    "\"touch_past\":\"%s\"}\n",
	    ok ? "true" : "false", bytes, (long long)st.st_size,
	    seals >= 0 && (seals & F_SEAL_SHRINK) ? "true" : "false",
	    seals >= 0 && (seals & F_SEAL_GROW) ? "true" : "false",
	    seals >= 0 && (seals & F_SEAL_SEAL) ? "true" : "false",
	    seals >= 0 && (seals & F_SEAL_WRITE) ? "true" : "false",
	    grow_e ? ac_errno_name(grow_e) : "allowed", shrink_e ? ac_errno_name(shrink_e) : "allowed",
	    pwrite_e ? ac_errno_name(pwrite_e) : "allowed", seal_e ? ac_errno_name(seal_e) : "allowed",
	    sig == SIGBUS ? "SIGBUS" : sig > 0 ? strsignal(sig) : "no signal");
	close(fd);
	(void)!send(sock, "{\"cmd\":\"detach\"}\n", 17, MSG_NOSIGNAL);
	close(sock);
	return ok ? 0 : 3;
}

/* --- the trainer --- */

static void
ac_usage(FILE *f)
{
	fprintf(f, "Usage: attach_client -s SOCKET [--params N] [--steps K] [--sleep-ms MS]\n"
	    "       [--seed S] [--timeout-ms MS] [--hold S] [--close-early] [--write-past]\n"
	    "       [--status] [--evaluate] [--leave] [--from] [--optimizer KIND]\n"
	    "       [--whole OFF:COUNT]...\n");
}

static int
ac_parse(int argc, char **argv, struct ac_opts *o)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "params", required_argument, NULL, 'n' },
		{ "steps", required_argument, NULL, 'k' },
		{ "sleep-ms", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 'r' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "hold", required_argument, NULL, 'H' },
		{ "close-early", no_argument, NULL, 'C' },
		{ "write-past", no_argument, NULL, 'W' },
		{ "status", no_argument, NULL, 'S' },
		{ "evaluate", no_argument, NULL, 'E' },
		{ "leave", no_argument, NULL, 'L' },
		{ "from", no_argument, NULL, 'F' },
		{ "optimizer", required_argument, NULL, 'O' },
		{ "whole", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*o = (struct ac_opts){ .params = 256, .steps = 50, .seed = 1, .timeout_ms = -1 };
	while ((ch = getopt_long(argc, argv, "s:h", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o->socket = optarg; break;
		case 'n': o->params = strtoull(optarg, NULL, 10); break;
		case 'k': o->steps = strtol(optarg, NULL, 10); break;
		case 'm': o->sleep_ms = strtol(optarg, NULL, 10); break;
		case 'r': o->seed = strtoull(optarg, NULL, 10); break;
		case 't': o->timeout_ms = (int)strtol(optarg, NULL, 10); break;
		case 'H': o->hold_s = strtol(optarg, NULL, 10); break;
		case 'C': o->close_early = 1; break;
		case 'W': o->write_past = 1; break;
		case 'S': o->status = 1; break;
		case 'E': o->evaluate = 1; break;
		case 'L': o->leave = 1; break;
		case 'F': o->from = 1; break;
		case 'O': o->optimizer = optarg; break;
		case 'w':
			if (o->nwhole == AC_MAX_WHOLE || sscanf(optarg, "%zu:%zu",
			    &o->whole[2 * o->nwhole], &o->whole[2 * o->nwhole + 1]) != 2)
				return -1;
			o->nwhole++;
			break;
		case 'h': ac_usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (optind != argc || o->steps < 0 || o->sleep_ms < 0 || o->hold_s < 0)
		return -1;
	return 0;
}

/* Each seed its own initial model, as processes seeding themselves have. */
static void
ac_init(float *w, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		w[i] = (float)(0.1 * cos((double)i + 0.5 * (double)seed));
}

/* Attach as o asks: with --from, initial parameters made first. */
static int
ac_attach(const struct ac_opts *o, struct gd_client **c, char *err, size_t errlen)
{
	float *init;
	int rc;

	if (!o->from)
		return gd_client_attach(o->socket, o->params, c, err, errlen);
	if ((init = calloc(o->params, sizeof(*init))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ac_init(init, o->params, o->seed);
	rc = gd_client_attach_from(o->socket, init, o->params, c, err, errlen);
	free(init);
	return rc;
}

int
main(int argc, char **argv)
{
	struct ac_opts o;
	struct gd_client *c = NULL;
	char err[512], loss_s[64] = "null", first_s[64] = "null";
	double *g = NULL, loss = NAN, first = NAN;
	uint64_t step, rng;
	long mixed = 0, k;
	int rc, stop = 0, ret = 1, mapped = 1, cloexec, nfds;
	float *w;
	size_t n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ac_fd_scan(1, &cloexec);
	if (ac_parse(argc, argv, &o) < 0) {
		ac_usage(stderr);
		return 2;
	}
	if (o.write_past)
		return ac_write_past(&o);
	if ((rc = ac_attach(&o, &c, err, sizeof(err))) < 0) {
		ac_fail("attach", rc, err);
		printf("{\"event\":\"detached\",\"fds_left\":%d}\n", ac_fd_scan(0, &cloexec));
		return 1;
	}
	if (o.timeout_ms >= 0)
		gd_client_set_timeout(c, o.timeout_ms);
	if (o.optimizer != NULL &&
	    (rc = gd_client_set_optimizer(c, o.optimizer, err, sizeof(err))) < 0) {
		ac_fail("optimizer", rc, err);
		goto out;
	}
	if (o.nwhole > 0 && (rc = gd_client_set_whole(c, o.whole, o.nwhole, err,
	    sizeof(err))) < 0) {
		ac_fail("whole", rc, err);
		goto out;
	}
	w = gd_client_params(c);
	n = gd_client_nparams(c);
	step = gd_client_start_step(c);
	nfds = ac_fd_scan(0, &cloexec);
	printf("{\"event\":\"attached\",\"pid\":%d,\"params\":%zu,\"fresh\":%s,\"step\":%" PRIu64
	    ",\"hash\":\"%016" PRIx64 "\",\"sum\":%.9g,\"finite\":%s,\"new_fds\":%d,"
	    "\"cloexec\":%s}\n", (int)getpid(), n, gd_client_fresh(c) ? "true" : "false", step,
	    ac_hash(w, n), ac_sum(w, n), ac_finite(w, n) ? "true" : "false", nfds,
	    cloexec ? "true" : "false");
	if (o.close_early) {
		/* The library would unmap it at detach; unmapping it twice is
		 * harmless while nothing else is mapped there meanwhile. */
		if (munmap(w, n * sizeof(float)) < 0)
			return ac_fail("munmap", -errno, strerror(errno));
		mapped = 0;
		printf("{\"event\":\"unmapped\"}\n");
	} else if (gd_client_fresh(c) && !o.from) {
		ac_init(w, n, o.seed);
	}
	if ((g = calloc(n, sizeof(*g))) == NULL)
		return ac_fail("calloc", -ENOMEM, "out of memory");
	rng = 0x9e3779b97f4a7c15ULL * (o.seed + 1);
	if ((rc = gd_client_step(c, step, NULL, &stop, err, sizeof(err))) < 0) {
		ac_fail("first step", rc, err);
		goto out;
	}
	mixed += rc;
	for (k = 0; k < o.steps && !stop; k++) {
		struct gd_client_report r = GD_CLIENT_REPORT_INIT;

		if (mapped) {
			loss = ac_sgd(w, n, &rng, g);
			if (isnan(first))
				first = loss;
			r.loss = loss;
		}
		r.samples = AC_BATCH;
		r.epoch = (double)(step / 100);
		if (o.sleep_ms > 0)
			ac_sleep_ms(o.sleep_ms);
		if ((rc = gd_client_step(c, ++step, &r, &stop, err, sizeof(err))) < 0) {
			ac_fail("step", rc, err);
			goto out;
		}
		mixed += rc;
		printf("{\"event\":\"step\",\"step\":%" PRIu64 ",\"mixed\":%d,\"loss\":%.9g,"
		    "\"stop\":%s}\n", step, rc, mapped ? loss : 0.0, stop ? "true" : "false");
	}
	if (o.evaluate) {
		uint64_t own = ac_hash(w, n), seen;
		int job;

		if ((job = gd_client_evaluate(c, err, sizeof(err))) < 0) {
			ac_fail("evaluate", job, err);
			goto out;
		}
		seen = ac_hash(w, n);
		if ((rc = gd_client_train(c, err, sizeof(err))) < 0) {
			ac_fail("train", rc, err);
			goto out;
		}
		printf("{\"event\":\"evaluate\",\"job_model\":%d,\"restored\":%d,\"own\":\"%016"
		    PRIx64 "\",\"seen\":\"%016" PRIx64 "\",\"back\":\"%016" PRIx64 "\"}\n", job, rc,
		    own, seen, ac_hash(w, n));
	}
	if (o.status) {
		char *s = NULL;

		if ((rc = gd_client_status(c, &s, err, sizeof(err))) < 0) {
			ac_fail("status", rc, err);
			goto out;
		}
		printf("{\"event\":\"status\",\"reply\":%s}\n", s);
		free(s);
	}
	if (o.leave) {
		if ((rc = gd_client_leave(c, err, sizeof(err))) < 0) {
			ac_fail("leave", rc, err);
			goto out;
		}
		printf("{\"event\":\"left\"}\n");
		for (k = 0; k < 1000 && !stop; k++) {
			if (mapped)
				loss = ac_sgd(w, n, &rng, g);
			if ((rc = gd_client_step(c, ++step, NULL, &stop, err, sizeof(err))) < 0) {
				ac_fail("step after leave", rc, err);
				goto out;
			}
		}
		printf("{\"event\":\"stopped\",\"stop\":%s,\"step\":%" PRIu64 "}\n",
		    stop ? "true" : "false", step);
		if (!stop)
			goto out;
	}
	if (isfinite(loss))
		snprintf(loss_s, sizeof(loss_s), "%.9g", loss);
	if (isfinite(first))
		snprintf(first_s, sizeof(first_s), "%.9g", first);
	if (mapped)
		printf("{\"event\":\"done\",\"step\":%" PRIu64 ",\"mixed\":%ld,\"loss\":%s,"
		    "\"first_loss\":%s,\"hash\":\"%016" PRIx64 "\",\"sum\":%.9g,\"finite\":%s}\n",
		    step, mixed, loss_s, first_s, ac_hash(w, n), ac_sum(w, n),
		    ac_finite(w, n) ? "true" : "false");
	else
		printf("{\"event\":\"done\",\"step\":%" PRIu64 ",\"mixed\":%ld}\n", step, mixed);
	if (o.hold_s > 0) {
		printf("{\"event\":\"holding\",\"step\":%" PRIu64 "}\n", step);
		ac_sleep_ms(o.hold_s * 1000);
	}
	ret = 0;
out:
	free(g);
	gd_client_detach(c);
	printf("{\"event\":\"detached\",\"fds_left\":%d}\n", ac_fd_scan(0, &cloexec));
	return ret;
}
