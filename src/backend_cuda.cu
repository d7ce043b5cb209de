/*
 * backend_cuda: the model on one CUDA device. Parameters, momentum,
 * gradient, activations and the current batch live in device memory; the
 * layers are cuBLAS sgemm calls and everything else is a handful of small
 * kernels (bias + ReLU, ReLU backward, bias-gradient column sums, softmax
 * cross-entropy, a one-block reduction, the fused SGD-momentum update and
 * the masked gather / average-in used by gossip).
 *
 * Row-major matrices are handed to column-major cuBLAS as their transposes:
 * a row-major r x c buffer is a column-major c x r one, so Z = A*W becomes
 * Z^T = W^T * A^T with no explicit transpose anywhere.
 *
 * All device work goes on one stream. Host data crosses through pinned
 * staging buffers so copies are truly asynchronous; every operation that
 * fills a staging buffer waits, before it returns, until the device has
 * read it, so the next operation may refill it. forward_backward returns as
 * soon as the loss is on the host and lets the backward pass run on while
 * the caller prepares the next batch. libfabric here cannot read device
 * memory, so gossip values always travel through host memory.
 *
 * Failures in the constructor carry a reason in the errbuf; the operations
 * have no errbuf, so they log the CUDA or cuBLAS reason and return a
 * negative errno.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "backend.h"
#include "log.h"
#include "model.h"
#include "util.h"
}

#define BCUDA_THREADS 256
#define BCUDA_MAX_BLOCKS 4096
#define BCUDA_CHUNK (256u * 1024u)	/* host copy / DMA overlap granule */
#define BCUDA_RING 4			/* chunks in flight on the way down */

/* One non-empty range of a gossip mask, with where its values start. */
struct bcuda_span {
	unsigned long long off;
	unsigned long long start;
};

/* What the reduction kernel hands back to the host. */
struct bcuda_result {
	double loss_sum;
	float loss_mean;
	int correct;
};

struct bcuda {
	struct backend base;
	int dev;
	int max_batch;
	cudaStream_t stream;
	cudaEvent_t loss_ready;
	cudaEvent_t chunk_done[BCUDA_RING];
	cublasHandle_t blas;
	size_t woff[MODEL_MAX_LAYERS];
	size_t boff[MODEL_MAX_LAYERS];
	/* device memory */
	float *x, *v, *g;
	float *act[MODEL_MAX_LAYERS + 1];	/* act[0] is the batch */
	float *delta[2];			/* ping-pong dL/dZ */
	uint8_t *y;
	float *rowloss;
	int *rowok;
	float *loff;		/* logit offsets, one per class */
	int have_loff;
	struct bcuda_result *res;
	float *vals;
	struct bcuda_span *spans;
	/* pinned host memory */
	float *h_x;
	uint8_t *h_y;
	struct bcuda_result *h_res;
	float *h_vals;
	struct bcuda_span *h_spans;
	size_t vals_cap;	/* floats in vals and h_vals */
	size_t spans_cap;	/* entries in spans and h_spans */
};

/* ---- kernels ---- */

static __device__ inline size_t
bcuda_tid(void)
{
	return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline size_t
bcuda_stride(void)
{
	return (size_t)gridDim.x * blockDim.x;
}

/* z[i][j] += bias[j], then ReLU on hidden layers. */
static __global__ void
bcuda_k_bias_act(float *z, const float *bias, size_t total, int cols, int relu)
{
	for (size_t i = bcuda_tid(); i < total; i += bcuda_stride()) {
		float t = z[i] + bias[i % (size_t)cols];

		z[i] = relu ? (t > 0.0f ? t : 0.0f) : t;
	}
}

/* dA *= (A > 0): the ReLU output is positive exactly where its input was. */
static __global__ void
bcuda_k_relu_back(float *da, const float *a, size_t total)
{
	for (size_t i = bcuda_tid(); i < total; i += bcuda_stride())
		if (!(a[i] > 0.0f))
			da[i] = 0.0f;
}

/* db[j] = sum_i dz[i][j]; a 32 x 8 block owns 32 columns, reads coalesced. */
static __global__ void
bcuda_k_colsum(const float *dz, float *db, int rows, int cols)
{
	__shared__ float part[8][33];
	int j = blockIdx.x * 32 + threadIdx.x;
	float s = 0.0f;

	if (j < cols)
		for (int r = threadIdx.y; r < rows; r += 8)
			s += dz[(size_t)r * cols + j];
	part[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && j < cols) {
		for (int k = 1; k < 8; k++)
			s += part[k][threadIdx.x];
		db[j] = s;
	}
}

static __device__ inline float
bcuda_logit(const float *zr, const float *off, int c)
{
	return off != NULL ? zr[c] + off[c] : zr[c];
}

/*
 * One warp per row of logits (plus off, one per class, when not NULL):
 * numerically stable log-softmax, the row's loss, whether the first
 * maximal class is the label, and (when dz is not NULL) the gradient
 * (softmax - onehot) * scale.
 */
static __global__ void
bcuda_k_softmax_xent(const float *z, const float *off, const uint8_t *y,
    float *dz, float *rowloss, int *rowok, int rows, int cols, float scale)
{
	int row = (int)(bcuda_tid() / 32);
	int lane = threadIdx.x & 31;
	const float *zr;
	float m = -INFINITY, s = 0.0f;
	int arg = INT_MAX;

	if (row >= rows)
		return;		/* whole warps leave together */
	zr = z + (size_t)row * cols;
	for (int c = lane; c < cols; c += 32) {
		if (bcuda_logit(zr, off, c) > m) {
			m = bcuda_logit(zr, off, c);
			arg = c;
		}
	}
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o);
		int a2 = __shfl_xor_sync(0xffffffffu, arg, o);

		if (m2 > m || (m2 == m && a2 < arg)) {
			m = m2;
			arg = a2;
		}
	}
	for (int c = lane; c < cols; c += 32)
		s += expf(bcuda_logit(zr, off, c) - m);
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0) {
		rowloss[row] = logf(s) + m - bcuda_logit(zr, off, y[row]);
		rowok[row] = arg == (int)y[row];
	}
	if (dz != NULL) {
		float *dr = dz + (size_t)row * cols;

		for (int c = lane; c < cols; c += 32)
			dr[c] = (expf(bcuda_logit(zr, off, c) - m) / s -
			    (c == (int)y[row] ? 1.0f : 0.0f)) * scale;
	}
}

/* One block: sum of row losses (in double) and of correct rows. */
static __global__ void
bcuda_k_reduce(const float *rowloss, const int *rowok, int rows,
    struct bcuda_result *res)
{
	__shared__ double sl[BCUDA_THREADS];
	__shared__ int sc[BCUDA_THREADS];
	double l = 0.0;
	int c = 0;

	for (int i = threadIdx.x; i < rows; i += BCUDA_THREADS) {
		l += rowloss[i];
		c += rowok[i];
	}
	sl[threadIdx.x] = l;
	sc[threadIdx.x] = c;
	__syncthreads();
	for (int h = BCUDA_THREADS / 2; h > 0; h >>= 1) {
		if ((int)threadIdx.x < h) {
			sl[threadIdx.x] += sl[threadIdx.x + h];
			sc[threadIdx.x] += sc[threadIdx.x + h];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		res->loss_sum = sl[0];
		res->loss_mean = (float)(sl[0] / rows);
		res->correct = sc[0];
	}
}

/* v <- momentum*v + g + wd*x; x <- x - lr*v */
static __global__ void
bcuda_k_sgd(float *x, float *v, const float *g, size_t d, float lr,
    float momentum, float wd)
{
	for (size_t i = bcuda_tid(); i < d; i += bcuda_stride()) {
		float xi = x[i];
		float vi = momentum * v[i] + g[i] + wd * xi;

		v[i] = vi;
		x[i] = xi - lr * vi;
	}
}

/* The span holding value index j: the last one starting at or before j. */
static __device__ inline size_t
bcuda_span_find(const struct bcuda_span *sp, size_t nspan, size_t j)
{
	size_t lo = 0, hi = nspan;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (sp[mid].start <= j)
			lo = mid;
		else
			hi = mid;
	}
	return (size_t)sp[lo].off + (j - (size_t)sp[lo].start);
}

static __global__ void
bcuda_k_gather(const float *x, float *vals, const struct bcuda_span *sp,
    size_t nspan, size_t total)
{
	for (size_t j = bcuda_tid(); j < total; j += bcuda_stride())
		vals[j] = x[bcuda_span_find(sp, nspan, j)];
}

static __global__ void
bcuda_k_average_in(float *x, const float *vals, const struct bcuda_span *sp,
    size_t nspan, size_t total)
{
	for (size_t j = bcuda_tid(); j < total; j += bcuda_stride()) {
		size_t k = bcuda_span_find(sp, nspan, j);

		x[k] = (x[k] + vals[j]) * 0.5f;
	}
}

/* ---- error handling ---- */

static int
bcuda_errno(cudaError_t e)
{
	switch (e) {
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorInvalidDevice:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return -ENODEV;
	case cudaErrorNoKernelImageForDevice:
	case cudaErrorInvalidDeviceFunction:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

static int
bcuda_blas_errno(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_ALLOC_FAILED:
		return -ENOMEM;
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return -ENODEV;
	case CUBLAS_STATUS_ARCH_MISMATCH:
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

static int
bcuda_fail(const struct bcuda *cb, cudaError_t e, const char *what)
{
	log_error("cuda:%d: %s: %s", cb->dev, what, cudaGetErrorString(e));
	return bcuda_errno(e);
}

static int
bcuda_blas_fail(const struct bcuda *cb, cublasStatus_t s, const char *what)
{
	log_error("cuda:%d: %s: %s", cb->dev, what, cublasGetStatusString(s));
	return bcuda_blas_errno(s);
}

/* Inside operations: log, set rc, leave through out. */
#define BCUDA_TRY(cb, call) do {					\
	cudaError_t e_ = (call);					\
	if (e_ != cudaSuccess) {					\
		rc = bcuda_fail((cb), e_, #call);			\
		goto out;						\
	}								\
} while (0)

#define BCUDA_BLAS(cb, call) do {					\
	cublasStatus_t s_ = (call);					\
	if (s_ != CUBLAS_STATUS_SUCCESS) {				\
		rc = bcuda_blas_fail((cb), s_, #call);			\
		goto out;						\
	}								\
} while (0)

static unsigned
bcuda_blocks(size_t n)
{
	size_t b = (n + BCUDA_THREADS - 1) / BCUDA_THREADS;

	if (b < 1)
		b = 1;
	return b > BCUDA_MAX_BLOCKS ? BCUDA_MAX_BLOCKS : (unsigned)b;
}

static struct bcuda *
bcuda_of(struct backend *b)
{
	return (struct bcuda *)b;
}

/* ---- host side ---- */

/* Host floats -> device through the pinned buffer, chunked so the memcpy
 * of one chunk overlaps the DMA of the previous one. */
static int
bcuda_upload(struct bcuda *cb, float *dst, float *stage, const float *src,
    size_t n)
{
	size_t bytes = n * sizeof(float);
	int rc = 0;

	for (size_t off = 0; off < bytes; off += BCUDA_CHUNK) {
		size_t len = bytes - off < BCUDA_CHUNK ? bytes - off : BCUDA_CHUNK;

		memcpy((char *)stage + off, (const char *)src + off, len);
		BCUDA_TRY(cb, cudaMemcpyAsync((char *)dst + off,
		    (char *)stage + off, len, cudaMemcpyHostToDevice, cb->stream));
	}
out:
	return rc;
}

/* Device floats -> host through the pinned values buffer (n <= vals_cap),
 * chunked so the memcpy of one chunk overlaps the DMA of the next ones. */
static int
bcuda_download(struct bcuda *cb, float *dst, const float *src, size_t n)
{
	size_t bytes = n * sizeof(float);
	size_t nchunks = (bytes + BCUDA_CHUNK - 1) / BCUDA_CHUNK;
	int rc = 0;

	for (size_t k = 0; k < nchunks + BCUDA_RING - 1; k++) {
		if (k < nchunks) {
			size_t off = k * BCUDA_CHUNK;
			size_t len = bytes - off < BCUDA_CHUNK ? bytes - off :
			    BCUDA_CHUNK;

			BCUDA_TRY(cb, cudaMemcpyAsync((char *)cb->h_vals + off,
			    (const char *)src + off, len, cudaMemcpyDeviceToHost,
			    cb->stream));
			BCUDA_TRY(cb, cudaEventRecord(cb->chunk_done[k % BCUDA_RING],
			    cb->stream));
		}
		if (k >= BCUDA_RING - 1 && k - (BCUDA_RING - 1) < nchunks) {
			size_t j = k - (BCUDA_RING - 1), off = j * BCUDA_CHUNK;
			size_t len = bytes - off < BCUDA_CHUNK ? bytes - off :
			    BCUDA_CHUNK;

			BCUDA_TRY(cb, cudaEventSynchronize(
			    cb->chunk_done[j % BCUDA_RING]));
			memcpy((char *)dst + off, (char *)cb->h_vals + off, len);
		}
	}
out:
	return rc;
}

static int
bcuda_set_params(struct backend *b, const float *x, const float *v)
{
	struct bcuda *cb = bcuda_of(b);
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	if ((rc = bcuda_upload(cb, cb->x, cb->h_vals, x, b->d)) < 0)
		goto out;
	BCUDA_TRY(cb, cudaStreamSynchronize(cb->stream));
	if (v != NULL) {
		if ((rc = bcuda_upload(cb, cb->v, cb->h_vals, v, b->d)) < 0)
			goto out;
	} else {
		BCUDA_TRY(cb, cudaMemsetAsync(cb->v, 0, b->d * sizeof(float),
		    cb->stream));
	}
	BCUDA_TRY(cb, cudaStreamSynchronize(cb->stream));
out:
	return rc;
}

static int
bcuda_get_params(struct backend *b, float *x, float *v)
{
	struct bcuda *cb = bcuda_of(b);
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	if (x != NULL && (rc = bcuda_download(cb, x, cb->x, b->d)) < 0)
		goto out;
	if (v != NULL && (rc = bcuda_download(cb, v, cb->v, b->d)) < 0)
		goto out;
out:
	return rc;
}

static int
bcuda_get_grad(struct backend *b, float *g)
{
	struct bcuda *cb = bcuda_of(b);
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	rc = bcuda_download(cb, g, cb->g, b->d);
out:
	return rc;
}

/* Batch into act[0] and labels into y, after checking the labels. */
static int
bcuda_load_batch(struct bcuda *cb, const float *x, const uint8_t *y, int n)
{
	int classes = cb->base.spec.sizes[cb->base.spec.nlayers];
	int rc = 0;

	if (n < 1 || n > cb->max_batch || x == NULL || y == NULL)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (y[i] >= classes)
			return -EINVAL;
	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	memcpy(cb->h_y, y, (size_t)n);
	BCUDA_TRY(cb, cudaMemcpyAsync(cb->y, cb->h_y, (size_t)n,
	    cudaMemcpyHostToDevice, cb->stream));
	rc = bcuda_upload(cb, cb->act[0], cb->h_x, x,
	    (size_t)n * (size_t)cb->base.spec.sizes[0]);
out:
	return rc;
}

/* Logits of the loaded batch into act[nlayers]. */
static int
bcuda_forward(struct bcuda *cb, int n)
{
	const struct model_spec *sp = &cb->base.spec;
	const float one = 1.0f, zero = 0.0f;
	int rc = 0;

	for (int l = 0; l < sp->nlayers; l++) {
		int a = sp->sizes[l], o = sp->sizes[l + 1];
		size_t total = (size_t)n * (size_t)o;

		BCUDA_BLAS(cb, cublasSgemm(cb->blas, CUBLAS_OP_N, CUBLAS_OP_N,
		    o, n, a, &one, cb->x + cb->woff[l], o, cb->act[l], a, &zero,
		    cb->act[l + 1], o));
		bcuda_k_bias_act<<<bcuda_blocks(total), BCUDA_THREADS, 0,
		    cb->stream>>>(cb->act[l + 1], cb->x + cb->boff[l], total, o,
		    l < sp->nlayers - 1);
		BCUDA_TRY(cb, cudaGetLastError());
	}
out:
	return rc;
}

/* Per-row losses (and the logits' gradient, with the logit offsets, when
 * dz is not NULL), then their reduction copied to h_res. */
static int
bcuda_loss(struct bcuda *cb, int n, float *dz)
{
	int classes = cb->base.spec.sizes[cb->base.spec.nlayers];
	unsigned blocks = (unsigned)(((size_t)n * 32 + BCUDA_THREADS - 1) /
	    BCUDA_THREADS);
	int rc = 0;

	bcuda_k_softmax_xent<<<blocks, BCUDA_THREADS, 0, cb->stream>>>(
	    cb->act[cb->base.spec.nlayers], dz != NULL && cb->have_loff ?
	    cb->loff : NULL, cb->y, dz, cb->rowloss, cb->rowok, n, classes,
	    1.0f / (float)n);
	BCUDA_TRY(cb, cudaGetLastError());
	bcuda_k_reduce<<<1, BCUDA_THREADS, 0, cb->stream>>>(cb->rowloss,
	    cb->rowok, n, cb->res);
	BCUDA_TRY(cb, cudaGetLastError());
	BCUDA_TRY(cb, cudaMemcpyAsync(cb->h_res, cb->res, sizeof(*cb->h_res),
	    cudaMemcpyDeviceToHost, cb->stream));
out:
	return rc;
}

static int
bcuda_forward_backward(struct backend *b, const float *x, const uint8_t *y,
    int n, float *loss)
{
	struct bcuda *cb = bcuda_of(b);
	const struct model_spec *sp = &b->spec;
	const float one = 1.0f, zero = 0.0f;
	int cur = 0, rc;

	if ((rc = bcuda_load_batch(cb, x, y, n)) < 0 ||
	    (rc = bcuda_forward(cb, n)) < 0 ||
	    (rc = bcuda_loss(cb, n, cb->delta[0])) < 0)
		goto out;
	BCUDA_TRY(cb, cudaEventRecord(cb->loss_ready, cb->stream));
	for (int l = sp->nlayers - 1; l >= 0; l--) {
		int a = sp->sizes[l], o = sp->sizes[l + 1];
		float *dz = cb->delta[cur];

		/* dW = A^T dZ, as dW^T = dZ^T A */
		BCUDA_BLAS(cb, cublasSgemm(cb->blas, CUBLAS_OP_N, CUBLAS_OP_T,
		    o, a, n, &one, dz, o, cb->act[l], a, &zero, cb->g + cb->woff[l],
		    o));
		bcuda_k_colsum<<<(unsigned)((o + 31) / 32), dim3(32, 8), 0,
		    cb->stream>>>(dz, cb->g + cb->boff[l], n, o);
		BCUDA_TRY(cb, cudaGetLastError());
		if (l == 0)
			break;
		/* dA = dZ W^T, as dA^T = W dZ^T */
		BCUDA_BLAS(cb, cublasSgemm(cb->blas, CUBLAS_OP_T, CUBLAS_OP_N,
		    a, n, o, &one, cb->x + cb->woff[l], o, dz, o, &zero,
		    cb->delta[cur ^ 1], a));
		bcuda_k_relu_back<<<bcuda_blocks((size_t)n * a), BCUDA_THREADS, 0,
		    cb->stream>>>(cb->delta[cur ^ 1], cb->act[l], (size_t)n * a);
		BCUDA_TRY(cb, cudaGetLastError());
		cur ^= 1;
	}
	/* The batch staging buffers were read before the loss was computed, so
	 * waiting for the loss also frees them for the next batch. */
	BCUDA_TRY(cb, cudaEventSynchronize(cb->loss_ready));
	*loss = cb->h_res->loss_mean;
out:
	return rc;
}

static int
bcuda_set_logit_offset(struct backend *b, const float *off)
{
	struct bcuda *cb = bcuda_of(b);
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	if (off != NULL)
		BCUDA_TRY(cb, cudaMemcpy(cb->loff, off,
		    (size_t)b->spec.sizes[b->spec.nlayers] * sizeof(float),
		    cudaMemcpyHostToDevice));
	cb->have_loff = off != NULL;
out:
	return rc;
}

static int
bcuda_sgd_step(struct backend *b, const struct sgd_hparams *h)
{
	struct bcuda *cb = bcuda_of(b);
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	bcuda_k_sgd<<<bcuda_blocks(b->d), BCUDA_THREADS, 0, cb->stream>>>(cb->x,
	    cb->v, cb->g, b->d, h->lr, h->momentum, h->weight_decay);
	BCUDA_TRY(cb, cudaGetLastError());
out:
	return rc;
}

static int
bcuda_evaluate(struct backend *b, const float *x, const uint8_t *y, int n,
    double *loss_sum, int *correct)
{
	struct bcuda *cb = bcuda_of(b);
	int rc;

	if ((rc = bcuda_load_batch(cb, x, y, n)) < 0 ||
	    (rc = bcuda_forward(cb, n)) < 0 ||
	    (rc = bcuda_loss(cb, n, NULL)) < 0)
		goto out;
	BCUDA_TRY(cb, cudaStreamSynchronize(cb->stream));
	*loss_sum = cb->h_res->loss_sum;
	*correct = cb->h_res->correct;
out:
	return rc;
}

/* Grows a pinned host buffer and its device twin to hold n elements; on
 * failure the old pair stays in place. */
static int
bcuda_reserve(struct bcuda *cb, void **host, void **dev, size_t *cap, size_t n,
    size_t elem)
{
	void *h = NULL, *d = NULL;
	int rc = 0;

	if (n <= *cap)
		return 0;
	BCUDA_TRY(cb, cudaHostAlloc(&h, n * elem, cudaHostAllocDefault));
	BCUDA_TRY(cb, cudaMalloc(&d, n * elem));
	BCUDA_TRY(cb, cudaStreamSynchronize(cb->stream));
	if (*host != NULL)
		(void)cudaFreeHost(*host);
	(void)cudaFree(*dev);
	*host = h;
	*dev = d;
	*cap = n;
	h = d = NULL;
out:
	if (h != NULL)
		(void)cudaFreeHost(h);
	(void)cudaFree(d);
	return rc;
}

/* Checks the ranges and writes the non-empty ones as spans to h_spans;
 * *total is the number of values they cover. */
static int
bcuda_spans(struct bcuda *cb, const struct model_range *r, size_t nr,
    size_t *nspan, size_t *total)
{
	size_t k = 0, t = 0;
	int rc;

	for (size_t i = 0; i < nr; i++)
		if (r[i].off > cb->base.d || r[i].len > cb->base.d - r[i].off)
			return -ERANGE;
	if ((rc = bcuda_reserve(cb, (void **)&cb->h_spans, (void **)&cb->spans,
	    &cb->spans_cap, nr, sizeof(struct bcuda_span))) < 0)
		return rc;
	for (size_t i = 0; i < nr; i++) {
		if (r[i].len == 0)
			continue;
		cb->h_spans[k].off = r[i].off;
		cb->h_spans[k].start = t;
		t += r[i].len;
		k++;
	}
	*nspan = k;
	*total = t;
	return bcuda_reserve(cb, (void **)&cb->h_vals, (void **)&cb->vals,
	    &cb->vals_cap, t, sizeof(float));
}

static int
bcuda_gather(struct backend *b, const struct model_range *r, size_t nr,
    float *values)
{
	struct bcuda *cb = bcuda_of(b);
	size_t nspan, total;
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	if ((rc = bcuda_spans(cb, r, nr, &nspan, &total)) < 0 || total == 0)
		goto out;
	BCUDA_TRY(cb, cudaMemcpyAsync(cb->spans, cb->h_spans,
	    nspan * sizeof(struct bcuda_span), cudaMemcpyHostToDevice,
	    cb->stream));
	bcuda_k_gather<<<bcuda_blocks(total), BCUDA_THREADS, 0, cb->stream>>>(
	    cb->x, cb->vals, cb->spans, nspan, total);
	BCUDA_TRY(cb, cudaGetLastError());
	rc = bcuda_download(cb, values, cb->vals, total);
out:
	return rc;
}

static int
bcuda_average_in(struct backend *b, const struct model_range *r, size_t nr,
    const float *values)
{
	struct bcuda *cb = bcuda_of(b);
	size_t nspan, total;
	int rc = 0;

	BCUDA_TRY(cb, cudaSetDevice(cb->dev));
	if ((rc = bcuda_spans(cb, r, nr, &nspan, &total)) < 0 || total == 0)
		goto out;
	BCUDA_TRY(cb, cudaMemcpyAsync(cb->spans, cb->h_spans,
	    nspan * sizeof(struct bcuda_span), cudaMemcpyHostToDevice,
	    cb->stream));
	if ((rc = bcuda_upload(cb, cb->vals, cb->h_vals, values, total)) < 0)
		goto out;
	bcuda_k_average_in<<<bcuda_blocks(total), BCUDA_THREADS, 0,
	    cb->stream>>>(cb->x, cb->vals, cb->spans, nspan, total);
	BCUDA_TRY(cb, cudaGetLastError());
	BCUDA_TRY(cb, cudaStreamSynchronize(cb->stream));
out:
	return rc;
}

static void
bcuda_free(struct backend *b)
{
	struct bcuda *cb = bcuda_of(b);

	if (cb == NULL)
		return;
	void *dev[] = { cb->x, cb->v, cb->g, cb->delta[0], cb->delta[1], cb->y,
	    cb->rowloss, cb->rowok, cb->loff, cb->res, cb->vals, cb->spans };
	void *host[] = { cb->h_x, cb->h_y, cb->h_res, cb->h_vals, cb->h_spans };

	/* Errors here would only repeat an earlier one: nothing to do. */
	(void)cudaSetDevice(cb->dev);
	if (cb->stream != NULL)
		(void)cudaStreamSynchronize(cb->stream);
	for (size_t i = 0; i < GD_ARRAY_SIZE(dev); i++)
		(void)cudaFree(dev[i]);
	for (int l = 0; l <= cb->base.spec.nlayers; l++)
		(void)cudaFree(cb->act[l]);
	for (size_t i = 0; i < GD_ARRAY_SIZE(host); i++)
		if (host[i] != NULL)
			(void)cudaFreeHost(host[i]);
	if (cb->blas != NULL)
		(void)cublasDestroy(cb->blas);
	if (cb->loss_ready != NULL)
		(void)cudaEventDestroy(cb->loss_ready);
	for (int i = 0; i < BCUDA_RING; i++)
		if (cb->chunk_done[i] != NULL)
			(void)cudaEventDestroy(cb->chunk_done[i]);
	if (cb->stream != NULL)
		(void)cudaStreamDestroy(cb->stream);
	free(cb);
}

/* Field order of struct backend_ops (C++ has no designated initialisers
 * before C++20). */
static const struct backend_ops bcuda_ops = {
	"cuda",
	bcuda_free,
	bcuda_set_params,
	bcuda_get_params,
	bcuda_forward_backward,
	bcuda_set_logit_offset,
	bcuda_get_grad,
	bcuda_sgd_step,
	bcuda_evaluate,
	bcuda_gather,
	bcuda_average_in,
};

/* Constructor failures: the CUDA reason, in the user's terms. */
static int
bcuda_new_fail(struct errbuf *err, int dev, cudaError_t e, const char *what,
    size_t need)
{
	size_t free_b = 0, total_b = 0;

	if (e == cudaErrorMemoryAllocation) {
		(void)cudaMemGetInfo(&free_b, &total_b);
		return errbuf_set(err, -ENOMEM,
		    "cuda:%d: out of device memory: %s of %.1f MiB failed "
		    "(%.1f MiB free of %.1f MiB)", dev, what,
		    (double)need / 1048576.0, (double)free_b / 1048576.0,
		    (double)total_b / 1048576.0);
	}
	return errbuf_set(err, bcuda_errno(e), "cuda:%d: %s: %s", dev, what,
	    cudaGetErrorString(e));
}

#define BCUDA_NEW_TRY(call, what, need) do {				\
	cudaError_t e_ = (call);					\
	if (e_ != cudaSuccess) {					\
		rc = bcuda_new_fail(err, o->device, e_, (what), (need));\
		goto out;						\
	}								\
} while (0)

extern "C" int
backend_cuda_new(const struct model_spec *spec, const struct backend_opts *o,
    struct backend **out, struct errbuf *err)
{
	struct bcuda *cb = NULL;
	struct cudaDeviceProp prop;
	struct cudaFuncAttributes fa;
	size_t d, maxw = 0, nb, bytes, off = 0;
	cublasStatus_t bs;
	cudaError_t e;
	int count = 0, rc;

	*out = NULL;
	if (spec->nlayers < 1 || spec->nlayers > MODEL_MAX_LAYERS)
		return errbuf_set(err, -EINVAL, "invalid model spec");
	for (int l = 0; l <= spec->nlayers; l++)
		if (spec->sizes[l] < 1)
			return errbuf_set(err, -EINVAL, "invalid model spec");
	if (o->max_batch < 1)
		return errbuf_set(err, -EINVAL, "max batch %d must be positive",
		    o->max_batch);
	if (o->device < 0)
		return errbuf_set(err, -ENODEV, "cuda:%d: bad device index",
		    o->device);
	if ((e = cudaGetDeviceCount(&count)) != cudaSuccess)
		return errbuf_set(err, -ENODEV, "no CUDA device available: %s",
		    cudaGetErrorString(e));
	if (count < 1)
		return errbuf_set(err, -ENODEV,
		    "no CUDA device available: no device found");
	if (o->device >= count)
		return errbuf_set(err, -ENODEV, "cuda:%d: only %d device(s)",
		    o->device, count);
	if ((e = cudaSetDevice(o->device)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, o->device)) != cudaSuccess)
		return errbuf_set(err, bcuda_errno(e), "cuda:%d: %s", o->device,
		    cudaGetErrorString(e));
	if ((e = cudaFuncGetAttributes(&fa, bcuda_k_sgd)) != cudaSuccess)
		return errbuf_set(err, -ENOTSUP,
		    "cuda:%d: %s (compute capability %d.%d) cannot run this "
		    "build's kernels (sm_80, sm_90): %s", o->device, prop.name,
		    prop.major, prop.minor, cudaGetErrorString(e));

	nb = (size_t)o->max_batch;
	cb = (struct bcuda *)xcalloc(1, sizeof(*cb));
	cb->base.ops = &bcuda_ops;
	cb->base.spec = *spec;
	cb->dev = o->device;
	cb->max_batch = o->max_batch;
	for (int l = 0; l < spec->nlayers; l++) {
		size_t a = (size_t)spec->sizes[l], w = (size_t)spec->sizes[l + 1];

		cb->woff[l] = off;
		cb->boff[l] = off + a * w;
		off = cb->boff[l] + w;
		if (w > maxw)
			maxw = w;
	}
	d = cb->base.d = off;

	BCUDA_NEW_TRY(cudaStreamCreateWithFlags(&cb->stream,
	    cudaStreamNonBlocking), "stream creation", 0);
	BCUDA_NEW_TRY(cudaEventCreateWithFlags(&cb->loss_ready,
	    cudaEventDisableTiming), "event creation", 0);
	for (int i = 0; i < BCUDA_RING; i++)
		BCUDA_NEW_TRY(cudaEventCreateWithFlags(&cb->chunk_done[i],
		    cudaEventDisableTiming), "event creation", 0);
	if ((bs = cublasCreate(&cb->blas)) != CUBLAS_STATUS_SUCCESS) {
		rc = errbuf_set(err, bcuda_blas_errno(bs), "cuda:%d: cuBLAS: %s",
		    o->device, cublasGetStatusString(bs));
		goto out;
	}
	/* Plain FP32 (no TF32) so the CPU and GPU agree to 1e-4. */
	if ((bs = cublasSetStream(cb->blas, cb->stream)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetMathMode(cb->blas, CUBLAS_DEFAULT_MATH)) !=
	    CUBLAS_STATUS_SUCCESS) {
		rc = errbuf_set(err, bcuda_blas_errno(bs), "cuda:%d: cuBLAS: %s",
		    o->device, cublasGetStatusString(bs));
		goto out;
	}

	bytes = d * sizeof(float);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->x, bytes), "parameters", bytes);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->v, bytes), "momentum", bytes);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->g, bytes), "gradient", bytes);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->vals, bytes), "gossip values",
	    bytes);
	BCUDA_NEW_TRY(cudaHostAlloc((void **)&cb->h_vals, bytes,
	    cudaHostAllocDefault), "pinned host staging", bytes);
	cb->vals_cap = d;
	for (int l = 0; l <= spec->nlayers; l++) {
		bytes = nb * (size_t)spec->sizes[l] * sizeof(float);
		BCUDA_NEW_TRY(cudaMalloc((void **)&cb->act[l], bytes),
		    "activations", bytes);
	}
	bytes = nb * maxw * sizeof(float);
	for (int i = 0; i < 2; i++)
		BCUDA_NEW_TRY(cudaMalloc((void **)&cb->delta[i], bytes),
		    "activation gradients", bytes);
	bytes = nb * (size_t)spec->sizes[0] * sizeof(float);
	BCUDA_NEW_TRY(cudaHostAlloc((void **)&cb->h_x, bytes,
	    cudaHostAllocDefault), "pinned batch buffer", bytes);
	BCUDA_NEW_TRY(cudaHostAlloc((void **)&cb->h_y, nb, cudaHostAllocDefault),
	    "pinned label buffer", nb);
	BCUDA_NEW_TRY(cudaHostAlloc((void **)&cb->h_res, sizeof(*cb->h_res),
	    cudaHostAllocDefault), "pinned result buffer", sizeof(*cb->h_res));
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->y, nb), "labels", nb);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->rowloss, nb * sizeof(float)),
	    "row losses", nb * sizeof(float));
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->rowok, nb * sizeof(int)),
	    "row results", nb * sizeof(int));
	bytes = (size_t)spec->sizes[spec->nlayers] * sizeof(float);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->loff, bytes), "logit offsets",
	    bytes);
	BCUDA_NEW_TRY(cudaMalloc((void **)&cb->res, sizeof(*cb->res)), "results",
	    sizeof(*cb->res));
	bytes = d * sizeof(float);
	BCUDA_NEW_TRY(cudaMemsetAsync(cb->x, 0, bytes, cb->stream), "memset", 0);
	BCUDA_NEW_TRY(cudaMemsetAsync(cb->v, 0, bytes, cb->stream), "memset", 0);
	BCUDA_NEW_TRY(cudaMemsetAsync(cb->g, 0, bytes, cb->stream), "memset", 0);
	BCUDA_NEW_TRY(cudaStreamSynchronize(cb->stream), "initialisation", 0);
	log_info("cuda:%d: %s (compute capability %d.%d, %.0f MiB), %zu "
	    "parameters", o->device, prop.name, prop.major, prop.minor,
	    (double)prop.totalGlobalMem / 1048576.0, d);
	*out = &cb->base;
	cb = NULL;
	rc = 0;
out:
	if (cb != NULL)
		bcuda_free(&cb->base);
	return rc;
}
