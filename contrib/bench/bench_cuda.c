/*
 * bench_cuda: what the CUDA backend delivers on one GPU, as CSV rows for
 * contrib/bench/cuda.sh to set beside PyTorch's.
 *  - training: samples/s of back-to-back steps (forward, backward, SGD
 *    with momentum and weight decay) on batches sliced from a synthetic
 *    data set in ordinary host memory, as the trainer thread feeds them;
 *    the loss comes back to the host every step, as it does for the daemon;
 *  - gossip: gather and average-in throughput (values per second, as
 *    bytes) for three mask shapes on the wide model, beside the device's
 *    own device-to-device copy bandwidth and the pinned host<->device
 *    bandwidth that every gossip value must also cross.
 * Usage: bench_cuda [-s SECONDS] [-d DEVICE] [-q] (-q: small quick run)
 * Rows: section,model,batch_or_mask,metric,value
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "backend.h"
#include "util.h"

#define BENCH_SAMPLES 16384

static uint64_t bench_rng = 0x243f6a8885a308d3ULL;

static uint64_t
bench_u64(void)
{
	uint64_t z = (bench_rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double
bench_unit(void)
{
	return (double)(bench_u64() >> 11) * (1.0 / 9007199254740992.0);
}

static struct model_spec
bench_spec(const char *s)
{
	struct model_spec sp;
	char *end;

	memset(&sp, 0, sizeof(sp));
	for (int n = 0;; s = end + 1) {
		sp.sizes[n++] = (int)strtol(s, &end, 10);
		if (*end == '\0') {
			sp.nlayers = n - 1;
			return sp;
		}
	}
}

/* He-uniform weights, zero biases. */
static void
bench_init(const struct model_spec *s, float *x)
{
	size_t off = 0;

	for (int l = 0; l < s->nlayers; l++) {
		size_t a = (size_t)s->sizes[l], w = (size_t)s->sizes[l + 1];
		double lim = sqrt(6.0 / (double)a);

		for (size_t k = 0; k < a * w; k++)
			x[off++] = (float)((2.0 * bench_unit() - 1.0) * lim);
		memset(x + off, 0, w * sizeof(float));
		off += w;
	}
}

static int
bench_new(const char *model, int batch, int dev, struct backend **b)
{
	struct model_spec spec = bench_spec(model);
	struct backend_opts o = { .threads = 1, .device = dev, .max_batch = batch };
	struct errbuf err;
	float *x;
	int rc;

	if ((rc = backend_cuda_new(&spec, &o, b, &err)) < 0) {
		fprintf(stderr, "bench_cuda: %s\n", err.msg);
		return rc;
	}
	x = xmalloc((*b)->d * sizeof(float));
	bench_init(&spec, x);
	rc = (*b)->ops->set_params(*b, x, NULL);
	free(x);
	return rc;
}

static int
bench_train(const char *model, int batch, double seconds, int dev,
    const float *data, const uint8_t *labels)
{
	struct sgd_hparams h = { .lr = 0.01f, .momentum = 0.9f,
	    .weight_decay = 5e-4f };
	struct model_range one = { 0, 1 };
	struct backend *b = NULL;
	size_t in = (size_t)bench_spec(model).sizes[0];
	size_t nbatches = BENCH_SAMPLES / (size_t)batch, i = 0;
	double t0, t;
	float loss = 0.0f, sink;
	long steps = 0;
	int rc;

	if ((rc = bench_new(model, batch, dev, &b)) < 0)
		goto out;
	for (int w = 0; w < 20; w++, i++) {
		size_t k = i % nbatches;

		if ((rc = b->ops->forward_backward(b, data + k * batch * in,
		    labels + k * batch, batch, &loss)) < 0 ||
		    (rc = b->ops->sgd_step(b, &h)) < 0)
			goto out;
	}
	/* A one-value gather waits for everything queued before it. */
	if ((rc = b->ops->gather(b, &one, 1, &sink)) < 0)
		goto out;
	t0 = util_now();
	do {
		for (int r = 0; r < 10; r++, i++, steps++) {
			size_t k = i % nbatches;

			if ((rc = b->ops->forward_backward(b,
			    data + k * batch * in, labels + k * batch, batch,
			    &loss)) < 0 || (rc = b->ops->sgd_step(b, &h)) < 0)
				goto out;
		}
		if ((rc = b->ops->gather(b, &one, 1, &sink)) < 0)
			goto out;
		t = util_now() - t0;
	} while (t < seconds);
	if (!isfinite(loss)) {
		fprintf(stderr, "bench_cuda: %s: loss is %g\n", model, loss);
		rc = -EDOM;
		goto out;
	}
	printf("train,%s,%d,ours_samples_per_s,%.1f\n", model, batch,
	    (double)steps * batch / t);
	printf("train,%s,%d,ours_ms_per_step,%.4f\n", model, batch,
	    1e3 * t / (double)steps);
	fflush(stdout);
out:
	if (b != NULL)
		b->ops->free(b);
	return rc;
}

/* Median seconds of reps calls of one gossip operation. */
static int
bench_gossip_op(struct backend *b, int avg, const struct model_range *r,
    size_t nr, float *vals, int reps, double *sec)
{
	double ts[64];
	int rc;

	if (reps > 64)
		reps = 64;
	for (int k = -2; k < reps; k++) {
		double t0 = util_now();

		rc = avg ? b->ops->average_in(b, r, nr, vals) :
		    b->ops->gather(b, r, nr, vals);
		if (rc < 0)
			return rc;
		if (k >= 0)
			ts[k] = util_now() - t0;
	}
	for (int i = 1; i < reps; i++)
		for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
			double s = ts[j];

			ts[j] = ts[j - 1];
			ts[j - 1] = s;
		}
	*sec = ts[reps / 2];
	return 0;
}

/* "blocks": 10% of coordinates in runs of 4096 at random places;
 * "coords": 1% of coordinates one by one; "full": the whole vector. */
static struct model_range *
bench_mask(const char *kind, size_t d, size_t *nr, size_t *total)
{
	struct model_range *r;
	size_t n = 0, t = 0;

	if (strcmp(kind, "full") == 0) {
		r = xmalloc(sizeof(*r));
		r->off = 0;
		r->len = d;
		*nr = 1;
		*total = d;
		return r;
	}
	if (strcmp(kind, "blocks") == 0) {
		size_t run = 4096, nruns = d / run;

		r = xmalloc(nruns * sizeof(*r));
		for (size_t k = 0; k < nruns; k++)
			if (bench_unit() < 0.1) {
				r[n].off = k * run;
				r[n].len = run;
				n++;
				t += run;
			}
	} else {
		r = xmalloc(d / 50 * sizeof(*r));
		for (size_t k = 0; k < d && n < d / 50; k++)
			if (bench_unit() < 0.01) {
				r[n].off = k;
				r[n].len = 1;
				n++;
				t++;
			}
	}
	*nr = n;
	*total = t;
	return r;
}

#define BENCH_CUDA(call) do {						\
	cudaError_t e_ = (call);					\
	if (e_ != cudaSuccess) {					\
		fprintf(stderr, "bench_cuda: %s: %s\n", #call,		\
		    cudaGetErrorString(e_));				\
		rc = -EIO;						\
		goto out;						\
	}								\
} while (0)

/* Bytes per second of reps copies of n bytes, timed with device events. */
static int
bench_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
    int reps, double *bps)
{
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms = 0.0f;
	int rc = 0;

	BENCH_CUDA(cudaEventCreate(&e0));
	BENCH_CUDA(cudaEventCreate(&e1));
	BENCH_CUDA(cudaMemcpy(dst, src, n, kind));
	BENCH_CUDA(cudaEventRecord(e0, 0));
	for (int k = 0; k < reps; k++)
		BENCH_CUDA(cudaMemcpyAsync(dst, src, n, kind, 0));
	BENCH_CUDA(cudaEventRecord(e1, 0));
	BENCH_CUDA(cudaEventSynchronize(e1));
	BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
	*bps = (double)n * reps / (ms * 1e-3);
out:
	if (e0 != NULL)
		cudaEventDestroy(e0);
	if (e1 != NULL)
		cudaEventDestroy(e1);
	return rc;
}

static int
bench_gossip(const char *model, int dev)
{
	static const char *const masks[] = { "blocks", "coords", "full" };
	struct backend *b = NULL;
	float *vals = NULL, *d0 = NULL, *d1 = NULL, *h = NULL;
	double bps;
	size_t d, bytes;
	int rc;

	if ((rc = bench_new(model, 1, dev, &b)) < 0)
		goto out;
	d = b->d;
	bytes = d * sizeof(float);
	vals = xmalloc(bytes);
	for (size_t i = 0; i < GD_ARRAY_SIZE(masks); i++) {
		size_t nr, total;
		struct model_range *r = bench_mask(masks[i], d, &nr, &total);
		double sg = 0.0, sa = 0.0;

		if ((rc = bench_gossip_op(b, 0, r, nr, vals, 20, &sg)) < 0 ||
		    (rc = bench_gossip_op(b, 1, r, nr, vals, 20, &sa)) < 0) {
			free(r);
			goto out;
		}
		printf("gossip,%s,%s,values,%zu\n", model, masks[i], total);
		printf("gossip,%s,%s,ranges,%zu\n", model, masks[i], nr);
		printf("gossip,%s,%s,gather_GBps,%.3f\n", model, masks[i],
		    (double)total * sizeof(float) / sg * 1e-9);
		printf("gossip,%s,%s,average_in_GBps,%.3f\n", model, masks[i],
		    (double)total * sizeof(float) / sa * 1e-9);
		printf("gossip,%s,%s,gather_us,%.1f\n", model, masks[i], sg * 1e6);
		printf("gossip,%s,%s,average_in_us,%.1f\n", model, masks[i],
		    sa * 1e6);
		fflush(stdout);
		free(r);
	}
	/* The backend made dev current. */
	BENCH_CUDA(cudaMalloc((void **)&d0, bytes));
	BENCH_CUDA(cudaMalloc((void **)&d1, bytes));
	BENCH_CUDA(cudaHostAlloc((void **)&h, bytes, cudaHostAllocDefault));
	BENCH_CUDA(cudaMemset(d0, 1, bytes));
	memset(h, 1, bytes);
	if ((rc = bench_copy(d1, d0, bytes, cudaMemcpyDeviceToDevice, 20,
	    &bps)) < 0)
		goto out;
	printf("copy,%s,%zu,d2d_GBps,%.3f\n", model, bytes, bps * 1e-9);
	if ((rc = bench_copy(h, d0, bytes, cudaMemcpyDeviceToHost, 5, &bps)) < 0)
		goto out;
	printf("copy,%s,%zu,d2h_pinned_GBps,%.3f\n", model, bytes, bps * 1e-9);
	if ((rc = bench_copy(d0, h, bytes, cudaMemcpyHostToDevice, 5, &bps)) < 0)
		goto out;
	printf("copy,%s,%zu,h2d_pinned_GBps,%.3f\n", model, bytes, bps * 1e-9);
	fflush(stdout);
out:
	cudaFree(d0);
	cudaFree(d1);
	if (h != NULL)
		cudaFreeHost(h);
	free(vals);
	if (b != NULL)
		b->ops->free(b);
	return rc;
}

int
main(int argc, char **argv)
{
	static const char *const models[] = { "784-256-128-10", "784-4096-4096-10" };
	static const int batches[] = { 256, 1024 };
	double seconds = 2.0;
	int dev = 0, quick = 0, c, rc = 0;
	float *data;
	uint8_t *labels;

	while ((c = getopt(argc, argv, "s:d:q")) != -1) {
		switch (c) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'd':
			dev = atoi(optarg);
			break;
		case 'q':
			quick = 1;
			break;
		default:
			fprintf(stderr, "usage: bench_cuda [-s SECONDS] [-d DEVICE] [-q]\n");
			return 2;
		}
	}
	data = xmalloc((size_t)BENCH_SAMPLES * 784 * sizeof(float));
	labels = xmalloc(BENCH_SAMPLES);
	for (size_t i = 0; i < (size_t)BENCH_SAMPLES * 784; i++)
		data[i] = (float)bench_unit();
	for (size_t i = 0; i < BENCH_SAMPLES; i++)
		labels[i] = (uint8_t)(bench_u64() % 10);

	printf("section,model,batch_or_mask,metric,value\n");
	for (size_t m = 0; m < GD_ARRAY_SIZE(models) && rc == 0; m++)
		for (size_t k = 0; k < GD_ARRAY_SIZE(batches) && rc == 0; k++)
			rc = bench_train(models[m], batches[k],
			    quick ? 0.2 : seconds, dev, data, labels);
	if (rc == 0)
		rc = bench_gossip(models[quick ? 0 : 1], dev);
	free(data);
	free(labels);
	return rc < 0 ? 1 : 0;
}
