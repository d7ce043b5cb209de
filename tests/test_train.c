/*
 * Unit test of the trainer's learning-rate schedule (linear warm-up, then
 * cosine down to zero at the last step, or steps of gamma, or constant)
 * and of its step budget: the same for every shard of a job, and with iid
 * shards the one a pass over the shard gave before epochs were the job's,
 * and of the logit offsets of a shard's label shares.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
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

static int
load_shards(struct config *c, const char *shard, const char *max_steps)
{
	char *argv[] = { (char *)"gossipd", (char *)"--shard", (char *)shard,
	    (char *)"--epochs", (char *)"3", (char *)"--batch-size", (char *)"64",
	    (char *)"--max-steps", (char *)max_steps, NULL };
	struct errbuf err;

	return config_load(c, 9, argv, &err);
}

/* Fashion-MNIST's 60000 training samples. */
#define TRAIN_N 60000

static void
test_budget(void)
{
	struct train_budget small, large, b;
	struct errbuf err;
	struct config c;
	char shard[32];

	CHECK(load_shards(&c, "0/4", "0") == 0);
	/* Skewed shards: 500 and 30000 of the 60000 samples. */
	CHECK(train_budget(&c, TRAIN_N, 500, &small, &err) == 0);
	CHECK(train_budget(&c, TRAIN_N, 30000, &large, &err) == 0);
	CHECKF(small.total_steps == large.total_steps, "small shard %llu steps, large %llu",
	    (unsigned long long)small.total_steps, (unsigned long long)large.total_steps);
	CHECK(small.total_steps == 3 * (TRAIN_N / 4 / 64));
	CHECK(small.job_steps_per_epoch == TRAIN_N / 4 / 64);
	CHECK(small.shard_steps_per_pass == 500 / 64);
	CHECK(large.shard_steps_per_pass == 30000 / 64);
	CHECK(train_budget(&c, TRAIN_N, 63, &b, &err) == -EINVAL);
	config_free(&c);

	CHECK(load_shards(&c, "1/4", "100") == 0);
	CHECK(train_budget(&c, TRAIN_N, 500, &b, &err) == 0 && b.total_steps == 100);
	config_free(&c);

	/* iid shards hold n / N samples, the first n % N one more: each
	 * gets the steps that epochs passes over its full batches gave. */
	for (unsigned n = 1; n <= 64; n++) {
		size_t lo = TRAIN_N / n, hi = lo + (TRAIN_N % n != 0);

		snprintf(shard, sizeof(shard), "0/%u", n);
		CHECK(load_shards(&c, shard, "0") == 0);
		CHECK(train_budget(&c, TRAIN_N, lo, &b, &err) == 0);
		CHECKF(b.total_steps == 3 * (lo / 64), "%u iid shards of %zu", n, lo);
		CHECK(train_budget(&c, TRAIN_N, hi, &b, &err) == 0);
		CHECKF(b.total_steps == 3 * (hi / 64), "%u iid shards of %zu", n, hi);
		config_free(&c);
	}
}

/*
 * Offsets of 100 labels (classes 0-4 hold 10, 10, 20, 20, 40; class 5
 * none) over shards: the whole set gets none, nor (to the pseudo-samples)
 * a shard with the set's shares; a shard richer in a class than the set
 * gets tau ln(how much richer) for it; a class the shard lacks gets about
 * -tau ln(shard size x the set's share of it).
 */
static void
test_logit_offset(void)
{
	static const int count[5] = { 5, 5, 10, 10, 20 };
	uint8_t y[100];
	size_t all[100], half[50], skew[40], n = 0;
	float off[6];
	int c;

	for (c = 0; c < 5; c++)
		for (int i = 0; i < count[c]; i++)
			y[n++] = (uint8_t)c;
	for (size_t i = 0; i < 50; i++)
		y[50 + i] = y[i];
	for (size_t i = 0; i < 100; i++)
		all[i] = i;
	for (size_t i = 0; i < 50; i++)
		half[i] = i;
	CHECK(train_logit_offset(1.0, y, 100, all, 100, 6, off) == 0);
	for (c = 0; c < 6; c++)
		CHECKF(fabsf(off[c]) < 1e-6f, "whole set, class %d: %g", c, (double)off[c]);
	CHECK(train_logit_offset(1.0, y, 100, half, 50, 6, off) == 0);
	for (c = 0; c < 5; c++)
		CHECKF(fabsf(off[c]) < 0.1f, "same shares, class %d: %g", c, (double)off[c]);
	/* 30 of class 4 and 10 of class 0: n 40, 6 pseudo-samples. */
	for (size_t i = 0; i < 20; i++)
		skew[i] = 30 + i;
	for (size_t i = 0; i < 10; i++)
		skew[20 + i] = 80 + i;
	for (size_t i = 0; i < 5; i++) {
		skew[30 + i] = i;
		skew[35 + i] = 50 + i;
	}
	for (size_t i = 0; i < 40; i++)
		CHECKF(y[skew[i]] == (i < 30 ? 4 : 0), "shard label %zu", i);
	CHECK(train_logit_offset(2.0, y, 100, skew, 40, 6, off) == 0);
	CHECKF(fabs(off[4] - 2 * log(31.0 / 46 * 106 / 41)) < 1e-5, "rich: %g", (double)off[4]);
	CHECKF(fabs(off[0] - 2 * log(11.0 / 46 * 106 / 11)) < 1e-5, "richer: %g",
	    (double)off[0]);
	CHECKF(fabs(off[1] - 2 * log(1.0 / 46 * 106 / 11)) < 1e-5, "lacking: %g",
	    (double)off[1]);
	CHECKF(off[0] > off[4] && off[4] > 1.0f && off[1] < -3.0f && off[3] < off[1],
	    "order: %g %g %g %g %g", (double)off[0], (double)off[1], (double)off[2],
	    (double)off[3], (double)off[4]);
}

static void
test_schedule(void)
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

	/* The density ramp: density_start at the first step, a quarter of the
	 * way at half the budget, density at the end and after; none without
	 * density_start or with one not below density. */
	CHECK(load(&c, "constant") == 0);
	CHECKF(train_density_at(&c, 0, total) == c.density, "no ramp by default");
	c.density = 0.05;
	c.density_start = 0.01;
	CHECKF(fabs(train_density_at(&c, 0, total) - 0.01) < 1e-12, "ramp start");
	CHECKF(fabs(train_density_at(&c, 500, total) - 0.02) < 1e-12, "ramp half way");
	CHECKF(fabs(train_density_at(&c, 1000, total) - 0.05) < 1e-12, "ramp end");
	CHECKF(fabs(train_density_at(&c, 5000, total) - 0.05) < 1e-12, "after the budget");
	CHECKF(fabs(train_density_at(&c, 7, 0) - 0.05) < 1e-12, "no budget");
	c.density_start = 0.06;
	CHECKF(fabs(train_density_at(&c, 0, total) - 0.05) < 1e-12, "start above density");
	config_free(&c);
}

static const struct check_case cases[] = {
	{ "train_schedule", test_schedule },
	{ "train_budget", test_budget },
	{ "train_logit_offset", test_logit_offset },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_train");
}
