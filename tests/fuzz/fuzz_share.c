/*
 * fuzz_share: share_recv (mode share's SHARE) on a small real model
 * (3-5-3, d = 38 parameters, cpu backend), reset to the same values for
 * every input. Input: one flags byte (bit 0: this peer holds an anchor;
 * bit 1: shares go through a trust, factor 4; bit 2: this peer first takes
 * a round of its own, int8 values with bit 3, int2 with bit 4 (bit 3
 * unset), which also gives the fallback radius), then records
 *	u8 type (ignored), u8 flags (bit 0: from 10.0.0.3:3, else
 *	10.0.0.2:2), u16 length, the message, u8 milliseconds to let pass
 * ASan/UBSan and signals (SIGFPE) are the oracle.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "fuzz_model.h"
#include "share.h"
#include "trust.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[FUZZ_MSG_MAX];
	struct fuzz_in in = { data, size };
	struct model *m = fuzz_model();
	struct trust *t = NULL;
	struct share *s;
	double now = 10.0;
	size_t count;
	uint8_t flags;

	flags = fuzz_u8(&in);
	if (share_new(&s) != 0)
		abort();
	if ((flags & 2) && trust_new(&(struct trust_params){ 4.0 }, &t) != 0)
		abort();
	if (flags & 1)
		(void)share_anchor(s, m);
	if (flags & 4)
		(void)share_round(s, m, &(struct share_params){ flags & 8 ? GOSSIP_INT8 :
		    flags & 16 ? GOSSIP_INT2 : GOSSIP_FP32, 0.25, 5 }, 4, &count);
	while (in.n > 0) {
		uint8_t type, f;
		size_t len = fuzz_msg(&in, SHARE_T_SHARE, &type, &f, msg);
		enum share_refusal why;
		struct errbuf err = { "" };

		(void)share_recv(s, m, t, f & 1 ? "10.0.0.3:3" : "10.0.0.2:2", now, 4, msg, len,
		    &why, &err);
		now += fuzz_u8(&in) * 0.001;
	}
	FUZZ_STATS(share_stats_json, s);
	trust_free(t);
	share_free(s);
	return 0;
}
