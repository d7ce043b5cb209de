/*
 * origin: this peer's model as it was when it first judged a slice of the
 * job's model, and how much of the way this peer has come since a
 * received slice shares: the projection
 *     share = <theirs - origin, mine - origin> / |mine - origin|^2
 * on the slice's coordinates, with the RMS of mine - origin there.
 *
 * Why: a member that sends an old model (its start, for ever: a
 * free-rider) or negates what it learnt has not come this way at all
 * (share near 0) or has gone back (near -1), while its distance can stay
 * within the honest spread: early in a job models move little, so a stale
 * one is close, no distance test sees it, and each exchange still pulls
 * this peer back. An honest partner has come the same way, give or take
 * the spread (share near 1). The share means something only once the way
 * is long against the spread: the caller judges by it from then on.
 *
 * The origin is taken at the first slice trust judges (it needs a quorum
 * of members: a few exchanges into the job), and again after the model
 * was replaced (a pulled or restored one is a new start). It costs d
 * floats, 4 bytes per parameter, read once; none with trust off.
 */
#ifndef GD_ORIGIN_H
#define GD_ORIGIN_H

#include "mask.h"
#include "model.h"

struct origin;

int origin_new(struct origin **out);
void origin_free(struct origin *o);
/* The model was replaced: the next origin_share takes a new origin. */
void origin_reset(struct origin *o);
/* *share and *way (the RMS of mine - origin) over mask's count
 * coordinates; both 0 at the call that takes the origin from m, and
 * *share 0 while the way is. */
int origin_share(struct origin *o, struct model *m, const struct mask *mask,
    const float *mine, const float *theirs, double *share, double *way);

#endif
