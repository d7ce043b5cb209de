/*
 * Unit test of mask: two processes derive identical masks from the same
 * (seed, nonce); masks have exactly the requested density; ranges are
 * sorted, disjoint and inside [0, d); every coordinate is about equally
 * likely to be picked; another nonce gives another mask. Explicit masks
 * (mode delta) survive their wire coding, runs merge into ranges, and
 * every malformed coding (past d, truncated, trailing bytes, an overlong
 * varint) is refused.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "mask.h"
#include "rng.h"
#include "util.h"

static void
digest(const struct mask *m, unsigned char out[32])
{
	crypto_generichash(out, 32, (const unsigned char *)m->r, m->n * sizeof(*m->r), NULL, 0);
}

static void
check_shape(const struct mask *m, size_t d, size_t want)
{
	size_t sum = 0;

	for (size_t i = 0; i < m->n; i++) {
		CHECKF(m->r[i].len > 0, "empty range %zu", i);
		CHECKF(m->r[i].off + m->r[i].len <= d, "range %zu past d", i);
		if (i > 0)
			CHECKF(m->r[i - 1].off + m->r[i - 1].len <= m->r[i].off,
			    "ranges %zu and %zu overlap or are unsorted", i - 1, i);
		sum += m->r[i].len;
	}
	CHECKF(sum == m->count, "count %zu != sum %zu", m->count, sum);
	CHECKF(m->count == want, "count %zu, wanted %zu", m->count, want);
}

/* The same (seed, nonce) in a child process gives the same digest. */
static void
test_two_processes(void)
{
	unsigned char mine[32], theirs[32];
	struct mask m = { 0 };
	int fds[2], status;
	pid_t pid;

	if (pipe(fds) < 0) {
		perror("pipe");
		exit(99);
	}
	pid = fork();
	if (pid == 0) {
		struct mask c = { 0 };

		close(fds[0]);
		mask_build(&c, 42, 0xfeedbeefULL, 235146, 0.01, 64);
		digest(&c, theirs);
		if (write(fds[1], theirs, 32) != 32)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	CHECK(read(fds[0], theirs, 32) == 32);
	close(fds[0]);
	waitpid(pid, &status, 0);
	CHECK(mask_build(&m, 42, 0xfeedbeefULL, 235146, 0.01, 64) == 0);
	digest(&m, mine);
	CHECKF(memcmp(mine, theirs, 32) == 0, "child derived another mask");
	CHECK(mask_build(&m, 42, 0xfeedbeefULL + 1, 235146, 0.01, 64) == 0);
	digest(&m, theirs);
	CHECKF(memcmp(mine, theirs, 32) != 0, "another nonce gave the same mask");
	CHECK(mask_build(&m, 43, 0xfeedbeefULL, 235146, 0.01, 64) == 0);
	digest(&m, theirs);
	CHECKF(memcmp(mine, theirs, 32) != 0, "another seed gave the same mask");
	mask_free(&m);
}

static void
test_density(void)
{
	static const size_t ds[] = { 1, 7, 100, 1000, 235146, 1000003 };
	static const double ps[] = { 0.0001, 0.001, 0.01, 0.05, 0.3, 1.0 };
	static const size_t blocks[] = { 1, 16, 64, 4096 };
	struct mask m = { 0 };

	for (size_t a = 0; a < sizeof(ds) / sizeof(ds[0]); a++)
		for (size_t b = 0; b < sizeof(ps) / sizeof(ps[0]); b++)
			for (size_t c = 0; c < sizeof(blocks) / sizeof(blocks[0]); c++) {
				size_t want = (size_t)llround(ps[b] * (double)ds[a]);

				if (want == 0)
					want = 1;
				CHECK(mask_build(&m, 1, a * 100 + b * 10 + c, ds[a], ps[b],
				    blocks[c]) == 0);
				check_shape(&m, ds[a], want);
				/* Within 1% of the requested density whenever
				 * rounding allows it. */
				if (ps[b] * (double)ds[a] >= 100)
					CHECK(fabs((double)m.count / (double)ds[a] - ps[b]) <=
					    0.01 * ps[b]);
			}
	CHECK(mask_dense(&m, 1000) == 0 && m.n == 1 && m.count == 1000);
	CHECK(mask_build(&m, 1, 1, 0, 0.5, 4) < 0);
	CHECK(mask_build(&m, 1, 1, 10, 0.0, 4) < 0);
	CHECK(mask_build(&m, 1, 1, 10, 1.5, 4) < 0);
	CHECK(mask_build(&m, 1, 1, 10, 0.5, 0) < 0);
	mask_free(&m);
}

/* Over many nonces every coordinate is hit about p*trials times: the
 * rotation leaves no cold spots at stratum edges or at the ends. */
static void
test_uniform(void)
{
	const size_t d = 2000, trials = 4000;
	const double p = 0.05;
	unsigned *hits = calloc(d, sizeof(*hits));
	struct mask m = { 0 };
	double expect = p * (double)trials, worst = 0;

	for (size_t t = 0; t < trials; t++) {
		CHECK(mask_build(&m, 9, t, d, p, 16) == 0);
		for (size_t i = 0; i < m.n; i++)
			for (size_t j = 0; j < m.r[i].len; j++)
				hits[m.r[i].off + j]++;
	}
	for (size_t i = 0; i < d; i++) {
		double dev = fabs((double)hits[i] - expect) / expect;

		if (dev > worst)
			worst = dev;
	}
	/* Binomial sd is about 7% of the mean here; 35% is 5 sd. */
	CHECKF(worst < 0.35, "coordinate hit rate deviates by %.0f%%", worst * 100);
	printf("uniformity: worst coordinate %.1f%% off the mean\n", worst * 100);
	free(hits);
	mask_free(&m);
}

/* Every small shape: mask_check accepts exactly what mask_build can
 * build, and what it builds is sound. The shape of issue 18.2 (a block
 * longer than its stratum) once divided by zero or wrapped past d. */
static void
test_check(void)
{
	struct mask m = { 0 };
	struct errbuf err = { "" };
	unsigned built = 0, refused = 0;

	CHECK(mask_check(38, 0.9, 20, &err) == -EINVAL);
	CHECKF(strstr(err.msg, "density") && strstr(err.msg, "mask_block"),
	    "reason '%s' names neither key", err.msg);
	CHECK(mask_build(&m, 1, 1, 38, 0.9, 20) == -EINVAL);
	CHECK(mask_check(38, 0.9, 19, NULL) == 0);
	for (size_t d = 1; d <= 90; d++)
		for (int pi = 1; pi <= 20; pi++)
			for (size_t block = 1; block <= d + 2; block++) {
				double p = pi / 20.0;
				size_t want = (size_t)llround(p * (double)d);
				int ok = mask_check(d, p, block, NULL) == 0;

				CHECK(mask_build(&m, 3, d * block, d, p, block) == (ok ? 0 : -EINVAL));
				if (!ok) {
					refused++;
					continue;
				}
				built++;
				check_shape(&m, d, want ? (want < d ? want : d) : 1);
			}
	printf("mask_check: %u shapes built, %u refused\n", built, refused);
	CHECK(built > 0 && refused > 0);
	mask_free(&m);
}

static void
test_explicit(void)
{
	static const size_t idx[] = { 0, 1, 2, 7, 200, 201, 16383, 16384, 99999 };
	const size_t n = sizeof(idx) / sizeof(idx[0]), d = 100000;
	struct mask a = { 0 }, b = { 0 };
	uint8_t buf[256], bad[256];
	size_t len;

	for (size_t i = 0; i < n; i++)
		CHECK(mask_add(&a, idx[i]) == 0);
	CHECKF(a.n == 5 && a.count == n, "ranges %zu count %zu", a.n, a.count);
	CHECK(mask_wire_max(n) <= sizeof(buf));
	len = mask_encode(&a, buf);
	/* gaps 0,0,0,4,192,0,16181,0,83614: 1+1+1+1+2+1+2+1+3 bytes */
	CHECKF(len == 13, "encoded %zu bytes", len);
	CHECK(mask_decode(&b, buf, len, n, d) == 0);
	CHECK(b.n == a.n && b.count == a.count &&
	    memcmp(a.r, b.r, a.n * sizeof(*a.r)) == 0);
	/* one coordinate too many or too few, a shorter model, trailing and
	 * missing bytes */
	CHECK(mask_decode(&b, buf, len, n + 1, d) == -EINVAL);
	CHECK(mask_decode(&b, buf, len, n - 1, d) == -EINVAL);
	CHECK(mask_decode(&b, buf, len, n, 99999) == -EINVAL);
	memcpy(bad, buf, len);
	bad[len] = 0;
	CHECK(mask_decode(&b, bad, len + 1, n, d) == -EINVAL);
	CHECK(mask_decode(&b, buf, len - 1, n, d) == -EINVAL);
	/* a varint that never ends, and one past 64 bits */
	memset(bad, 0xff, sizeof(bad));
	CHECK(mask_decode(&b, bad, 12, 1, d) == -EINVAL);
	CHECK(mask_decode(&b, bad, sizeof(bad), 1, d) == -EINVAL);
	/* a gap that wraps the index around */
	len = 0;
	bad[len++] = 5;
	for (int i = 0; i < 9; i++)
		bad[len++] = 0xff;
	bad[len++] = 0x01;
	CHECK(mask_decode(&b, bad, len, 2, d) == -EINVAL);
	mask_free(&a);
	mask_free(&b);
}

/* Rice-coded gaps: a hand-coded mask, the best k on geometric gaps
 * (density 1/32: k 4, about 6.5 bits a coordinate, against the varint's
 * 8), every k round trips, and what does not decode: a unary run past d,
 * a missing byte, a trailing one, padding that is not zero, a k too
 * large. */
static void
test_rice(void)
{
	const size_t d = 1u << 20;
	struct mask a = { 0 }, b = { 0 };
	uint8_t buf[64], *big;
	struct rng r;
	size_t len, bytes, vlen;
	unsigned k;

	/* coordinates 1, 2, 9 at k 2: gaps 1, 0 and 6, each its unary then
	 * its low bits: 0 1 0 | 0 0 0 | 1 0 0 1 from the low bit up */
	REQUIRE(mask_add(&a, 1) == 0 && mask_add(&a, 2) == 0 && mask_add(&a, 9) == 0);
	len = mask_encode_rice(&a, 2, buf);
	CHECKF(len == 2 && buf[0] == 0x42 && buf[1] == 0x02, "%zu bytes %#x %#x", len, buf[0],
	    buf[1]);
	CHECK(mask_decode_rice(&b, 2, buf, len, 3, 10) == 0 && b.count == 3 && b.n == 2 &&
	    b.r[0].off == 1 && b.r[0].len == 2 && b.r[1].off == 9);
	CHECK(mask_decode_rice(&b, 2, buf, len, 3, 9) == -EINVAL);
	CHECK(mask_decode_rice(&b, 2, buf, len, 4, 10) == -EINVAL);
	CHECK(mask_decode_rice(&b, 2, buf, len - 1, 3, 10) == -EINVAL);
	buf[len] = 0;
	CHECK(mask_decode_rice(&b, 2, buf, len + 1, 3, 10) == -EINVAL);
	buf[1] |= 0x80;
	CHECK(mask_decode_rice(&b, 2, buf, len, 3, 10) == -EINVAL);
	CHECK(mask_decode_rice(&b, MASK_RICE_KMAX + 1, buf, len, 3, 10) == -EINVAL);
	memset(buf, 0xff, sizeof(buf));
	CHECK(mask_decode_rice(&b, 0, buf, sizeof(buf), 1, d) == -EINVAL);

	mask_clear(&a);
	rng_init(&r, 7, "rice", 0, 0);
	for (size_t i = 0; i < d; i++)
		if (rng_below(&r, 32) == 0)
			REQUIRE(mask_add(&a, i) == 0);
	rng_clear(&r);
	big = malloc(mask_wire_max(a.count));
	REQUIRE(big != NULL);
	vlen = mask_encode(&a, big);
	k = mask_rice_best(&a, &bytes);
	CHECKF(k == 4 && bytes * 8 < 6.6 * (double)a.count && vlen >= a.count,
	    "k %u: %zu bytes for %zu coordinates (varint %zu)", k, bytes, a.count, vlen);
	for (k = 0; k <= MASK_RICE_KMAX; k += 5) {
		len = mask_encode_rice(&a, k, big);
		CHECKF(mask_decode_rice(&b, k, big, len, a.count, d) == 0 && b.n == a.n &&
		    memcmp(a.r, b.r, a.n * sizeof(*a.r)) == 0, "k %u", k);
	}
	free(big);
	mask_free(&a);
	mask_free(&b);
}

static const struct check_case cases[] = {
	{ "mask_explicit", test_explicit },
	{ "mask_rice", test_rice },
	{ "mask_two_processes", test_two_processes },
	{ "mask_density", test_density },
	{ "mask_check", test_check },
	{ "mask_uniform", test_uniform },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 99;
	return check_main(argc, argv, cases, "test_mask");
}
