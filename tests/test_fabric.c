/*
 * test_fabric: an endpoint closed while a large message is half received.
 * A sender process streams 1 MiB tagged messages to R without pause; R
 * closes in the middle of the stream, eight times over, each time at a
 * different moment. libfabric 1.17's tcp provider reports a rendezvous
 * read it has half received twice when its connection closes, the second
 * time with no context, and rxm dereferences that (a SIGSEGV in fi_close,
 * in every run of this test before the fix). fabric_close must let such a read finish
 * first; every op must come back exactly once, and the close callback run.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "check.h"
#include "fabric.h"
#include "util.h"

#define MSG_SIZE	(1u << 20)
#define DEPTH		4
#define CYCLES		8
#define TAG		7

static struct {
	uv_loop_t		loop;
	struct fabric		*f;
	struct fabric_op	ops[DEPTH];
	uint8_t			*bufs;
	int			returned[DEPTH];
	unsigned		received;
	int			cycle;
	int			closed;
	uv_timer_t		timer;
} g;

static void
no_frame(void *arg, const uint8_t *buf, size_t len, int status)
{
	(void)arg;
	(void)buf;
	(void)len;
	(void)status;
}

/* --- the sender, a child process --------------------------------------- */

static void
sent(struct fabric_op *op, int status, size_t len)
{
	(void)len;
	/* R has closed: go on without spinning until killed. */
	if (status != 0 && status != -ECANCELED)
		usleep(1000);
	if (fabric_post(g.f, op) != 0)
		_exit(0);
}

/* Starts once R is up (a byte on go): a refused first connection would
 * hold its sends for the provider's reconnect delay. It binds a port the
 * kernel picks: R answers no one. */
static void
sender(const char *to, int go)
{
	struct fabric_params fp = { .host = "127.0.0.1", .port = "0",
	    .frame_size = 16384, .rx_depth = 8 };
	struct errbuf err;
	fi_addr_t addr;
	char c;
	int i;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || read(go, &c, 1) != 1 ||
	    uv_loop_init(&g.loop) != 0 ||
	    fabric_open(&g.loop, &fp, no_frame, NULL, &g.f, &err) != 0 ||
	    fabric_insert(g.f, "127.0.0.1", to, &addr, &err) != 0)
		_exit(1);
	for (i = 0; i < DEPTH; i++) {
		g.ops[i] = (struct fabric_op){ .cb = sent,
		    .kind = FABRIC_OP_TSEND, .buf = g.bufs + i * MSG_SIZE,
		    .len = MSG_SIZE, .addr = addr, .tag = TAG };
		if (fabric_post(g.f, &g.ops[i]) != 0)
			_exit(1);
	}
	uv_run(&g.loop, UV_RUN_DEFAULT);
	_exit(0);
}

/* --- the receiver ------------------------------------------------------ */

static void
closed(void *arg)
{
	(void)arg;
	g.closed++;
}

static void
close_now(uv_timer_t *h)
{
	(void)h;
	fabric_close(g.f, closed, NULL);
}

static void
received(struct fabric_op *op, int status, size_t len)
{
	int i = (int)(op - g.ops);

	if (status == 0 && len == MSG_SIZE) {
		/* Streaming now: close 20 to 125 ms on, a new moment of a
		 * message each cycle. */
		if (g.received++ == 0)
			uv_timer_start(&g.timer, close_now, 20 + 15 * g.cycle, 0);
		if (fabric_post(g.f, op) == 0)
			return;
	}
	g.returned[i]++;
}

static void
open_receiver(struct fabric_params *fp)
{
	struct errbuf err;
	int i;

	REQUIRE(uv_loop_init(&g.loop) == 0);
	REQUIRE(fabric_open(&g.loop, fp, no_frame, NULL, &g.f, &err) == 0);
	memset(g.returned, 0, sizeof(g.returned));
	g.received = 0;
	g.closed = 0;
	for (i = 0; i < DEPTH; i++) {
		g.ops[i] = (struct fabric_op){ .cb = received,
		    .kind = FABRIC_OP_TRECV, .buf = g.bufs + i * MSG_SIZE,
		    .len = MSG_SIZE, .addr = FI_ADDR_UNSPEC, .tag = TAG };
		REQUIRE(fabric_post(g.f, &g.ops[i]) == 0);
	}
}

/* Run R until it closes: after limit_ms, unless the stream starts first
 * (received). */
static void
run_until_closed(uint64_t limit_ms)
{
	uv_timer_init(&g.loop, &g.timer);
	uv_timer_start(&g.timer, close_now, limit_ms, 0);
	uv_run(&g.loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&g.timer, NULL);
	uv_run(&g.loop, UV_RUN_DEFAULT);
	REQUIRE(uv_loop_close(&g.loop) == 0);
}

/* A port R can bind, tried with R alone. */
static void
pick_port(char *port, size_t size, struct fabric_params *fp)
{
	struct errbuf err;
	int tries, rc;

	for (tries = 0; tries < 50; tries++) {
		snprintf(port, size, "%d", 20000 + (int)randombytes_uniform(40000));
		fp->port = port;
		REQUIRE(uv_loop_init(&g.loop) == 0);
		rc = fabric_open(&g.loop, fp, no_frame, NULL, &g.f, &err);
		if (rc == 0) {
			run_until_closed(0);
			return;
		}
		REQUIRE(rc == -EADDRINUSE);
		REQUIRE(uv_loop_close(&g.loop) == 0);
	}
	REQUIRE(!"no free port");
}

static void
test_close_mid_read(void)
{
	char port[16];
	struct fabric_params fp = { .host = "127.0.0.1", .frame_size = 16384,
	    .rx_depth = 8 };
	unsigned long streamed = 0;
	int cycle, i, status, go[2];
	pid_t pid;

	REQUIRE(sodium_init() >= 0);
	g.bufs = xcalloc(DEPTH, MSG_SIZE);
	pick_port(port, sizeof(port), &fp);
	for (cycle = 0; cycle < CYCLES; cycle++) {
		/* The sender is forked first, so that it holds none of R's
		 * sockets. */
		REQUIRE(pipe(go) == 0);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0)
			sender(port, go[0]);
		close(go[0]);
		open_receiver(&fp);
		REQUIRE(write(go[1], "g", 1) == 1);
		close(go[1]);
		g.cycle = cycle;
		run_until_closed(10000);
		kill(pid, SIGKILL);
		REQUIRE(waitpid(pid, &status, 0) == pid);
		CHECKF(g.closed == 1, "cycle %d: close callback ran %d times",
		    cycle, g.closed);
		for (i = 0; i < DEPTH; i++)
			CHECKF(g.returned[i] == 1, "cycle %d: op %d came back "
			    "%d times", cycle, i, g.returned[i]);
		CHECKF(g.received > 0, "cycle %d: nothing streamed", cycle);
		streamed += g.received;
	}
	printf("%d closes mid-stream, %lu MiB received\n", CYCLES, streamed);
	free(g.bufs);
}

static const struct check_case cases[] = {
	{ "fabric_close_mid_read", test_close_mid_read },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_fabric");
}
