/*
 * test_stall: a transport whose loop stood still does not blame its peers
 * for it. V sends to W (two real transports on one loop, timeout 1 s), then
 * the loop stands still for 2.5 s before it runs: W's answers are there to
 * read, but on the real clock the first tick after the stall would give up
 * on W. The send must succeed. Then a send to an address nobody listens on
 * must still fail, in about one timeout: the clock that leaves out stalls
 * still runs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "check.h"
#include "session.h"
#include "transport.h"
#include "util.h"

#define T_MSG		64
#define TIMEOUT_MS	1000
#define STALL_US	2500000

static const char *const type_names[] = { "msg" };
static const struct proto msg_proto = { "msg", T_MSG, T_MSG, type_names };

static struct {
	uv_loop_t		loop;
	struct transport	*v, *w;
	char			w_addr[32];
	int			got, status, done;
	double			dead_sent;
} g;

static void
closed(void *arg)
{
	(void)arg;
}

static void
on_dead_sent(void *arg, int status)
{
	double took = util_now() - g.dead_sent;

	(void)arg;
	CHECKF(status != 0, "a send to nobody succeeded");
	CHECKF(took < 5.0, "a send to nobody took %.1f s to fail", took);
	printf("a send to nobody failed after %.2f s: %s\n", took,
	    strerror(-status));
	g.done = 1;
	transport_close(g.v, closed, NULL);
	transport_close(g.w, closed, NULL);
}

static void
on_sent(void *arg, int status)
{
	(void)arg;
	g.status = status;
	CHECKF(status == 0, "the send across the stall failed: %s",
	    strerror(-status));
	CHECK(g.got == 1);
	g.dead_sent = util_now();
	/* Port 1 of loopback: nothing listens there. */
	CHECK(transport_send(g.v, "127.0.0.1:1", T_MSG, "x", 1, on_dead_sent,
	    NULL) == 0);
}

static void
w_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *p, size_t len)
{
	(void)arg;
	(void)sender;
	(void)addr;
	CHECK(type == T_MSG && len == 5 && memcmp(p, "hello", 5) == 0);
	g.got++;
}

static int
open_one(const uint8_t *key, uint64_t id, char *addr, size_t addr_size,
    struct transport **out)
{
	struct transport_params tp;
	struct errbuf err;
	int rc, tries;

	for (tries = 0; tries < 50; tries++) {
		snprintf(addr, addr_size, "127.0.0.1:%u",
		    20000 + randombytes_uniform(40000));
		memset(&tp, 0, sizeof(tp));
		tp.listen = addr;
		tp.key = key;
		tp.job = "stall";
		tp.self_id = id;
		tp.op_timeout_ms = TIMEOUT_MS;
		rc = transport_open(&g.loop, &tp, NULL, NULL, out, &err);
		if (rc != -EADDRINUSE)
			return rc;
	}
	return -EADDRINUSE;
}

static void
test_stall(void)
{
	uint8_t key[SESSION_KEY_SIZE];
	char v_addr[32];
	struct errbuf err;

	REQUIRE(sodium_init() >= 0);
	randombytes_buf(key, sizeof(key));
	REQUIRE(uv_loop_init(&g.loop) == 0);
	REQUIRE(open_one(key, 1, v_addr, sizeof(v_addr), &g.v) == 0);
	REQUIRE(open_one(key, 2, g.w_addr, sizeof(g.w_addr), &g.w) == 0);
	REQUIRE(transport_register(g.w, &msg_proto, w_recv, NULL, &err) == 0);
	g.status = 1;
	REQUIRE(transport_send(g.v, g.w_addr, T_MSG, "hello", 5, on_sent,
	    NULL) == 0);
	usleep(STALL_US);
	uv_run(&g.loop, UV_RUN_DEFAULT);
	CHECK(g.status == 0 && g.done);
	REQUIRE(uv_loop_close(&g.loop) == 0);
}

static const struct check_case cases[] = {
	{ "stall_send_after_stall", test_stall },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_stall");
}
