/*
 * backend_cpu: the MLP on the host, with OpenBLAS doing every matrix
 * product. Everything else is arranged so the GEMMs are nearly the whole
 * cost of a step:
 *  - all scratch (activations, deltas) is allocated once for max_batch;
 *  - the layout (W row-major fan_in x fan_out) makes the forward product
 *    A*W and the weight gradient A^T*dZ plain NN / TN GEMMs with no copy;
 *  - bias add and ReLU are one pass; the ReLU mask and the bias gradient
 *    of the layer below are one pass over the back-propagated delta; the
 *    softmax, loss, delta and last bias gradient are one pass;
 *  - the first layer's input gradient is never computed (no one needs it);
 *  - the SGD update is one vectorised pass over x, v and g. It is memory
 *    bound (~5 streams of d floats; ~70 us at d = 235k here). Two things
 *    were tried and dropped: forming W_0's gradient block by block inside
 *    the update so it stays in cache (the smaller GEMMs lost more than the
 *    traffic saved), and sharing the pass with helper threads when
 *    threads > 1 (2 cores here get only ~1.3x the bandwidth of one, and
 *    waking the helpers ate that).
 * OpenBLAS keeps its thread count process-wide, so the last backend made
 * decides it; a daemon has one model, so that is the one that counts.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend.h"

struct backend_cpu {
	struct backend base;
	int max_batch;
	float *x, *v, *g;                    /* d floats each */
	float *loff;                         /* logit offsets, one per class */
	int have_loff;
	size_t woff[MODEL_MAX_LAYERS];       /* start of W_l in x, v, g */
	size_t boff[MODEL_MAX_LAYERS];       /* start of b_l */
	/* act[l], l = 1..L: output of layer l-1 (after ReLU, or logits). */
	float *act[MODEL_MAX_LAYERS + 1];
	/* delta[l], l = 0..L-2: dLoss/dZ of layer l; layer L-1 uses act[L]. */
	float *delta[MODEL_MAX_LAYERS];
};

static float *
cpu_alloc(size_t nfloats)
{
	size_t bytes = (nfloats * sizeof(float) + 63) & ~(size_t)63;

	return aligned_alloc(64, bytes ? bytes : 64);
}

static void
cpu_free(struct backend *b)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	if (c == NULL)
		return;
	free(c->x);
	free(c->v);
	free(c->g);
	free(c->loff);
	for (int l = 0; l <= MODEL_MAX_LAYERS; l++)
		free(c->act[l]);
	for (int l = 0; l < MODEL_MAX_LAYERS; l++)
		free(c->delta[l]);
	free(c);
}

static int
cpu_set_params(struct backend *b, const float *x, const float *v)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	memcpy(c->x, x, b->d * sizeof(float));
	if (v != NULL)
		memcpy(c->v, v, b->d * sizeof(float));
	else
		memset(c->v, 0, b->d * sizeof(float));
	return 0;
}

static int
cpu_get_params(struct backend *b, float *x, float *v)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	if (x != NULL)
		memcpy(x, c->x, b->d * sizeof(float));
	if (v != NULL)
		memcpy(v, c->v, b->d * sizeof(float));
	return 0;
}

static int
cpu_get_grad(struct backend *b, float *g)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	memcpy(g, c->g, b->d * sizeof(float));
	return 0;
}

/*
 * The element-wise passes are written with GNU C vectors of 16 floats and
 * cloned per ISA (AVX-512, AVX2, baseline), picked at load time: at -O2 the
 * compiler would leave them scalar and branchy, and they would then cost
 * a third of a step. Loads and stores go through memcpy: rows need not be
 * aligned. No vector ever crosses a function boundary (that is an ABI
 * question the clones would answer differently).
 */
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
#define V 16
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(vf16))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(vf16))
/* Not under ThreadSanitizer: it instruments the clones' ifunc resolvers,
 * which the dynamic loader runs before the sanitizer's runtime exists. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES
#endif

/* z <- max(z + bias, 0) row by row, or just z + bias on the last layer. */
CPU_CLONES static void
cpu_bias_act(float *restrict z, const float *restrict bias, int n, int w, int relu)
{
	const vf16 zero = { 0 };

	for (int i = 0; i < n; i++) {
		float *restrict r = z + (size_t)i * (size_t)w;
		int j = 0;

		for (; j + V <= w; j += V) {
			vf16 t, b;

			VLOAD(t, r + j);
			VLOAD(b, bias + j);
			t += b;
			if (relu)
				t = (vf16)((vi16)t & (t > zero));
			VSTORE(r + j, t);
		}
		for (; j < w; j++) {
			float t = r[j] + bias[j];

			r[j] = relu && !(t > 0.0f) ? 0.0f : t;
		}
	}
}

/* Leaves the logits in act[L]. */
static void
cpu_forward(struct backend_cpu *c, const float *x, int n)
{
	const struct model_spec *s = &c->base.spec;
	const float *in = x;

	for (int l = 0; l < s->nlayers; l++) {
		int a = s->sizes[l], w = s->sizes[l + 1];

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, w, a,
		    1.0f, in, a, c->x + c->woff[l], w, 0.0f, c->act[l + 1], w);
		cpu_bias_act(c->act[l + 1], c->x + c->boff[l], n, w,
		    l + 1 < s->nlayers);
		in = c->act[l + 1];
	}
}

/*
 * Softmax cross-entropy on the logits in z (n x k) plus off (k floats, or
 * NULL), stable by subtracting the row maximum. z becomes dLoss/dz =
 * (p - onehot)/n, the bias gradient gb gets its column sums, and the
 * summed loss is returned.
 */
static double
cpu_softmax_xent(float *restrict z, const uint8_t *y, int n, int k,
    const float *restrict off, float *restrict gb)
{
	float inv_n = 1.0f / (float)n;
	double loss = 0.0;

	memset(gb, 0, (size_t)k * sizeof(float));
	for (int i = 0; i < n; i++) {
		float *restrict r = z + (size_t)i * (size_t)k;
		float mx, sum = 0.0f, scale;

		if (off != NULL)
			for (int j = 0; j < k; j++)
				r[j] += off[j];
		mx = r[0];
		for (int j = 1; j < k; j++)
			mx = r[j] > mx ? r[j] : mx;
		loss += (double)(mx - r[y[i]]);
		for (int j = 0; j < k; j++) {
			r[j] = expf(r[j] - mx);
			sum += r[j];
		}
		loss += log((double)sum);
		scale = inv_n / sum;
		for (int j = 0; j < k; j++)
			r[j] *= scale;
		r[y[i]] -= inv_n;
		for (int j = 0; j < k; j++)
			gb[j] += r[j];
	}
	return loss;
}

/* d <- d where the layer's output a > 0, else 0; gb <- column sums of d. */
CPU_CLONES static void
cpu_relu_back(float *restrict d, const float *restrict a, int n, int w,
    float *restrict gb)
{
	const vf16 zero = { 0 };

	memset(gb, 0, (size_t)w * sizeof(float));
	for (int i = 0; i < n; i++) {
		float *restrict dr = d + (size_t)i * (size_t)w;
		const float *restrict ar = a + (size_t)i * (size_t)w;
		int j = 0;

		for (; j + V <= w; j += V) {
			vf16 t, act, s;

			VLOAD(t, dr + j);
			VLOAD(act, ar + j);
			VLOAD(s, gb + j);
			t = (vf16)((vi16)t & (act > zero));
			s += t;
			VSTORE(dr + j, t);
			VSTORE(gb + j, s);
		}
		for (; j < w; j++) {
			float t = ar[j] > 0.0f ? dr[j] : 0.0f;

			dr[j] = t;
			gb[j] += t;
		}
	}
}

static int
cpu_check_batch(const struct backend_cpu *c, const uint8_t *y, int n)
{
	int k = c->base.spec.sizes[c->base.spec.nlayers];

	if (n < 1 || n > c->max_batch)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (y[i] >= k)
			return -EINVAL;
	return 0;
}

static int
cpu_forward_backward(struct backend *b, const float *x, const uint8_t *y, int n,
    float *loss)
{
	struct backend_cpu *c = (struct backend_cpu *)b;
	const struct model_spec *s = &b->spec;
	int L = s->nlayers, rc;
	double lsum;

	if ((rc = cpu_check_batch(c, y, n)) < 0)
		return rc;
	cpu_forward(c, x, n);
	lsum = cpu_softmax_xent(c->act[L], y, n, s->sizes[L],
	    c->have_loff ? c->loff : NULL, c->g + c->boff[L - 1]);
	for (int l = L - 1; l >= 0; l--) {
		int a = s->sizes[l], w = s->sizes[l + 1];
		const float *in = l == 0 ? x : c->act[l];
		const float *dz = l == L - 1 ? c->act[L] : c->delta[l];

		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a, w, n,
		    1.0f, in, a, dz, w, 0.0f, c->g + c->woff[l], w);
		if (l == 0)
			break;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, a, w,
		    1.0f, dz, w, c->x + c->woff[l], w, 0.0f, c->delta[l - 1], a);
		cpu_relu_back(c->delta[l - 1], c->act[l], n, a, c->g + c->boff[l - 1]);
	}
	*loss = (float)(lsum / (double)n);
	return 0;
}

/* v <- mom*v + g + wd*x; x <- x - lr*v, on every coordinate: weight decay
 * covers the biases too, which keeps the update one uniform pass. */
CPU_CLONES static void
cpu_sgd(float *restrict x, float *restrict v, const float *restrict g, size_t d,
    float lr, float mom, float wd)
{
	vf16 vlr = lr - (vf16){ 0 }, vmom = mom - (vf16){ 0 },
	    vwd = wd - (vf16){ 0 };
	size_t i = 0;

	for (; i + V <= d; i += V) {
		vf16 xx, vv, gg;

		VLOAD(xx, x + i);
		VLOAD(vv, v + i);
		VLOAD(gg, g + i);
		vv = vmom * vv + gg + vwd * xx;
		xx -= vlr * vv;
		VSTORE(v + i, vv);
		VSTORE(x + i, xx);
	}
	for (; i < d; i++) {
		float t = mom * v[i] + g[i] + wd * x[i];

		v[i] = t;
		x[i] -= lr * t;
	}
}

static int
cpu_sgd_step(struct backend *b, const struct sgd_hparams *h)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	cpu_sgd(c->x, c->v, c->g, b->d, h->lr, h->momentum, h->weight_decay);
	return 0;
}

static int
cpu_evaluate(struct backend *b, const float *x, const uint8_t *y, int n,
    double *loss_sum, int *correct)
{
	struct backend_cpu *c = (struct backend_cpu *)b;
	int L = b->spec.nlayers, k = b->spec.sizes[L], rc, ok = 0;
	double lsum = 0.0;

	if ((rc = cpu_check_batch(c, y, n)) < 0)
		return rc;
	cpu_forward(c, x, n);
	for (int i = 0; i < n; i++) {
		const float *r = c->act[L] + (size_t)i * (size_t)k;
		float mx = r[0];
		double sum = 0.0;
		int arg = 0;

		for (int j = 1; j < k; j++)
			if (r[j] > mx) {
				mx = r[j];
				arg = j;
			}
		for (int j = 0; j < k; j++)
			sum += exp((double)(r[j] - mx));
		lsum += log(sum) + (double)(mx - r[y[i]]);
		ok += arg == y[i];
	}
	*loss_sum = lsum;
	*correct = ok;
	return 0;
}

/* The host-memory gather and mix, also the backend's over an external
 * trainer's memory (backend_shared.c). Ranges are checked by the model
 * before they get here. */
int
backend_host_gather(const float *x, const struct model_range *r, size_t nr, float *values)
{
	for (size_t i = 0; i < nr; i++) {
		memcpy(values, x + r[i].off, r[i].len * sizeof(float));
		values += r[i].len;
	}
	return 0;
}

int
backend_host_average_in(float *x, const struct model_range *r, size_t nr,
    const float *values)
{
	for (size_t i = 0; i < nr; i++) {
		float *restrict y = x + r[i].off;

		for (size_t j = 0; j < r[i].len; j++)
			y[j] = (y[j] + values[j]) * 0.5f;
		values += r[i].len;
	}
	return 0;
}

int
backend_host_add_in(float *x, const struct model_range *r, size_t nr, const float *values)
{
	for (size_t i = 0; i < nr; i++) {
		float *restrict y = x + r[i].off;

		for (size_t j = 0; j < r[i].len; j++)
			y[j] += values[j];
		values += r[i].len;
	}
	return 0;
}

static int
cpu_gather(struct backend *b, const struct model_range *r, size_t nr, float *values)
{
	return backend_host_gather(((struct backend_cpu *)b)->x, r, nr, values);
}

static int
cpu_average_in(struct backend *b, const struct model_range *r, size_t nr,
    const float *values)
{
	return backend_host_average_in(((struct backend_cpu *)b)->x, r, nr, values);
}

static int
cpu_add_in(struct backend *b, const struct model_range *r, size_t nr, const float *values)
{
	return backend_host_add_in(((struct backend_cpu *)b)->x, r, nr, values);
}

static int
cpu_set_logit_offset(struct backend *b, const float *off)
{
	struct backend_cpu *c = (struct backend_cpu *)b;

	c->have_loff = off != NULL;
	if (off != NULL)
		memcpy(c->loff, off, (size_t)b->spec.sizes[b->spec.nlayers] * sizeof(float));
	return 0;
}

static const struct backend_ops cpu_ops = {
	.name = "cpu",
	.free = cpu_free,
	.set_params = cpu_set_params,
	.get_params = cpu_get_params,
	.forward_backward = cpu_forward_backward,
	.set_logit_offset = cpu_set_logit_offset,
	.get_grad = cpu_get_grad,
	.sgd_step = cpu_sgd_step,
	.evaluate = cpu_evaluate,
	.gather = cpu_gather,
	.average_in = cpu_average_in,
	.add_in = cpu_add_in,
};

int
backend_cpu_new(const struct model_spec *spec, const struct backend_opts *o,
    struct backend **out, struct errbuf *err)
{
	struct backend_cpu *c;
	size_t off = 0;
	int L = spec->nlayers;

	*out = NULL;
	if (o->max_batch < 1 || o->max_batch > (1 << 20))
		return errbuf_set(err, -EINVAL, "max batch %d not in 1..%d",
		    o->max_batch, 1 << 20);
	if (o->threads < 1)
		return errbuf_set(err, -EINVAL, "threads %d must be positive",
		    o->threads);
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return errbuf_set(err, -ENOMEM, "no memory for the cpu backend");
	c->base.ops = &cpu_ops;
	c->base.concurrent_reads = 1;
	c->base.spec = *spec;
	c->max_batch = o->max_batch;
	for (int l = 0; l < L; l++) {
		c->woff[l] = off;
		off += (size_t)spec->sizes[l] * (size_t)spec->sizes[l + 1];
		c->boff[l] = off;
		off += (size_t)spec->sizes[l + 1];
	}
	c->base.d = off;
	if ((c->x = cpu_alloc(off)) == NULL || (c->v = cpu_alloc(off)) == NULL ||
	    (c->g = cpu_alloc(off)) == NULL ||
	    (c->loff = cpu_alloc((size_t)spec->sizes[L])) == NULL)
		goto nomem;
	for (int l = 1; l <= L; l++)
		if ((c->act[l] = cpu_alloc((size_t)o->max_batch *
		    (size_t)spec->sizes[l])) == NULL)
			goto nomem;
	for (int l = 0; l + 1 < L; l++)
		if ((c->delta[l] = cpu_alloc((size_t)o->max_batch *
		    (size_t)spec->sizes[l + 1])) == NULL)
			goto nomem;
	memset(c->v, 0, off * sizeof(float));
	memset(c->g, 0, off * sizeof(float));
	openblas_set_num_threads(o->threads);
	*out = &c->base;
	return 0;
nomem:
	cpu_free(&c->base);
	return errbuf_set(err, -ENOMEM,
	    "no memory for %zu parameters and batch %d", off, o->max_batch);
}
