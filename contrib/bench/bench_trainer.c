/*
 * bench_trainer: training-step throughput of the cpu backend, and the
 * ceiling for it: the rate of the bare cblas_sgemm calls one step makes
 * (same shapes, same transposes, same thread count) run back to back.
 * The two are measured in alternating rounds so that load from elsewhere
 * on the machine hits both alike, and the best round of each is kept.
 * Random data in memory: this measures speed only.
 *
 * bench_trainer [-p] [-m SPEC] [-b BATCH] [-t THREADS] [-r ROUNDS] [-s SECONDS]
 * prints one line: key=value pairs (see trainer.sh). -p times the training
 * step only, for running under perf.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "model.h"
#include "util.h"

#define NBATCH 8

struct gemm_shape {
	enum CBLAS_TRANSPOSE ta, tb;
	int m, n, k;
	float *a, *b, *c;
};

static float *
rand_floats(size_t n, unsigned *seed)
{
	float *p = malloc(n * sizeof(float));

	if (p == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
	return p;
}

/* The GEMMs of one training step of the cpu backend, in its order. */
static int
gemm_shapes(const struct model_spec *s, int n, struct gemm_shape *g, unsigned *seed)
{
	int k = 0;

	for (int l = 0; l < s->nlayers; l++) {
		int a = s->sizes[l], b = s->sizes[l + 1];

		g[k++] = (struct gemm_shape){ CblasNoTrans, CblasNoTrans, n, b, a,
		    rand_floats((size_t)n * a, seed), rand_floats((size_t)a * b, seed),
		    rand_floats((size_t)n * b, seed) };
	}
	for (int l = s->nlayers - 1; l >= 0; l--) {
		int a = s->sizes[l], b = s->sizes[l + 1];

		g[k++] = (struct gemm_shape){ CblasTrans, CblasNoTrans, a, b, n,
		    rand_floats((size_t)n * a, seed), rand_floats((size_t)n * b, seed),
		    rand_floats((size_t)a * b, seed) };
		if (l > 0)
			g[k++] = (struct gemm_shape){ CblasNoTrans, CblasTrans, n, a, b,
			    rand_floats((size_t)n * b, seed),
			    rand_floats((size_t)a * b, seed),
			    rand_floats((size_t)n * a, seed) };
	}
	return k;
}

static void
gemm_run(const struct gemm_shape *g, int ng)
{
	for (int i = 0; i < ng; i++) {
		int lda = g[i].ta == CblasNoTrans ? g[i].k : g[i].m;
		int ldb = g[i].tb == CblasNoTrans ? g[i].n : g[i].k;

		cblas_sgemm(CblasRowMajor, g[i].ta, g[i].tb, g[i].m, g[i].n, g[i].k,
		    1.0f, g[i].a, lda, g[i].b, ldb, 0.0f, g[i].c, g[i].n);
	}
}

int
main(int argc, char **argv)
{
	const char *spec_s = "784-256-128-10";
	int batch = 64, threads = 1, rounds = 5, only_ours = 0, opt, ng;
	double secs = 0.4, best_ours = 0.0, best_gemm = 0.0, flops = 0.0;
	struct gemm_shape g[3 * MODEL_MAX_LAYERS];
	struct sgd_hparams h = { .lr = 0.01f, .momentum = 0.9f,
	    .weight_decay = 5e-4f };
	struct model_spec spec;
	struct errbuf err = { "" };
	struct model *m;
	float *x[NBATCH], loss = 0.0f;
	uint8_t *y[NBATCH];
	unsigned seed = 1;
	long v;

	while ((opt = getopt(argc, argv, "pm:b:t:r:s:")) != -1) {
		switch (opt) {
		case 'p':
			only_ours = 1;
			break;
		case 'm':
			spec_s = optarg;
			break;
		case 'b':
			if (util_parse_long(optarg, 1, 65536, &v) < 0)
				goto usage;
			batch = (int)v;
			break;
		case 't':
			if (util_parse_long(optarg, 1, 256, &v) < 0)
				goto usage;
			threads = (int)v;
			break;
		case 'r':
			if (util_parse_long(optarg, 1, 1000, &v) < 0)
				goto usage;
			rounds = (int)v;
			break;
		case 's':
			if (util_parse_double(optarg, 0.01, 60, &secs) < 0)
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (model_spec_parse(spec_s, &spec, &err) < 0 ||
	    model_new(&spec, "cpu", threads, batch, 1, &m, &err) < 0) {
		fprintf(stderr, "bench_trainer: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < NBATCH; i++) {
		x[i] = rand_floats((size_t)batch * spec.sizes[0], &seed);
		y[i] = malloc((size_t)batch);
		for (int j = 0; j < batch; j++)
			y[i][j] = (uint8_t)(rand_r(&seed) % spec.sizes[spec.nlayers]);
	}
	ng = gemm_shapes(&spec, batch, g, &seed);
	for (int i = 0; i < ng; i++)
		flops += 2.0 * g[i].m * g[i].n * g[i].k;

	for (int i = 0; i < 20; i++) {
		model_train_step(m, x[i % NBATCH], y[i % NBATCH], batch, &h, &loss);
		gemm_run(g, ng);
	}
	for (int r = 0; r < rounds; r++) {
		double t0 = util_now(), t;
		long steps = 0;

		do {
			for (int i = 0; i < 10; i++, steps++)
				model_train_step(m, x[steps % NBATCH],
				    y[steps % NBATCH], batch, &h, &loss);
		} while ((t = util_now() - t0) < secs);
		best_ours = fmax(best_ours, (double)steps * batch / t);
		if (only_ours)
			continue;

		t0 = util_now();
		steps = 0;
		do {
			for (int i = 0; i < 10; i++, steps++)
				gemm_run(g, ng);
		} while ((t = util_now() - t0) < secs);
		best_gemm = fmax(best_gemm, (double)steps * batch / t);
	}
	if (!isfinite(loss)) {
		fprintf(stderr, "bench_trainer: loss is not finite\n");
		return 1;
	}
	printf("batch=%d threads=%d ours_sps=%.1f sgemm_limit_sps=%.1f "
	    "step_gflop=%.4f ours_gflops=%.2f sgemm_gflops=%.2f\n", batch,
	    threads, best_ours, best_gemm, flops * 1e-9,
	    best_ours / batch * flops * 1e-9, best_gemm / batch * flops * 1e-9);
	for (int i = 0; i < NBATCH; i++) {
		free(x[i]);
		free(y[i]);
	}
	for (int i = 0; i < ng; i++) {
		free(g[i].a);
		free(g[i].b);
		free(g[i].c);
	}
	model_free(m);
	return 0;
usage:
	fprintf(stderr, "usage: bench_trainer [-p] [-m SPEC] [-b BATCH] [-t THREADS] "
	    "[-r ROUNDS] [-s SECONDS]\n");
	return 2;
}
