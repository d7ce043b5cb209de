/*
 * fault: see fault.h. One row per kind: its name, the default of its
 * parameter, and the rewrite.
 */
#include "fault.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mask.h"
#include "rng.h"
#include "rounds.h"
#include "util.h"

struct fault_row {
	const char *name;
	double x;                 /* the parameter's default; NAN: takes none */
	void (*apply)(struct fault *f, size_t i, float *v, double distance);
};

struct fault {
	const struct fault_row *row;
	double x;
	const float *x0;          /* the model this peer started from */
	struct rng rng;
};

static void
fault_bitflip(struct fault *f, size_t i, float *v, double distance)
{
	uint32_t u;

	(void)i;
	(void)distance;
	if (rng_uniform(&f->rng) >= f->x)
		return;
	memcpy(&u, v, sizeof(u));
	u ^= UINT32_C(1) << rng_below(&f->rng, 32);
	memcpy(v, &u, sizeof(u));
}

static void
fault_scale(struct fault *f, size_t i, float *v, double distance)
{
	(void)i;
	(void)distance;
	*v *= (float)f->x;
}

static void
fault_signflip(struct fault *f, size_t i, float *v, double distance)
{
	(void)distance;
	*v = 2 * f->x0[i] - *v;
}

static void
fault_stale(struct fault *f, size_t i, float *v, double distance)
{
	(void)distance;
	*v = f->x0[i];
}

/* The sign of coordinate i in the pattern every alie member shares: a
 * fixed hash (splitmix64's finaliser) of the index, no seed. */
static void
fault_alie(struct fault *f, size_t i, float *v, double distance)
{
	uint64_t h = (uint64_t)i + UINT64_C(0x9e3779b97f4a7c15);

	h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
	h ^= h >> 31;
	if (distance > 0)
		*v += (float)((h & 1 ? 1 : -1) * f->x * distance);
}

static const struct fault_row fault_rows[] = {
	{ "bitflip", 1e-4, fault_bitflip },
	{ "scale", 1000, fault_scale },
	{ "signflip", NAN, fault_signflip },
	{ "stale", NAN, fault_stale },
	{ "alie", 1, fault_alie },
};

static int
fault_needs_x0(const struct fault *f)
{
	return f->row->apply == fault_signflip || f->row->apply == fault_stale;
}

int
fault_parse(const char *spec, struct fault **out, struct errbuf *err)
{
	const char *colon = strchr(spec, ':');
	size_t len = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
	struct fault *f;
	char *end;

	for (size_t k = 0; k < sizeof(fault_rows) / sizeof(fault_rows[0]); k++) {
		const struct fault_row *row = &fault_rows[k];

		if (strlen(row->name) != len || strncmp(row->name, spec, len) != 0)
			continue;
		f = xcalloc(1, sizeof(*f));
		f->row = row;
		f->x = row->x;
		if (colon != NULL) {
			f->x = strtod(colon + 1, &end);
			if (isnan(row->x) || end == colon + 1 || *end != '\0' || !isfinite(f->x)) {
				free(f);
				return errbuf_set(err, -EINVAL, "fault: %s takes %s", row->name,
				    isnan(row->x) ? "no parameter" : "a number after ':'");
			}
		}
		rng_init(&f->rng, (uint64_t)getpid(), "fault", 0, 0);
		*out = f;
		return 0;
	}
	return errbuf_set(err, -EINVAL, "fault: unknown kind '%.*s' (bitflip[:P], scale[:K],"
	    " signflip, stale, alie[:Z])", (int)len, spec);
}

/* Without the model it started from, a kind that needs it sends the
 * values as they are. */
static void
fault_tamper(void *arg, const struct mask *mask, float *vals, size_t count, double distance,
    const float *origin)
{
	struct fault *f = arg;
	size_t k = 0;

	if (fault_needs_x0(f) && (f->x0 = origin) == NULL)
		return;
	for (size_t r = 0; r < mask->n && k < count; r++) {
		for (size_t j = 0; j < mask->r[r].len && k < count; j++, k++)
			f->row->apply(f, mask->r[r].off + j, &vals[k], distance);
	}
}

void
fault_attach(struct fault *f, struct rounds *r)
{
	rounds_set_tamper(r, fault_tamper, f);
	log_warn("fault: this peer sends faulty values (%s)", f->row->name);
}

void
fault_free(struct fault *f)
{
	free(f);
}
