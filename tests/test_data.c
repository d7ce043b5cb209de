/*
 * test_data: the IDX loader against small hand-made files, plain and gzip'd,
 * good and broken in every way the loader promises to catch; partition
 * parsing; shard cover, disjointness, determinism and skew; and, when the
 * Debian dataset is installed, the real Fashion-MNIST files.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "check.h"
#include "data.h"

#define REAL_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void
clean_dir(void)
{
	char path[512];
	struct dirent *de;
	DIR *d = opendir(tmpdir);

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
		unlink(path);
	}
	closedir(d);
}

/* Writes buf to tmpdir/name, through gzip when gz. */
static void
write_file(const char *name, const void *buf, size_t n, int gz)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s%s", tmpdir, name, gz ? ".gz" : "");
	if (gz) {
		gzFile f = gzopen(path, "wb");

		if (f == NULL || (n > 0 && gzwrite(f, buf, (unsigned)n) != (int)n) ||
		    gzclose(f) != Z_OK) {
			fprintf(stderr, "cannot write %s\n", path);
			exit(99);
		}
	} else {
		FILE *f = fopen(path, "wb");

		if (f == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
			fprintf(stderr, "cannot write %s\n", path);
			exit(99);
		}
	}
}

/* An IDX image file of n images of r x c: pixels (i * 37 + 11) % 256. */
static size_t
make_images(unsigned char *buf, uint32_t magic, uint32_t n, uint32_t r, uint32_t c,
    size_t npix)
{
	put_be32(buf, magic);
	put_be32(buf + 4, n);
	put_be32(buf + 8, r);
	put_be32(buf + 12, c);
	for (size_t i = 0; i < npix; i++)
		buf[16 + i] = (unsigned char)((i * 37 + 11) % 256);
	return 16 + npix;
}

/* Labels i % 10, then `bad` (if >= 0) at position 3. */
static size_t
make_labels(unsigned char *buf, uint32_t magic, uint32_t n, size_t nlab, int bad)
{
	put_be32(buf, magic);
	put_be32(buf + 4, n);
	for (size_t i = 0; i < nlab; i++)
		buf[8 + i] = (unsigned char)(i % 10);
	if (bad >= 0)
		buf[8 + 3] = (unsigned char)bad;
	return 8 + nlab;
}

#define N 20
#define R 3
#define C 4

static unsigned char img[16 + 2 * N * R * C + 16], lab[8 + 2 * N + 16];

/* Writes a good pair (optionally gzip'd), for the cases to spoil. */
static void
write_good(int gz)
{
	clean_dir();
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, R, C, N * R * C), gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N, N, -1), gz);
}

/* Loading must fail with a reason. */
static void
expect_fail(const char *what)
{
	struct data_set s;
	struct errbuf err = { "" };
	int rc = data_load(tmpdir, "t", &s, &err);

	if (rc == 0 || err.msg[0] == '\0') {
		fprintf(stderr, "%s: loaded (rc %d, reason \"%s\")\n", what, rc, err.msg);
		check_failures++;
		if (rc == 0)
			data_free(&s);
	} else
		printf("%-28s -> %s\n", what, err.msg);
}

static void
test_load(int gz)
{
	struct errbuf err = { "" };
	struct data_set s;
	size_t n;
	int rc;

	write_good(gz);
	rc = data_load(tmpdir, "t", &s, &err);
	CHECK(rc == 0);
	if (rc != 0) {
		fprintf(stderr, "good %s files: %s\n", gz ? "gzip" : "plain", err.msg);
		return;
	}
	CHECK(s.n == N && s.dim == R * C && s.nclasses == 10);
	for (size_t i = 0; i < N * R * C; i++) {
		float want = ((float)((i * 37 + 11) % 256) / 255.0f - 0.2860f) / 0.3530f;

		CHECK(fabsf(s.x[i] - want) < 1e-6f);
	}
	for (size_t i = 0; i < N; i++)
		CHECK(s.y[i] == i % 10);
	data_free(&s);
	CHECK(s.x == NULL && s.y == NULL);

	/* Bad magic, on either file. */
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x801, N, R, C, N * R * C), gz);
	expect_fail("images magic");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x803, N, N, -1), gz);
	expect_fail("labels magic");

	/* Payload shorter than announced, by one byte and by a lot. */
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, R, C, N * R * C - 1), gz);
	expect_fail("images truncated by 1");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N, N / 2, -1), gz);
	expect_fail("labels truncated");
	/* A header that claims a huge count must not be believed. */
	write_good(gz);
	n = make_images(img, 0x803, 1u << 26, 28, 28, N * R * C);
	write_file("t-images-idx3-ubyte", img, n, gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, 1u << 26, N, -1), gz);
	expect_fail("huge count, short payload");

	/* Header cut short. */
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, 10, gz);
	expect_fail("images header truncated");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, 6, gz);
	expect_fail("labels header truncated");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, 0, gz);
	expect_fail("labels empty");

	/* Trailing junk. */
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, R, C, N * R * C + 1), gz);
	expect_fail("images trailing byte");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N, N + 5, -1), gz);
	expect_fail("labels trailing bytes");

	/* Image and label counts disagree (each file consistent in itself). */
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N - 1, N - 1, -1), gz);
	expect_fail("count mismatch");

	/* Labels out of range. */
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N, N, 10), gz);
	expect_fail("label 10");
	write_good(gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, N, N, 255), gz);
	expect_fail("label 255");

	/* Zero and oversized dimensions. */
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, 0, C, 0), gz);
	expect_fail("zero rows");
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, 0, R, C, 0), gz);
	write_file("t-labels-idx1-ubyte", lab, make_labels(lab, 0x801, 0, 0, -1), gz);
	expect_fail("zero images");
	write_good(gz);
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, 2048, 1024, 0), gz);
	expect_fail("images too large");

	/* Missing file. */
	clean_dir();
	write_file("t-images-idx3-ubyte", img, make_images(img, 0x803, N, R, C, N * R * C), gz);
	expect_fail("labels missing");
	clean_dir();
}

/* A fresh data set for the damage tests: the images in big, gzipped, and
 * 400 plain labels. Reads the start of the images' .gz file into raw (len
 * bytes) and returns its path, for the caller to damage. */
static const char *
write_gz_set(const unsigned char *big, size_t n, unsigned char *raw, size_t rawsz,
    size_t *len)
{
	static char path[512];
	unsigned char lab400[8 + 400];
	FILE *f;

	clean_dir();
	write_file("t-images-idx3-ubyte", big, n, 1);
	write_file("t-labels-idx1-ubyte", lab400, make_labels(lab400, 0x801, 400, 400, -1), 0);
	snprintf(path, sizeof(path), "%s/t-images-idx3-ubyte.gz", tmpdir);
	REQUIRE((f = fopen(path, "rb")) != NULL);
	*len = fread(raw, 1, rawsz, f);
	fclose(f);
	return path;
}

/* Damaged gzip streams: flipped bytes inside the deflate data, a cut tail. */
static void
test_corrupt_gzip(void)
{
	unsigned char raw[4096], *big;
	const char *path;
	size_t n, len;
	FILE *f;

	/* Pixels that do not compress away, so the stream has some body. */
	big = malloc(16 + 400 * 28);
	n = make_images(big, 0x803, 400, 4, 7, 400 * 28);
	for (size_t i = 16; i < n; i++)
		big[i] = (unsigned char)((i * 2654435761u) >> 13);
	for (int pos = 0; pos < 3; pos++) {
		path = write_gz_set(big, n, raw, sizeof(raw), &len);
		CHECK(len > 200);
		/* Header region, middle, and the CRC trailer. */
		long at = pos == 0 ? 40 : pos == 1 ? (long)len / 2 : (long)len - 6;
		REQUIRE((f = fopen(path, "r+b")) != NULL);
		fseek(f, at, SEEK_SET);
		fputc(raw[at] ^ 0x5a, f);
		fclose(f);
		expect_fail(pos == 0 ? "gzip corrupt early" : pos == 1 ?
		    "gzip corrupt middle" : "gzip corrupt crc");
	}
	/* Gzip cut anywhere: inside the data, or just before the trailer ends. */
	for (int cut = 0; cut < 2; cut++) {
		path = write_gz_set(big, n, raw, sizeof(raw), &len);
		CHECK(truncate(path, cut == 0 ? (off_t)len / 2 : (off_t)len - 3) == 0);
		expect_fail(cut == 0 ? "gzip cut in half" : "gzip trailer cut");
	}
	free(big);
	clean_dir();
}

static void
test_partition_parse(void)
{
	static const char *const bad[] = { "dirichlet:", "dirichlet:-1", "dirichlet:abc",
		"foo", "dirichlet:0", "dirichlet:inf", "dirichlet:nan", "dirichlet:1e999",
		"IID", "iid ", "dirichlet:0.5x", "" };
	struct data_partition p;
	struct errbuf err;

	CHECK(data_partition_parse("iid", &p, &err) == 0 && p.kind == DATA_IID);
	CHECK(data_partition_parse("dirichlet:0.5", &p, &err) == 0 &&
	    p.kind == DATA_DIRICHLET && p.alpha == 0.5);
	CHECK(data_partition_parse("dirichlet:100", &p, &err) == 0 && p.alpha == 100);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		if (data_partition_parse(bad[i], &p, &err) != -EINVAL || err.msg[0] == '\0') {
			fprintf(stderr, "partition \"%s\" accepted\n", bad[i]);
			check_failures++;
		}
	}
}

/* All shards of s: owner[i] = the shard holding sample i. Checks cover,
 * disjointness, order and non-emptiness; returns the shard sizes. */
static void
all_shards(const struct data_set *s, unsigned count, const char *part, uint64_t seed,
    int *owner, size_t *sizes)
{
	struct data_partition p;
	struct errbuf err;

	CHECK(data_partition_parse(part, &p, &err) == 0);
	for (size_t i = 0; i < s->n; i++)
		owner[i] = -1;
	for (unsigned q = 0; q < count; q++) {
		size_t *idx, n;
		int rc = data_shard(s, q, count, &p, seed, &idx, &n, &err);

		CHECK(rc == 0);
		if (rc != 0) {
			fprintf(stderr, "shard %u/%u %s: %s\n", q, count, part, err.msg);
			continue;
		}
		CHECK(n > 0);
		sizes[q] = n;
		for (size_t j = 0; j < n; j++) {
			CHECK(idx[j] < s->n);
			CHECK(j == 0 || idx[j] > idx[j - 1]);
			if (idx[j] < s->n) {
				CHECK(owner[idx[j]] == -1);
				owner[idx[j]] = (int)q;
			}
		}
		free(idx);
	}
	for (size_t i = 0; i < s->n; i++)
		CHECK(owner[i] >= 0);
}

/* Mean over peers of the largest class fraction in the peer's shard. */
static double
skew(const struct data_set *s, unsigned count, const int *owner)
{
	size_t (*hist)[10] = calloc(count, sizeof(*hist));
	double sum = 0;

	for (size_t i = 0; i < s->n; i++)
		hist[owner[i]][s->y[i]]++;
	for (unsigned q = 0; q < count; q++) {
		size_t tot = 0, mx = 0;

		for (int c = 0; c < 10; c++) {
			tot += hist[q][c];
			if (hist[q][c] > mx)
				mx = hist[q][c];
		}
		sum += (double)mx / (double)tot;
	}
	free(hist);
	return sum / count;
}

static void
test_shard(void)
{
	static const char *const parts[] = { "iid", "dirichlet:0.5", "dirichlet:0.1",
		"dirichlet:1000" };
	enum { NS = 3000, P = 8 };
	struct data_set s = { .n = NS, .dim = 1, .nclasses = 10 };
	int *o1 = malloc(NS * sizeof(int)), *o2 = malloc(NS * sizeof(int));
	size_t sz[50], sz2[50], *idx;
	struct data_partition p;
	struct errbuf err;
	size_t n;

	s.y = malloc(NS);
	for (size_t i = 0; i < NS; i++)
		s.y[i] = (uint8_t)((i * 7 + i / 13) % 10);
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		int same = 1;
		double sk;

		all_shards(&s, P, parts[k], 42, o1, sz);
		all_shards(&s, P, parts[k], 42, o2, sz2);
		CHECK(memcmp(o1, o2, NS * sizeof(int)) == 0);
		all_shards(&s, P, parts[k], 43, o2, sz2);
		for (size_t i = 0; i < NS; i++)
			same &= o1[i] == o2[i];
		CHECK(!same);
		sk = skew(&s, P, o1);
		printf("%-14s sizes", parts[k]);
		for (int q = 0; q < P; q++)
			printf(" %zu", sz[q]);
		printf("  mean max-class fraction %.3f\n", sk);
		if (k == 0) {
			for (int q = 0; q < P; q++)
				CHECK(sz[q] == NS / P || sz[q] == NS / P + 1);
			CHECK(sk < 0.2);
		}
		if (k == 2)
			CHECK(sk > 0.4);
		if (k == 3)
			CHECK(sk < 0.2);
	}

	/* As many peers as samples: a tiny alpha leaves most of them empty
	 * before the fix-up, which must give each exactly one. */
	s.n = 50;
	all_shards(&s, 50, "dirichlet:0.01", 7, o1, sz);
	for (int q = 0; q < 50; q++)
		CHECK(sz[q] == 1);
	all_shards(&s, 50, "iid", 7, o1, sz);
	for (int q = 0; q < 50; q++)
		CHECK(sz[q] == 1);
	all_shards(&s, 1, "dirichlet:0.3", 7, o1, sz);
	CHECK(sz[0] == 50);

	/* Bad requests. */
	CHECK(data_partition_parse("iid", &p, &err) == 0);
	err.msg[0] = '\0';
	CHECK(data_shard(&s, 5, 5, &p, 1, &idx, &n, &err) == -EINVAL && err.msg[0] != '\0');
	CHECK(data_shard(&s, 0, 0, &p, 1, &idx, &n, &err) == -EINVAL);
	CHECK(data_shard(&s, 0, 51, &p, 1, &idx, &n, &err) == -EINVAL);
	s.y[7] = 10;
	CHECK(data_partition_parse("dirichlet:1", &p, &err) == 0);
	CHECK(data_shard(&s, 0, 2, &p, 1, &idx, &n, &err) == -EINVAL);

	free(s.y);
	free(o1);
	free(o2);
}

static void
test_real(void)
{
	static const struct {
		const char *prefix;
		size_t n;
	} sets[] = { { "train", 60000 }, { "t10k", 10000 } };
	struct errbuf err;
	struct data_set s;
	double t;

	if (access(REAL_DIR "/train-labels-idx1-ubyte.gz", R_OK) != 0) {
		printf("note: %s not installed, real data set not checked\n", REAL_DIR);
		return;
	}
	for (size_t k = 0; k < 2; k++) {
		size_t cnt[10] = { 0 };
		int ok = 1;

		t = util_now();
		if (data_load(REAL_DIR, sets[k].prefix, &s, &err) != 0) {
			fprintf(stderr, "%s: %s\n", sets[k].prefix, err.msg);
			check_failures++;
			continue;
		}
		CHECK(s.n == sets[k].n && s.dim == 784 && s.nclasses == 10);
		for (size_t i = 0; i < s.n; i++)
			cnt[s.y[i]]++;
		for (int c = 0; c < 10; c++)
			ok &= cnt[c] == sets[k].n / 10;
		CHECK(ok);
		/* Normalised pixels span [-mean/std, (1-mean)/std]. */
		CHECK(s.x[0] >= -0.811f && s.x[0] <= 2.024f);
		printf("%s: %zu x %zu loaded in %.2f s\n", sets[k].prefix, s.n, s.dim,
		    util_now() - t);
		data_free(&s);
	}
}

static void
test_load_raw(void)
{
	test_load(0);
}

static void
test_load_gzip(void)
{
	test_load(1);
}

static const struct check_case cases[] = {
	{ "data_load_raw", test_load_raw },
	{ "data_load_gzip", test_load_gzip },
	{ "data_corrupt_gzip", test_corrupt_gzip },
	{ "data_partition_parse", test_partition_parse },
	{ "data_shard", test_shard },
	{ "data_real", test_real },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR");
	int rc;

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_data.XXXXXX",
	    base != NULL && *base != '\0' ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}
	rc = check_main(argc, argv, cases, "test_data");
	clean_dir();
	rmdir(tmpdir);
	return rc;
}
