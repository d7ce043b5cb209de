/*
 * drift: what mode delta sends, and the residual it keeps (error
 * feedback). The anchor is, per coordinate, the value this peer's model had
 * right after the coordinate was last mixed with a partner: the value that
 * partner holds too. The drift x - anchor is everything this peer has
 * learnt there that no partner has seen yet. An exchange sends the k
 * coordinates whose drift is largest, and what it does not send stays in
 * the drift for the next one: nothing is lost, it waits, and a coordinate
 * that keeps moving is sent sooner.
 *
 * One anchor per peer, not one copy per partner (CHOCO-SGD keeps x-hat
 * copies of every neighbour): partners change every round under adaptive
 * selection, and a per-partner copy would be stale or missing most of the
 * time. The anchor needs no agreement with anyone: the partner mixes the
 * values it receives into its own model, whatever it last saw of ours. So
 * the memory is d floats whatever the number of partners, plus a 64 Ki
 * float chunk and a 256 KiB histogram for the selection.
 *
 * Selection reads the model in chunks, twice (topk.h): k come out (a few
 * fewer if the model moved between the passes; never more), sorted.
 */
#ifndef GD_DRIFT_H
#define GD_DRIFT_H

#include <stddef.h>

#include "mask.h"
#include "model.h"

struct drift;

int drift_new(struct drift **out);
void drift_free(struct drift *dr);
/* Forget the anchor (the model was replaced: a pulled or restored one);
 * the next selection takes the model as it is then. */
void drift_reset(struct drift *dr);
/* Anchor at m as it is now, unless anchored already: what it learns from
 * here is what the next selections send first. Called where the job's
 * model starts (gossip_set_ready): a peer's first steps move it most, and
 * anchored at its first selection a few steps later, those moves would
 * never count as drift. 0, or a negative errno (the next selection then
 * tries again). */
int drift_anchor(struct drift *dr, struct model *m);
/* The k coordinates of m that drifted most (all of them when k >= d) into
 * out, their current values into values (room for k floats); out may hold
 * fewer, even none, when the model moved between the two passes. The first call (and
 * the first after drift_reset) anchors at the model as it is, if nothing
 * anchored it before. */
int drift_select(struct drift *dr, struct model *m, size_t k, struct mask *out,
    float *values);
/* 1 when there is an anchor to move (drift_anchor or a selection since
 * the start or the last drift_reset). */
int drift_anchored(const struct drift *dr);
/* Coordinates of mk were mixed and now hold mixed[] on both sides. */
void drift_mixed(struct drift *dr, const struct mask *mk, const float *mixed);

#endif
