/*
 * fuzz_gossip: gossip_recv (REQ, REPLY) on a small real model
 * (3-5-3, d = 38 parameters, cpu backend), reset to the same values for
 * every input. Input: one flags byte (bit 0: this peer first starts an
 * exchange with 10.0.0.2:2; bit 1: dense mode; bit 2: fp16 values; bit 3:
 * not ready, as a joiner; bit 4: delta mode; bit 5: int8 values), then
 * records
 *	u8 type (80 + n % 2), u8 flags (bit 0: from another peer than the
 *	partner; bit 1: patch the nonce of our REQ into bytes 8..15, so a
 *	REPLY can match), u16 length, the message, u8 milliseconds to let pass
 * Sends are recorded and called back after each record. ASan/UBSan and
 * signals (SIGFPE) are the oracle.
 */
#include <errno.h>
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_model.h"
#include "gossip.h"
#include "wire.h"

static uint8_t req_nonce[8];

static int
fuzz_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    void (*cb)(void *cbarg, int status), void *cbarg)
{
	(void)arg;
	(void)addr;
	if (type == GOSSIP_T_REQ && len >= 16)
		memcpy(req_nonce, (const uint8_t *)buf + 8, 8);
	return fuzz_hold(cb, cbarg);
}

static void
fuzz_done(void *arg, const char *addr, double now, enum gossip_result r, size_t bytes,
    double seconds)
{
	(void)arg;
	(void)addr;
	(void)now;
	(void)r;
	(void)bytes;
	(void)seconds;
}

static uint64_t
fuzz_step(void *arg)
{
	(void)arg;
	return 7;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[FUZZ_MSG_MAX];
	struct fuzz_in in = { data, size };
	struct gossip_params p = { .mode = GOSSIP_SAPS, .values = GOSSIP_FP32, .density = 0.5,
	    .block = 4, .seed = 42, .timeout = 1.0 };
	struct gossip_ops ops = { fuzz_send, fuzz_done, fuzz_step, NULL, NULL };
	struct gossip *g;
	double now = 10.0;
	uint8_t flags;

	flags = fuzz_u8(&in);
	if (flags & 2)
		p.mode = GOSSIP_DENSE;
	if (flags & 16)
		p.mode = GOSSIP_DELTA;
	if (flags & 4)
		p.values = GOSSIP_FP16;
	if (flags & 32)
		p.values = GOSSIP_INT8;
	if (gossip_new(&p, fuzz_model(), &ops, &g) != 0)
		abort();
	if (flags & 8)
		gossip_set_ready(g, 0);
	if (flags & 1)
		(void)gossip_start(g, now, "10.0.0.2:2");
	while (in.n > 0) {
		uint8_t type, f;
		size_t len = fuzz_msg(&in, GOSSIP_T_FIRST, &type, &f, msg);

		if ((f & 2) && len >= 16)
			memcpy(msg + 8, req_nonce, 8);
		fuzz_release(0);
		gossip_recv(g, now, f & 1 ? "10.0.0.3:3" : "10.0.0.2:2", type, msg, len);
		now += fuzz_u8(&in) * 0.001;
		(void)gossip_tick(g, now);
	}
	(void)gossip_exchanges(g, GOSSIP_GAP_ANY);
	(void)gossip_consensus_distance(g);
	FUZZ_STATS(gossip_stats_json, g);
	fuzz_release(-ECANCELED);
	gossip_free(g);
	return 0;
}
