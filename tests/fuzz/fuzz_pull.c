/*
 * fuzz_pull: pull_recv (PULL, CHUNK) and a joiner's events on a small real
 * model (3-5-3, d = 38 parameters, one chunk, cpu backend), reset to the
 * same values for every input. Input: one flags byte (bit 0: this peer
 * is a joiner, still pulling; bits 1-2: how many of the members
 * 10.0.0.1:1 .. 10.0.0.3:3 are live and shown to it; bits 3-4 modulo 3:
 * the value format it asks for, enum gossip_values), then records
 *	u8 type (82 + n % 2), u8 flags (bits 0-1: the sender, 10.0.0.N:N
 *	with N = 1 + n, 4 being no member; bit 2: patch the id of the last
 *	PULL sent to the sender into bytes 0..7, so a CHUNK can match; bit 3:
 *	the sender goes down after the message; bit 4: ops->pulled refuses
 *	the model), u16 length, the message, u8 tens of milliseconds to let
 *	pass
 * After each record the clock moves, pull_tick and pull_members run.
 * ASan/UBSan are the oracle, and the pulled model: it must be finite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_model.h"
#include "pull.h"
#include "wire.h"

#define FUZZ_PEERS 4

static const char *const addrs[FUZZ_PEERS] = { "10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3",
	"10.0.0.4:4" };
static uint8_t last_id[FUZZ_PEERS][8];
static struct model *model;
static int refuse;

static int
fuzz_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    void (*cb)(void *cbarg, int status), void *cbarg)
{
	(void)arg;
	for (int i = 0; i < FUZZ_PEERS; i++)
		if (type == PULL_T_PULL && len >= 8 && strcmp(addr, addrs[i]) == 0)
			memcpy(last_id[i], buf, 8);
	return fuzz_hold(cb, cbarg);
}

static uint64_t
fuzz_step(void *arg)
{
	(void)arg;
	return 7;
}

static int
fuzz_pulled(void *arg, const float *params, uint64_t step, const char *donors)
{
	(void)arg;
	(void)step;
	(void)donors;
	for (size_t i = 0; i < model->d; i++) {
		if (!isfinite(params[i])) {
			fprintf(stderr, "fuzz_pull: pulled parameter %zu is %g\n", i, params[i]);
			abort();
		}
	}
	return refuse ? -EIO : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[FUZZ_MSG_MAX];
	struct fuzz_in in = { data, size };
	struct pull_ops ops = { fuzz_send, fuzz_step, fuzz_pulled, NULL, NULL, NULL };
	const char *live[FUZZ_PEERS];
	size_t nlive = 0;
	struct pull *p;
	double now = 10.0;
	uint8_t flags;

	model = fuzz_model();
	memset(last_id, 0, sizeof(last_id));
	refuse = 0;
	flags = fuzz_u8(&in);
	if (pull_new(model, 1.0, flags & 1, &ops, &p) != 0)
		abort();
	pull_set_values(p, (enum gossip_values)((flags >> 3 & 3) % GOSSIP_VALUES_N));
	for (int i = 0; i < (flags >> 1 & 3); i++)
		live[nlive++] = addrs[i];
	pull_members(p, now, live, nlive);
	while (in.n > 0) {
		uint8_t type, f;
		size_t len = fuzz_msg(&in, PULL_T_FIRST, &type, &f, msg);
		int from = f & 3;

		if ((f & 4) && len >= 8)
			memcpy(msg, last_id[from], 8);
		refuse = f & 16;
		fuzz_release(0);
		pull_recv(p, now, addrs[from], type, msg, len);
		if (f & 8) {
			pull_donor_down(p, now, addrs[from]);
			for (size_t i = 0; i < nlive; i++)
				if (live[i] == addrs[from])
					live[i] = live[--nlive];
		}
		now += fuzz_u8(&in) * 0.01;
		(void)pull_tick(p, now);
		pull_members(p, now, live, nlive);
	}
	FUZZ_STATS(pull_stats_json, p);
	fuzz_release(-ECANCELED);
	pull_free(p);
	return 0;
}
