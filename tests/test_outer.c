/*
 * outer: the outer step's arithmetic on a real model (a host-memory one,
 * as an attached process's is), against the same Nesterov step written
 * out in doubles: the first step after a reset only anchors; lr 1 with no
 * momentum leaves the model as it is; with momentum, the move compounds
 * over steps as SGD's Nesterov does. The move is an increment: a step
 * the trainer took between the read and the write is kept, and while an
 * attached process holds the vector the move waits for its boundary.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "outer.h"

#define D 8

static struct model *m;
static float mem[D];

static void
setup(void)
{
	struct errbuf err = { "" };

	REQUIRE(model_new_shared(&m, &err) == 0);
	for (int i = 0; i < D; i++)
		mem[i] = (float)i;
	model_share(m, mem, D);
}

/* Every coordinate moves by step (a trainer's step). */
static void
train(float step)
{
	for (int i = 0; i < D; i++)
		mem[i] += step;
}

static void
test_off(void)
{
	struct outer_params p = { 1.0, 0.0, 4 };
	struct outer *o;

	CHECK(!outer_enabled(&p));
	setup();
	outer_new(&o);
	CHECK(outer_step(o, m, &p) == 0 && outer_anchored(o));
	train(0.5f);
	CHECK(outer_step(o, m, &p) == 0);
	for (int i = 0; i < D; i++)
		CHECKF(mem[i] == (float)i + 0.5f, "x[%d] = %g", i, mem[i]);
	outer_free(o);
	model_free(m);
}

/* Three outer steps of lr 0.7, momentum 0.9 after steps of -1 each: the
 * model follows anchor - lr (g + mu v), v = mu v + g, g = anchor - x. */
static void
test_nesterov(void)
{
	struct outer_params p = { 0.7, 0.9, 4 };
	double anchor = 3, v = 0;
	struct outer *o;

	CHECK(outer_enabled(&p));
	setup();
	outer_new(&o);
	CHECK(outer_step(o, m, &p) == 0);
	CHECK(mem[3] == 3.0f);
	for (int k = 0; k < 3; k++) {
		double g;

		train(-1.0f);
		g = anchor - (double)mem[3];
		v = 0.9 * v + g;
		anchor -= 0.7 * (g + 0.9 * v);
		CHECK(outer_step(o, m, &p) == 0);
		CHECKF(fabs((double)mem[3] - anchor) < 1e-5, "outer step %d: x %g, want %g", k,
		    mem[3], anchor);
	}
	/* Momentum carried the model past what the steps alone did (3 - 3). */
	CHECKF(mem[3] < -1.0f, "x %g", mem[3]);
	/* A reset anchors afresh: the next step moves nothing. */
	outer_reset(o);
	train(-1.0f);
	anchor = mem[3];
	CHECK(outer_step(o, m, &p) == 0 && mem[3] == (float)anchor);
	outer_free(o);
	model_free(m);
}

/* Held by a process: the move is queued and lands at the boundary, on top
 * of the process's own step; no mix is counted. Non-finite: nothing. */
static void
test_held(void)
{
	struct outer_params p = { 0.5, 0.0, 4 };
	struct outer *o;

	setup();
	outer_new(&o);
	CHECK(outer_step(o, m, &p) == 0);
	train(-2.0f);
	model_hold(m);
	CHECK(outer_step(o, m, &p) == 0);
	CHECK(mem[0] == -2.0f);
	train(-1.0f);           /* the process's step after the read */
	CHECK(model_release(m) == 0);
	/* anchor 0, x -2: the outer step goes to -1, and its increment +1
	 * lands on the process's -3. */
	CHECKF(mem[0] == -2.0f, "x %g", mem[0]);
	CHECK(model_mixes(m) == 0);
	mem[1] = NAN;
	CHECK(outer_step(o, m, &p) == -EDOM);
	CHECK(mem[0] == -2.0f);
	outer_free(o);
	model_free(m);
}

static const struct check_case cases[] = {
	{ "outer_off", test_off },
	{ "outer_nesterov", test_nesterov },
	{ "outer_held", test_held },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_outer");
}
