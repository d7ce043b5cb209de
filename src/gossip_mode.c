/*
 * gossip_mode: see gossip_mode.h. The rows are indexed by enum gossip_mode
 * but carry their wire byte apart, so the enum's order is free and the
 * bytes peers already send stay what they are.
 */
#include "gossip_mode.h"

#include <errno.h>

#include "drift.h"
#include "mask.h"

/* mask_dense in build's shape: the whole model, whatever the REQ says. */
static int
gossip_mode_all(struct mask *m, uint64_t seed, uint64_t nonce, size_t d, double density,
    size_t block)
{
	(void)seed;
	(void)nonce;
	(void)density;
	(void)block;
	return mask_dense(m, d);
}

static const struct gossip_mode_row gossip_modes[GOSSIP_MODE_N] = {
	[GOSSIP_SAPS] = { "saps", 0, "a sparse random slice (saps)",
	    mask_build, NULL, mask_check, 0, 0, GOSSIP_SAPS, 0 },
	[GOSSIP_DENSE] = { "dense", 1, "the whole model (dense)",
	    gossip_mode_all, NULL, NULL, 1.0, 1, GOSSIP_DENSE, 0 },
	/* Closing sends random slices: what is left then is disagreement
	 * with the others, which this peer's own drift does not show (no
	 * more training: its drift is all but zero). */
	[GOSSIP_DELTA] = { "delta", 2,
	    "the coordinates that moved most since they were last mixed (delta)",
	    NULL, drift_select, NULL, 0, 0, GOSSIP_SAPS, 0 },
	/* Closing as delta does, for the same reason. */
	[GOSSIP_SHARE] = { "share", 3,
	    "send every member its largest moves since its last round (share)",
	    NULL, NULL, NULL, 0, 0, GOSSIP_SAPS, 1 },
};

const struct gossip_mode_row *
gossip_mode_row(enum gossip_mode m)
{
	return (unsigned)m < GOSSIP_MODE_N ? &gossip_modes[m] : NULL;
}

int
gossip_mode_by_wire(uint8_t wire, enum gossip_mode *out)
{
	for (int i = 0; i < GOSSIP_MODE_N; i++) {
		if (gossip_modes[i].wire == wire) {
			*out = (enum gossip_mode)i;
			return 0;
		}
	}
	return -EBADMSG;
}

double
gossip_mode_density(enum gossip_mode m, double density)
{
	return gossip_modes[m].density > 0 ? gossip_modes[m].density : density;
}

const char *
gossip_mode_name(enum gossip_mode m)
{
	const struct gossip_mode_row *r = gossip_mode_row(m);

	return r != NULL ? r->name : "unknown";
}

const char *
gossip_mode_choice(int i, const char **about)
{
	const struct gossip_mode_row *r = gossip_mode_row((enum gossip_mode)i);

	if (r == NULL)
		return NULL;
	*about = r->about;
	return r->name;
}
