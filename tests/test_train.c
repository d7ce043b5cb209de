/*
 * Unit test of the trainer's learning-rate schedule: linear warm-up, then
 * cosine down to zero at the last step, or steps of gamma, or constant.
 */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "config.h"
#include "train.h"

static int
load(struct config *c, const char *sched)
{
	char *argv[] = { (char *)"gossipd", (char *)"--lr-schedule", (char *)sched,
	    (char *)"--lr", (char *)"0.1", (char *)"--warmup-epochs", (char *)"1",
	    (char *)"--lr-step-epochs", (char *)"2", (char *)"--lr-step-gamma",
	    (char *)"0.5", NULL };
	struct errbuf err;

	return config_load(c, 11, argv, &err);
}

int
main(void)
{
	const uint64_t spe = 100, total = 1000;
	struct config c;
	double lr;

	CHECK(load(&c, "cosine") == 0);
	/* Warm-up: (s + 1) / warm of the base rate over the first epoch. */
	CHECKF(fabs(train_lr_at(&c, 0, spe, total) - 0.001) < 1e-12, "first step");
	CHECKF(fabs(train_lr_at(&c, 49, spe, total) - 0.05) < 1e-12, "mid warm-up");
	/* Cosine from the base rate at the end of warm-up to 0 at the end. */
	CHECKF(fabs(train_lr_at(&c, 100, spe, total) - 0.1) < 1e-12, "after warm-up");
	lr = train_lr_at(&c, 550, spe, total);
	CHECKF(fabs(lr - 0.05) < 1e-12, "half way: %g", lr);
	CHECKF(train_lr_at(&c, 1000, spe, total) < 1e-12, "at the end");
	for (uint64_t s = 101; s < total; s++)
		CHECKF(train_lr_at(&c, s, spe, total) <= train_lr_at(&c, s - 1, spe, total),
		    "cosine rises at step %llu", (unsigned long long)s);
	config_free(&c);

	CHECK(load(&c, "step") == 0);
	CHECKF(fabs(train_lr_at(&c, 150, spe, total) - 0.1) < 1e-12, "first step period");
	CHECKF(fabs(train_lr_at(&c, 250, spe, total) - 0.05) < 1e-12, "after 2 epochs");
	CHECKF(fabs(train_lr_at(&c, 450, spe, total) - 0.025) < 1e-12, "after 4 epochs");
	config_free(&c);

	CHECK(load(&c, "constant") == 0);
	CHECKF(fabs(train_lr_at(&c, 900, spe, total) - 0.1) < 1e-12, "constant");
	config_free(&c);
	return check_exit("test_train");
}
