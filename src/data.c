/*
 * data: see data.h. Files go through zlib's gz* interface, which reads
 * gzip'd and plain files alike, so one code path serves both. Headers are
 * read and checked before any payload, and payload buffers grow with the
 * bytes that really arrive, so a header that lies about its size costs a
 * "truncated" error, not a huge allocation. After the payload one more byte
 * is requested: that both catches trailing junk and makes zlib verify the
 * gzip trailer (CRC, length).
 *
 * Shards are computed for all peers at once (O(n)) from a counter-based
 * stream keyed by the seed (rng.h), and the caller's part is picked out, so
 * every peer derives the same disjoint cover without talking to the others.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "data.h"
#include "rng.h"

#define DATA_IMAGES_MAGIC 0x00000803u
#define DATA_LABELS_MAGIC 0x00000801u
#define DATA_MAX_N (1u << 26)
#define DATA_MAX_DIM (1u << 20)
#define DATA_NCLASSES 10

/*
 * Fashion-MNIST training-set pixel mean and standard deviation (of p/255);
 * centring the inputs keeps the first layer's pre-activations near zero, as
 * the He initialisation assumes.
 */
#define DATA_MEAN 0.2860f
#define DATA_STD 0.3530f

struct data_file {
	gzFile gz;
	char path[PATH_MAX];
};

/* Opens DIR/NAME.gz, or DIR/NAME when the .gz does not exist. */
static int
data_open(const char *dir, const char *name, struct data_file *f, struct errbuf *err)
{
	static const char *const suffix[] = { ".gz", "" };
	int rc;

	for (size_t i = 0; i < GD_ARRAY_SIZE(suffix); i++) {
		rc = snprintf(f->path, sizeof(f->path), "%s/%s%s", dir, name, suffix[i]);
		if (rc < 0 || (size_t)rc >= sizeof(f->path))
			return errbuf_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
		errno = 0;
		/* "e": O_CLOEXEC, so a daemon's children do not inherit it. */
		if ((f->gz = gzopen(f->path, "rbe")) != NULL) {
			gzbuffer(f->gz, 128 * 1024);
			return 0;
		}
		if (errno != ENOENT) {
			rc = errno != 0 ? errno : ENOMEM;
			return errbuf_set(err, -rc, "%s: %s", f->path, strerror(rc));
		}
	}
	return errbuf_set(err, -ENOENT, "%s/%s: no such file (with or without .gz)",
	    dir, name);
}

static void
data_close(struct data_file *f)
{
	if (f->gz != NULL)
		gzclose(f->gz);
	f->gz = NULL;
}

/* Reads up to n bytes; *got says how many arrived. */
static int
data_read(struct data_file *f, void *buf, size_t n, size_t *got, struct errbuf *err)
{
	unsigned char *p = buf;
	const char *msg;
	int zerr;

	/* Short counts (EOF, or a gzip stream cut short) are the caller's to
	 * judge; only real decompression or I/O errors fail here. */
	*got = 0;
	while (*got < n) {
		size_t want = n - *got;
		int r;

		if (want > INT_MAX / 2)
			want = INT_MAX / 2;
		r = gzread(f->gz, p + *got, (unsigned)want);
		if (r < 0) {
			size_t plen = strlen(f->path);

			msg = gzerror(f->gz, &zerr);
			if (zerr == Z_ERRNO)
				msg = strerror(errno);
			/* zlib prefixes its messages with the path we already print. */
			else if (strncmp(msg, f->path, plen) == 0 && msg[plen] == ':')
				msg += plen + (msg[plen + 1] == ' ' ? 2 : 1);
			return errbuf_set(err, -EIO, "%s: read error: %s", f->path, msg);
		}
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}

/* A gzip stream cut short reads as an early EOF that zlib flags this way. */
static int
data_cut_short(struct data_file *f)
{
	int zerr;

	gzerror(f->gz, &zerr);
	return zerr == Z_BUF_ERROR;
}

static uint32_t
data_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the header of an IDX file: magic, then ndims big-endian counts. */
static int
data_header(struct data_file *f, uint32_t magic, uint32_t *dims, int ndims,
    struct errbuf *err)
{
	unsigned char h[16];
	size_t want = 4 + 4 * (size_t)ndims, got;
	int rc;

	if ((rc = data_read(f, h, want, &got, err)) != 0)
		return rc;
	if (got < want)
		return errbuf_set(err, -EINVAL, "%s: truncated header: expected %zu bytes, got %zu",
		    f->path, want, got);
	if (data_be32(h) != magic)
		return errbuf_set(err, -EINVAL, "%s: bad magic 0x%08x (expected 0x%08x)",
		    f->path, data_be32(h), magic);
	for (int i = 0; i < ndims; i++) {
		dims[i] = data_be32(h + 4 + 4 * i);
		if (dims[i] == 0)
			return errbuf_set(err, -EINVAL, "%s: dimension %d is zero", f->path, i);
	}
	return 0;
}

/*
 * Reads exactly n payload bytes into a malloc'd buffer, growing it as data
 * arrives, and insists that nothing follows them.
 */
static int
data_payload(struct data_file *f, size_t n, unsigned char **out, struct errbuf *err)
{
	unsigned char *buf = NULL, *nb, extra;
	size_t have = 0, cap = 0, got;
	int rc;

	while (have < n) {
		size_t step;

		if (have == cap) {
			cap = cap == 0 ? 1u << 20 : cap * 2;
			if (cap > n)
				cap = n;
			if ((nb = realloc(buf, cap)) == NULL) {
				rc = errbuf_set(err, -ENOMEM, "%s: out of memory for %zu bytes",
				    f->path, cap);
				goto out;
			}
			buf = nb;
		}
		step = cap - have;
		if ((rc = data_read(f, buf + have, step, &got, err)) != 0)
			goto out;
		have += got;
		if (got < step)
			break;
	}
	if (have < n) {
		rc = errbuf_set(err, -EINVAL, "%s: truncated%s: expected %zu bytes of data, got %zu",
		    f->path, data_cut_short(f) ? " gzip stream" : "", n, have);
		goto out;
	}
	if ((rc = data_read(f, &extra, 1, &got, err)) != 0)
		goto out;
	if (got != 0) {
		rc = errbuf_set(err, -EINVAL, "%s: trailing data after the %zu bytes the header announces",
		    f->path, n);
		goto out;
	}
	if (data_cut_short(f)) {
		rc = errbuf_set(err, -EINVAL, "%s: truncated: gzip stream ends without its trailer",
		    f->path);
		goto out;
	}
	*out = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	return rc;
}

int
data_load(const char *dir, const char *prefix, struct data_set *out, struct errbuf *err)
{
	struct data_file fi = { 0 }, fl = { 0 };
	unsigned char *pix = NULL, *lab = NULL;
	uint32_t idim[3], ldim[1];
	char name[64];
	float *x = NULL;
	size_t n, dim;
	int rc;

	memset(out, 0, sizeof(*out));
	if (strlen(prefix) > 32 || strchr(prefix, '/') != NULL)
		return errbuf_set(err, -EINVAL, "bad data set prefix \"%s\"", prefix);
	snprintf(name, sizeof(name), "%s-images-idx3-ubyte", prefix);
	if ((rc = data_open(dir, name, &fi, err)) != 0)
		goto out;
	snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", prefix);
	if ((rc = data_open(dir, name, &fl, err)) != 0)
		goto out;
	if ((rc = data_header(&fi, DATA_IMAGES_MAGIC, idim, 3, err)) != 0 ||
	    (rc = data_header(&fl, DATA_LABELS_MAGIC, ldim, 1, err)) != 0)
		goto out;
	if (idim[0] > DATA_MAX_N) {
		rc = errbuf_set(err, -EINVAL, "%s: %u images is more than the %u allowed",
		    fi.path, idim[0], DATA_MAX_N);
		goto out;
	}
	if ((uint64_t)idim[1] * idim[2] > DATA_MAX_DIM) {
		rc = errbuf_set(err, -EINVAL, "%s: %ux%u images are larger than %u pixels",
		    fi.path, idim[1], idim[2], DATA_MAX_DIM);
		goto out;
	}
	if (ldim[0] != idim[0]) {
		rc = errbuf_set(err, -EINVAL, "%s has %u images but %s has %u labels",
		    fi.path, idim[0], fl.path, ldim[0]);
		goto out;
	}
	n = idim[0];
	dim = (size_t)idim[1] * idim[2];

	/* Labels first: they are small and bound the image read. */
	if ((rc = data_payload(&fl, n, &lab, err)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (lab[i] >= DATA_NCLASSES) {
			rc = errbuf_set(err, -EINVAL, "%s: label %u of sample %zu is not below %d",
			    fl.path, lab[i], i, DATA_NCLASSES);
			goto out;
		}
	}
	if ((rc = data_payload(&fi, n * dim, &pix, err)) != 0)
		goto out;
	if ((x = malloc(n * dim * sizeof(*x))) == NULL) {
		rc = errbuf_set(err, -ENOMEM, "out of memory for %zu x %zu floats", n, dim);
		goto out;
	}
	for (size_t i = 0; i < n * dim; i++)
		x[i] = ((float)pix[i] / 255.0f - DATA_MEAN) / DATA_STD;

	out->n = n;
	out->dim = dim;
	out->nclasses = DATA_NCLASSES;
	out->x = x;
	out->y = lab;
	x = NULL;
	lab = NULL;
	rc = 0;
out:
	data_close(&fi);
	data_close(&fl);
	free(pix);
	free(lab);
	free(x);
	return rc;
}

void
data_free(struct data_set *s)
{
	if (s == NULL)
		return;
	free(s->x);
	free(s->y);
	memset(s, 0, sizeof(*s));
}

int
data_partition_parse(const char *s, struct data_partition *p, struct errbuf *err)
{
	static const char dir[] = "dirichlet:";
	double a;

	if (strcmp(s, "iid") == 0) {
		p->kind = DATA_IID;
		p->alpha = 0;
		return 0;
	}
	if (strncmp(s, dir, sizeof(dir) - 1) == 0) {
		if (util_parse_double(s + sizeof(dir) - 1, 0, HUGE_VAL, &a) != 0 ||
		    !(a > 0) || !isfinite(a))
			return errbuf_set(err, -EINVAL,
			    "partition \"%s\": alpha must be a positive finite number", s);
		p->kind = DATA_DIRICHLET;
		p->alpha = a;
		return 0;
	}
	return errbuf_set(err, -EINVAL,
	    "partition \"%s\": expected \"iid\" or \"dirichlet:ALPHA\"", s);
}

/*
 * log of a Gamma(alpha, 1) variate by Marsaglia and Tsang (2000). Logs,
 * because for small alpha the boost U^(1/alpha) underflows to 0 in plain
 * doubles and a whole Dirichlet draw would come out as 0/0.
 */
static double
data_log_gamma(struct rng *r, double alpha)
{
	double boost = 0, d, c, z, v, u;

	if (alpha < 1) {
		/* Gamma(a) = Gamma(a + 1) * U^(1/a) */
		do
			u = rng_uniform(r);
		while (u <= 0);
		boost = log(u) / alpha;
		alpha += 1;
	}
	d = alpha - 1.0 / 3;
	c = 1 / sqrt(9 * d);
	for (;;) {
		do {
			z = rng_normal(r);
			v = 1 + c * z;
		} while (v <= 0);
		v = v * v * v;
		do
			u = rng_uniform(r);
		while (u <= 0);
		if (u < 1 - 0.0331 * z * z * z * z ||
		    log(u) < 0.5 * z * z + d * (1 - v + log(v)))
			return log(d * v) + boost;
	}
}

/* Splits each class over the peers by a Dirichlet(alpha) draw per class. */
static int
data_assign_dirichlet(const struct data_set *s, unsigned count, double alpha,
    uint64_t seed, uint32_t *owner, struct errbuf *err)
{
	size_t *order = NULL, *start = NULL, *bucket = NULL;
	double *lg = NULL;
	int k = s->nclasses, rc;
	struct rng r;

	order = malloc(s->n * sizeof(*order));
	start = calloc((size_t)k + 1, sizeof(*start));
	bucket = calloc((size_t)k, sizeof(*bucket));
	lg = malloc(count * sizeof(*lg));
	if (order == NULL || start == NULL || bucket == NULL || lg == NULL) {
		rc = errbuf_set(err, -ENOMEM, "out of memory for shard assignment");
		goto out;
	}
	/* Group sample indices by class (counting sort), then shuffle each
	 * group so a class's share is a random subset, not its first items. */
	for (size_t i = 0; i < s->n; i++)
		start[s->y[i] + 1]++;
	for (int c = 0; c < k; c++)
		start[c + 1] += start[c];
	for (size_t i = 0; i < s->n; i++)
		order[start[s->y[i]] + bucket[s->y[i]]++] = i;

	for (int c = 0; c < k; c++) {
		size_t m = start[c + 1] - start[c], lo = 0;
		double mx = -HUGE_VAL, sum = 0, cum = 0;

		rng_init(&r, seed, "shard-dirichlet", (uint64_t)c, 0);
		rng_shuffle(&r, order + start[c], m);
		for (unsigned p = 0; p < count; p++) {
			lg[p] = data_log_gamma(&r, alpha);
			if (lg[p] > mx)
				mx = lg[p];
		}
		for (unsigned p = 0; p < count; p++) {
			lg[p] = exp(lg[p] - mx);
			sum += lg[p];
		}
		/* Cut at rounded cumulative proportions so the pieces tile the
		 * class exactly whatever the rounding. */
		for (unsigned p = 0; p < count; p++) {
			size_t hi;

			cum += lg[p];
			hi = p + 1 == count ? m : (size_t)llround(cum / sum * (double)m);
			if (hi > m)
				hi = m;
			if (hi < lo)
				hi = lo;
			for (size_t j = lo; j < hi; j++)
				owner[order[start[c] + j]] = p;
			lo = hi;
		}
		rng_clear(&r);
	}
	rc = 0;
out:
	free(order);
	free(start);
	free(bucket);
	free(lg);
	return rc;
}

/*
 * A Dirichlet draw may leave a peer with nothing, which no trainer can use.
 * Each empty peer, in index order, takes the highest-indexed sample of the
 * currently largest shard (lowest index on ties): deterministic, and it
 * disturbs the skew as little as possible.
 */
static int
data_fill_empty(size_t n, unsigned count, uint32_t *owner, struct errbuf *err)
{
	size_t *size = calloc(count, sizeof(*size));

	if (size == NULL)
		return errbuf_set(err, -ENOMEM, "out of memory for shard sizes");
	for (size_t i = 0; i < n; i++)
		size[owner[i]]++;
	for (unsigned p = 0; p < count; p++) {
		unsigned big = 0;
		size_t i;

		if (size[p] != 0)
			continue;
		for (unsigned q = 1; q < count; q++)
			if (size[q] > size[big])
				big = q;
		for (i = n; i-- > 0;)
			if (owner[i] == big)
				break;
		owner[i] = p;
		size[big]--;
		size[p]++;
	}
	free(size);
	return 0;
}

/*
 * The returned indices are in increasing order: deterministic, cache
 * friendly, and the trainer reshuffles them every epoch anyway.
 */
int
data_shard(const struct data_set *s, unsigned index, unsigned count,
    const struct data_partition *p, uint64_t seed, size_t **idx, size_t *n,
    struct errbuf *err)
{
	uint32_t *owner = NULL;
	size_t *perm = NULL, *res = NULL, m = 0;
	struct rng r;
	int rc;

	*idx = NULL;
	*n = 0;
	if (count == 0 || index >= count)
		return errbuf_set(err, -EINVAL, "shard %u/%u: index must be below the count",
		    index, count);
	if (s->n < count)
		return errbuf_set(err, -EINVAL,
		    "cannot split %zu samples into %u non-empty shards", s->n, count);
	if (p->kind == DATA_DIRICHLET) {
		if (!(p->alpha > 0) || !isfinite(p->alpha))
			return errbuf_set(err, -EINVAL, "dirichlet alpha must be positive");
		if (s->nclasses <= 0 || s->nclasses > 256)
			return errbuf_set(err, -EINVAL, "bad class count %d", s->nclasses);
		for (size_t i = 0; i < s->n; i++)
			if (s->y[i] >= s->nclasses)
				return errbuf_set(err, -EINVAL, "label %u of sample %zu is not below %d",
				    s->y[i], i, s->nclasses);
	} else if (p->kind != DATA_IID)
		return errbuf_set(err, -EINVAL, "unknown partition kind %d", (int)p->kind);

	if ((owner = malloc(s->n * sizeof(*owner))) == NULL) {
		rc = errbuf_set(err, -ENOMEM, "out of memory for shard assignment");
		goto out;
	}
	if (p->kind == DATA_IID) {
		if ((perm = malloc(s->n * sizeof(*perm))) == NULL) {
			rc = errbuf_set(err, -ENOMEM, "out of memory for shard assignment");
			goto out;
		}
		for (size_t i = 0; i < s->n; i++)
			perm[i] = i;
		rng_init(&r, seed, "shard-iid", 0, 0);
		rng_shuffle(&r, perm, s->n);
		rng_clear(&r);
		/* Contiguous pieces of the permutation; the first n % count
		 * pieces get one extra sample, so sizes differ by at most 1. */
		for (size_t q = 0, j = 0; q < count; q++) {
			size_t len = s->n / count + (q < s->n % count);

			for (size_t e = j + len; j < e; j++)
				owner[perm[j]] = (uint32_t)q;
		}
	} else {
		if ((rc = data_assign_dirichlet(s, count, p->alpha, seed, owner, err)) != 0 ||
		    (rc = data_fill_empty(s->n, count, owner, err)) != 0)
			goto out;
	}

	for (size_t i = 0; i < s->n; i++)
		m += owner[i] == index;
	if ((res = malloc(m * sizeof(*res))) == NULL) {
		rc = errbuf_set(err, -ENOMEM, "out of memory for %zu shard indices", m);
		goto out;
	}
	m = 0;
	for (size_t i = 0; i < s->n; i++)
		if (owner[i] == index)
			res[m++] = i;
	*idx = res;
	*n = m;
	rc = 0;
out:
	free(owner);
	free(perm);
	return rc;
}
