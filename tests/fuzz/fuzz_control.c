/*
 * fuzz_control: the control socket server (control.c): its line framing,
 * JSON parse and handler dispatch, over a real Unix socket on a private
 * libuv loop. The command dispatcher itself is static in main.c (it needs
 * the whole daemon), so this target stops at control.c's public boundary:
 * a handler in the harness stands in for it, with a table of behaviours
 * that cover control.c's paths (immediate, large, deferred and error
 * replies, watch and broadcast) and config_set for "set", the runtime
 * key parser that main's "set" calls.
 *
 * The input is what one client writes; it then shuts down its writing side
 * (as `printf ... | socat -` does) and reads until the server closes (or,
 * having asked to watch, until every request is answered: a watcher's
 * stream stays open). The oracle: every complete non-empty request line
 * gets exactly one reply line ({"ok":...}) before the server closes,
 * and none of them is control.c's "internal error" (a reply the handler
 * built and jansson refused, as an error quoting the client's multi-byte
 * text cut inside a character was); abort() otherwise.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "control.h"
#include "fuzz.h"
#include "gossipd/control.h"
#include "log.h"

#define FUZZ_BIG_REPLY (48 * 1024)
#define FUZZ_DEFERRED 64

static uv_loop_t loop;
static struct control *ctl;
static struct config cfg;
static char dir[64], path[96];
static char *big;
static uint64_t deferred[FUZZ_DEFERRED];
static size_t ndeferred, ndeferred_total;
static int broadcast_due;
static int watching;		/* this input's client asked to watch */

typedef int (*fuzz_cmd_fn)(uint64_t client, json_t *req, json_t **reply);

static int
fuzz_cmd_ok(uint64_t client, json_t *req, json_t **reply)
{
	(void)client;
	(void)req;
	*reply = json_pack("{s:b}", "ok", 1);
	return CONTROL_REPLIED;
}

static int
fuzz_cmd_big(uint64_t client, json_t *req, json_t **reply)
{
	(void)client;
	(void)req;
	*reply = json_pack("{s:b, s:s}", "ok", 1, "text", big);
	return CONTROL_REPLIED;
}

static int
fuzz_cmd_later(uint64_t client, json_t *req, json_t **reply)
{
	(void)req;
	if (ndeferred == FUZZ_DEFERRED) {
		*reply = control_error("busy");
		return CONTROL_REPLIED;
	}
	deferred[ndeferred++] = client;
	ndeferred_total++;
	return CONTROL_DEFERRED;
}

static int
fuzz_cmd_watch(uint64_t client, json_t *req, json_t **reply)
{
	control_watch(ctl, client);
	broadcast_due = 1;
	watching = 1;
	return fuzz_cmd_ok(client, req, reply);
}

static int
fuzz_cmd_set(uint64_t client, json_t *req, json_t **reply)
{
	const char *key = json_string_value(json_object_get(req, "key"));
	const char *value = json_string_value(json_object_get(req, "value"));
	struct errbuf err = { "" };

	if (key == NULL || value == NULL) {
		*reply = control_error("set needs \"key\" and \"value\" strings");
		return CONTROL_REPLIED;
	}
	if (config_set(&cfg, key, value, &err) < 0) {
		*reply = control_error("%s", err.msg);
		return CONTROL_REPLIED;
	}
	return fuzz_cmd_ok(client, req, reply);
}

static const struct {
	const char *cmd;
	fuzz_cmd_fn fn;
} fuzz_cmds[] = {
	{ "status", fuzz_cmd_ok },
	{ "stats", fuzz_cmd_ok },
	{ "peers", fuzz_cmd_ok },
	{ "metrics", fuzz_cmd_big },
	{ "checkpoint", fuzz_cmd_later },
	{ "watch", fuzz_cmd_watch },
	{ "set", fuzz_cmd_set },
};

static int
fuzz_handler(struct control *c, uint64_t client, const char *cmd, json_t *req,
    json_t **reply, void *arg)
{
	(void)c;
	(void)arg;
	for (size_t i = 0; i < sizeof(fuzz_cmds) / sizeof(fuzz_cmds[0]); i++) {
		if (strcmp(cmd, fuzz_cmds[i].cmd) == 0)
			return fuzz_cmds[i].fn(client, req, reply);
	}
	*reply = control_error("unknown command '%s'", cmd);
	return CONTROL_REPLIED;
}

static void
fuzz_cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

static void
fuzz_init(void)
{
	char *argv[] = { (char *)"gossipd", NULL };
	struct errbuf err = { "" };

	if (ctl != NULL)
		return;
	log_set_level(LOG_ERROR);
	/* As in gossipd: a write to a client that hung up is EPIPE, not death. */
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/gd-fuzz-control.XXXXXX");
	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	atexit(fuzz_cleanup);
	big = malloc(FUZZ_BIG_REPLY + 1);
	memset(big, 'm', FUZZ_BIG_REPLY);
	big[FUZZ_BIG_REPLY] = '\0';
	if (config_load(&cfg, 1, argv, &err) != 0 || uv_loop_init(&loop) != 0 ||
	    control_open(&loop, path, fuzz_handler, NULL, &ctl, &err) != 0) {
		fprintf(stderr, "fuzz_control: %s\n", err.msg);
		abort();
	}
}

/* Replies control.c owes for data[0..size): [*min, *max]. A line is
 * handled up to its first NUL, without a trailing CR; deferred replies and
 * a last line without newline may or may not be answered. */
static void
fuzz_expect(const uint8_t *data, size_t size, size_t *min, size_t *max)
{
	const uint8_t *p = data, *end = data + size;

	*min = *max = 0;
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		size_t eff = strnlen((const char *)p, len);

		if (len + 1 > GD_CONTROL_MAX_LINE) {
			(*max)++;	/* the refusal */
			return;
		}
		if (eff > 0 && p[eff - 1] == '\r')
			eff--;
		if (eff > 0) {
			*min += nl != NULL;
			(*max)++;
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
}

static double
fuzz_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Answer deferred requests and broadcast to watchers, as the daemon does
 * from its timers. */
static void
fuzz_daemon_work(void)
{
	json_t *ev;

	for (size_t i = 0; i < ndeferred; i++)
		control_reply(ctl, deferred[i], json_pack("{s:b, s:s}", "ok", 1, "file", "x"));
	ndeferred = 0;
	if (broadcast_due) {
		ev = json_pack("{s:s}", "event", "progress");
		control_broadcast(ctl, ev);
		json_decref(ev);
		broadcast_due = 0;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char reply_start[] = "{\"ok\"";
	static const char internal[] = "\"internal error";
	size_t off = 0, replies = 0, min, max, carry = 0;
	int match = 0;
	/* The tail of the previous read ahead of this one, so that a string
	 * split between two reads is still found. */
	char buf[sizeof(internal) + 65536];
	double start;
	int fd, shut = 0;

	fuzz_init();
	ndeferred_total = 0;
	watching = 0;
	fuzz_expect(data, size, &min, &max);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	start = fuzz_clock();
	for (;;) {
		ssize_t n;

		if (off < size) {
			n = write(fd, data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			else if (n < 0 && errno != EAGAIN)
				off = size;	/* the server closed on us */
		}
		if (off == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		uv_run(&loop, UV_RUN_NOWAIT);
		fuzz_daemon_work();
		n = read(fd, buf + carry, sizeof(buf) - carry);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			break;
		/* Count reply lines; broadcast events are not replies. */
		for (ssize_t i = carry; i < (ssize_t)carry + n; i++) {
			if (buf[i] == '\n')
				match = 0;
			else if (match >= 0 && match < 5)
				match = buf[i] == reply_start[match] ? match + 1 : -1;
			if (match == 5) {
				replies++;
				match = -1;
			}
		}
		if (n > 0) {
			size_t have = carry + (size_t)n;

			if (memmem(buf, have, internal, sizeof(internal) - 1) != NULL) {
				fprintf(stderr, "fuzz_control: a reply is an internal error\n");
				abort();
			}
			carry = have < sizeof(internal) ? have : sizeof(internal);
			memmove(buf, buf + have - carry, carry);
		}
		/* A watcher that shut its writing side keeps its stream open:
		 * it is done once every request is answered. */
		if (watching && shut && replies >= min)
			break;
		if (fuzz_clock() - start > 10) {
			fprintf(stderr, "fuzz_control: %zu replies to %zu..%zu requests, and the "
			    "server never closed the connection\n", replies, min, max);
			abort();
		}
	}
	close(fd);
	for (int i = 0; i < 4; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	min = min > ndeferred_total ? min - ndeferred_total : 0;
	if (replies < min || replies > max) {
		fprintf(stderr, "fuzz_control: %zu replies to %zu..%zu requests\n", replies,
		    min, max);
		abort();
	}
	return 0;
}
