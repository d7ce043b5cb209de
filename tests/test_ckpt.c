/*
 * test_ckpt: checkpoint round trips (bit-exact, including odd float values),
 * the on-disk encoding against the published format, picking the latest
 * file, pruning, and refusal of every damaged file: each byte flipped,
 * truncation, growth, wrong magic or version. Also that saves leave no
 * temporary files and fail cleanly where they cannot write, and that a
 * start removes the temporary files of killed saves and nothing else.
 * The job's start model (origin.h) beside the checkpoints: never taken for
 * the newest nor pruned, written on a loop's pool, loaded only for the
 * same model and seed, and gone once dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "gossipd/ckpt_format.h"
#include "ckpt.h"
#include "origin.h"

static char tmpdir[256];

static void
rm_tree(const char *dir)
{
	char path[512];
	struct dirent *de;
	struct stat sb;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			chmod(path, 0700);
			rm_tree(path);
		} else
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* Entries of dir whose name starts with prefix. */
static int
count_files(const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void
make_state(struct ckpt_state *st, int nl, const int *sizes, uint64_t step)
{
	memset(st, 0, sizeof(*st));
	st->spec.nlayers = nl;
	for (int i = 0; i <= nl; i++)
		st->spec.sizes[i] = sizes[i];
	st->d = model_spec_nparams(&st->spec);
	st->step = step;
	st->epoch = (uint32_t)(step / 7);
	st->seed = 0x0123456789abcdefULL ^ step;
	st->x = malloc(st->d * sizeof(float));
	st->v = malloc(st->d * sizeof(float));
	for (size_t i = 0; i < st->d; i++) {
		uint32_t u = (uint32_t)(i * 2654435761u + step);

		memcpy(&st->x[i], &u, 4);
		st->v[i] = (float)i * -0.25f + (float)step;
	}
	/* Values that a lossy path would change. */
	st->x[0] = -0.0f;
	st->x[1] = INFINITY;
	st->x[2] = 1e-40f;
	st->v[0] = NAN;
}

static int
same_state(const struct ckpt_state *a, const struct ckpt_state *b)
{
	return model_spec_equal(&a->spec, &b->spec) && a->d == b->d && a->step == b->step &&
	    a->epoch == b->epoch && a->seed == b->seed &&
	    memcmp(a->x, b->x, a->d * sizeof(float)) == 0 &&
	    memcmp(a->v, b->v, a->d * sizeof(float)) == 0;
}

static unsigned char *
read_whole(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long len;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len);
	*n = fread(buf, 1, (size_t)len, f);
	fclose(f);
	return buf;
}

static void
write_whole(const char *path, const unsigned char *buf, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (f == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(99);
	}
}

/* Loading path must fail with a reason and leave st untouched. */
static int
load_fails(const char *path)
{
	struct ckpt_state st = { 0 };
	struct errbuf err = { "" };
	int rc = ckpt_load(path, &st, &err);

	if (rc == 0) {
		ckpt_state_free(&st);
		return 0;
	}
	return st.x == NULL && st.v == NULL && err.msg[0] != '\0';
}

static void
test_roundtrip(void)
{
	static const int small[] = { 5, 4, 3 }, mlp[] = { 784, 256, 128, 10 };
	struct ckpt_state a, b;
	struct errbuf err;
	char dir[300], path[400];
	unsigned char *buf, sum[32];
	struct stat sb;
	size_t n;
	int rc;

	snprintf(dir, sizeof(dir), "%s/rt/deeper", tmpdir);
	for (int k = 0; k < 2; k++) {
		if (k == 0)
			make_state(&a, 2, small, 123456789012345ULL);
		else
			make_state(&a, 3, mlp, 77);
		rc = ckpt_save(dir, &a, 3, path, sizeof(path), &err);
		CHECK(rc == 0);
		if (rc != 0) {
			fprintf(stderr, "save: %s\n", err.msg);
			ckpt_state_free(&a);
			continue;
		}
		CHECK(strstr(path, k == 0 ? "/ckpt-123456789012345.gdc" :
		    "/ckpt-000000000077.gdc") != NULL);
		CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
		CHECK((size_t)sb.st_size == GD_CKPT_HEADER_SIZE + 8 * a.d + 32);
		rc = ckpt_load(path, &b, &err);
		CHECK(rc == 0);
		if (rc == 0) {
			CHECK(same_state(&a, &b));
			ckpt_state_free(&b);
		} else
			fprintf(stderr, "load: %s\n", err.msg);

		/* The bytes on disk follow ckpt_format.h, little-endian. */
		buf = read_whole(path, &n);
		CHECK(buf != NULL && n == (size_t)sb.st_size);
		if (buf != NULL && n > GD_CKPT_HEADER_SIZE) {
			uint32_t u;

			CHECK(memcmp(buf, "GDCKPT\r\n", 8) == 0);
			CHECK(buf[8] == 1 && buf[9] == 0 && buf[10] == 0 && buf[11] == 0);
			CHECK(buf[12] == 128 && buf[13] == 0);
			CHECK(buf[16] == (unsigned char)a.spec.nlayers);
			CHECK(buf[20] == (unsigned char)(a.spec.sizes[0] & 0xff) &&
			    buf[21] == (unsigned char)(a.spec.sizes[0] >> 8));
			for (int i = 0; i < 8; i++) {
				CHECK(buf[56 + i] == (unsigned char)(a.d >> (8 * i)));
				CHECK(buf[64 + i] == (unsigned char)(a.step >> (8 * i)));
				CHECK(buf[72 + i] == (unsigned char)(a.seed >> (8 * i)));
			}
			CHECK(buf[80] == (unsigned char)a.epoch);
			memcpy(&u, &a.x[3], 4);
			CHECK(buf[128 + 12] == (unsigned char)u &&
			    buf[128 + 15] == (unsigned char)(u >> 24));
			crypto_generichash(sum, 32, buf, n - 32, NULL, 0);
			CHECK(memcmp(sum, buf + n - 32, 32) == 0);
		}
		free(buf);
		ckpt_state_free(&a);
	}
	CHECK(count_files(dir, ".ckpt-") == 0);

	/* Output buffer too small for the name: refused before writing. */
	make_state(&a, 2, small, 5);
	CHECK(ckpt_save(dir, &a, 0, path, 10, &err) == -ENAMETOOLONG);
	/* A state whose d disagrees with its spec. */
	a.d--;
	err.msg[0] = '\0';
	CHECK(ckpt_save(dir, &a, 0, NULL, 0, &err) == -EINVAL && err.msg[0] != '\0');
	a.d++;
	ckpt_state_free(&a);
	rm_tree(dir);
}

static void
test_latest_and_keep(void)
{
	static const int small[] = { 3, 2 };
	static const uint64_t steps[] = { 5, 100, 20, 99 };
	struct ckpt_state a;
	struct errbuf err;
	char dir[300], path[400], junk[400];
	int fd;

	snprintf(dir, sizeof(dir), "%s/latest", tmpdir);
	CHECK(ckpt_find_latest(dir, path, sizeof(path), &err) == -ENOENT);
	for (size_t i = 0; i < 4; i++) {
		make_state(&a, 1, small, steps[i]);
		CHECK(ckpt_save(dir, &a, 0, NULL, 0, &err) == 0);
		ckpt_state_free(&a);
	}
	/* Files that are not checkpoints must be ignored. */
	static const char *const others[] = { ".ckpt-abcdef", "ckpt-999999999999.gdc.tmp",
		"ckpt-5000.gdc", "ckpt-.gdc", "ckpt-x00000000000.gdc", "notes" };
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		snprintf(junk, sizeof(junk), "%s/%s", dir, others[i]);
		fd = open(junk, O_CREAT | O_WRONLY, 0600);
		CHECK(fd >= 0);
		close(fd);
	}
	CHECK(ckpt_find_latest(dir, path, sizeof(path), &err) == 0);
	CHECK(strstr(path, "/ckpt-000000000100.gdc") != NULL);
	CHECK(ckpt_find_latest(dir, path, 8, &err) == -ENAMETOOLONG);
	CHECK(count_files(dir, "ckpt-0") == 4);

	/* keep = 2: only the two newest survive, and the junk is untouched. */
	make_state(&a, 1, small, 101);
	CHECK(ckpt_save(dir, &a, 2, path, sizeof(path), &err) == 0);
	ckpt_state_free(&a);
	CHECK(count_files(dir, "ckpt-0") == 2);
	CHECK(count_files(dir, "ckpt-000000000101.gdc") == 1);
	CHECK(count_files(dir, "ckpt-000000000100.gdc") == 1);
	CHECK(count_files(dir, "notes") == 1 && count_files(dir, ".ckpt-abcdef") == 1);

	/* A save below the newest steps (a restart from an older file) must
	 * not prune itself away. */
	make_state(&a, 1, small, 50);
	CHECK(ckpt_save(dir, &a, 2, path, sizeof(path), &err) == 0);
	ckpt_state_free(&a);
	CHECK(count_files(dir, "ckpt-000000000050.gdc") == 1);
	CHECK(ckpt_find_latest(dir, path, sizeof(path), &err) == 0);
	CHECK(strstr(path, "/ckpt-000000000101.gdc") != NULL);

	/* keep = 1 after that: one file. */
	make_state(&a, 1, small, 200);
	CHECK(ckpt_save(dir, &a, 1, path, sizeof(path), &err) == 0);
	ckpt_state_free(&a);
	CHECK(count_files(dir, "ckpt-0") == 1);
	CHECK(count_files(dir, ".ckpt-") == 1);   /* the planted one only */

	snprintf(junk, sizeof(junk), "%s/nonexistent", tmpdir);
	CHECK(ckpt_find_latest(junk, path, sizeof(path), &err) == -ENOENT);
	rm_tree(dir);
}

static void
test_corruption(void)
{
	static const int small[] = { 5, 4, 3 };
	struct ckpt_state a, b;
	struct errbuf err;
	char dir[300], path[400], bad[400];
	unsigned char *buf, *cp, sum[32];
	size_t n, missed = 0;

	snprintf(dir, sizeof(dir), "%s/corrupt", tmpdir);
	make_state(&a, 2, small, 9);
	CHECK(ckpt_save(dir, &a, 0, path, sizeof(path), &err) == 0);
	buf = read_whole(path, &n);
	if (buf == NULL) {
		check_failures++;
		return;
	}
	snprintf(bad, sizeof(bad), "%s/bad.gdc", dir);
	cp = malloc(n + 1);

	/* Every byte, several bit patterns: header, x, v and checksum. */
	for (size_t i = 0; i < n; i++) {
		static const unsigned char flips[] = { 0x01, 0x80, 0xff };

		for (size_t f = 0; f < sizeof(flips); f++) {
			memcpy(cp, buf, n);
			cp[i] ^= flips[f];
			write_whole(bad, cp, n);
			if (!load_fails(bad)) {
				if (missed++ < 5)
					fprintf(stderr, "flip 0x%02x at %zu not detected\n", flips[f], i);
			}
		}
	}
	CHECK(missed == 0);

	/* Truncation anywhere, and one byte too many. */
	static const size_t cuts[] = { 0, 1, 8, 100, 127, 128, 129, 200 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		write_whole(bad, buf, cuts[i]);
		CHECK(load_fails(bad));
	}
	write_whole(bad, buf, n - 1);
	CHECK(load_fails(bad));
	memcpy(cp, buf, n);
	cp[n] = 0;
	write_whole(bad, cp, n + 1);
	CHECK(load_fails(bad));

	/* Wrong version and magic even with a matching checksum: refused for
	 * what they are, with the reason saying so. */
	memcpy(cp, buf, n);
	cp[8] = 2;
	crypto_generichash(sum, 32, cp, n - 32, NULL, 0);
	memcpy(cp + n - 32, sum, 32);
	write_whole(bad, cp, n);
	memset(&b, 0, sizeof(b));
	CHECK(ckpt_load(bad, &b, &err) != 0 && b.x == NULL);
	CHECK(strstr(err.msg, "unsupported checkpoint version 2") != NULL);
	memcpy(cp, buf, n);
	cp[0] = 'X';
	crypto_generichash(sum, 32, cp, n - 32, NULL, 0);
	memcpy(cp + n - 32, sum, 32);
	write_whole(bad, cp, n);
	CHECK(ckpt_load(bad, &b, &err) != 0 && strstr(err.msg, "magic") != NULL);
	/* Reserved bytes set, checksum fixed up. */
	memcpy(cp, buf, n);
	cp[GD_CKPT_HEADER_SIZE - 1] = 1;
	crypto_generichash(sum, 32, cp, n - 32, NULL, 0);
	memcpy(cp + n - 32, sum, 32);
	write_whole(bad, cp, n);
	CHECK(load_fails(bad));

	/* The pristine copy still loads. */
	write_whole(bad, buf, n);
	CHECK(ckpt_load(bad, &b, &err) == 0 && same_state(&a, &b));
	ckpt_state_free(&b);
	CHECK(load_fails(dir));   /* a directory */
	free(cp);
	free(buf);
	ckpt_state_free(&a);
	rm_tree(dir);
}

static void
test_unwritable(void)
{
	static const int small[] = { 3, 2 };
	struct ckpt_state a;
	struct errbuf err = { "" };
	char file[300], dir[400];
	int fd;

	make_state(&a, 1, small, 1);
	/* Below a regular file: fails for root too. */
	snprintf(file, sizeof(file), "%s/plainfile", tmpdir);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(dir, sizeof(dir), "%s/sub", file);
	CHECK(ckpt_save(dir, &a, 1, NULL, 0, &err) < 0 && err.msg[0] != '\0');
	unlink(file);

	/* A read-only directory: only meaningful when mode bits bite. */
	snprintf(dir, sizeof(dir), "%s/ro", tmpdir);
	CHECK(mkdir(dir, 0500) == 0);
	if (geteuid() != 0) {
		err.msg[0] = '\0';
		CHECK(ckpt_save(dir, &a, 1, NULL, 0, &err) == -EACCES && err.msg[0] != '\0');
		CHECK(count_files(dir, "") == 2);   /* . and .. */
	} else
		printf("note: running as root, read-only directory check skipped\n");
	chmod(dir, 0700);
	rmdir(dir);
	ckpt_state_free(&a);
}

/* Touch dir/name; returns the open descriptor. */
static int
plant(const char *dir, const char *name)
{
	char path[400];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "partial", 7) == 7);
	return fd;
}

/* A kill mid-save leaves a .ckpt-XXXXXX file: ckpt_clean removes such
 * files (the name mkostemp makes of the template) that nobody holds, and
 * leaves a save in progress (its lock held), checkpoints, look-alike
 * names, directories and symbolic links alone. */
static void
test_clean(void)
{
	static const int small[] = { 3, 2 };
	static const char *const keep[] = { ".ckpt-abc", ".ckpt-abcdefg", ".ckpt-ab.def",
		"ckpt-XXXXXX", "x.ckpt-abcdef", "notes" };
	struct ckpt_state a;
	struct errbuf err;
	char dir[300], path[400];
	int live;

	snprintf(dir, sizeof(dir), "%s/clean", tmpdir);
	CHECK(ckpt_clean(dir, &err) == 0);   /* no directory yet: nothing to do */
	make_state(&a, 1, small, 7);
	CHECK(ckpt_save(dir, &a, 0, NULL, 0, &err) == 0);
	ckpt_state_free(&a);
	close(plant(dir, ".ckpt-k1LLed"));
	close(plant(dir, ".ckpt-000000"));
	live = plant(dir, ".ckpt-wRit1n");
	CHECK(flock(live, LOCK_EX | LOCK_NB) == 0);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		close(plant(dir, keep[i]));
	snprintf(path, sizeof(path), "%s/.ckpt-subdir", dir);
	CHECK(mkdir(path, 0700) == 0);
	snprintf(path, sizeof(path), "%s/.ckpt-l1nked", dir);
	CHECK(symlink("notes", path) == 0);

	CHECK(ckpt_clean(dir, &err) == 2);
	CHECK(count_files(dir, ".ckpt-k1LLed") == 0 && count_files(dir, ".ckpt-000000") == 0);
	CHECK(count_files(dir, ".ckpt-wRit1n") == 1);
	CHECK(count_files(dir, ".ckpt-subdir") == 1 && count_files(dir, ".ckpt-l1nked") == 1);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		CHECK(count_files(dir, keep[i]) >= 1);
	CHECK(count_files(dir, "ckpt-000000000007.gdc") == 1);
	CHECK(count_files(dir, "notes") == 1);

	/* The writer is gone (its lock with it): the next start removes it. */
	close(live);
	CHECK(ckpt_clean(dir, &err) == 1);
	CHECK(count_files(dir, ".ckpt-wRit1n") == 0);
	CHECK(ckpt_clean(dir, &err) == 0);
	rm_tree(dir);
}

static void
test_start(void)
{
	static const int small[] = { 3, 2 };
	struct ckpt_state a, b, s;
	struct errbuf err;
	char dir[300], path[400];
	float *x = NULL;
	uv_loop_t loop;

	snprintf(dir, sizeof(dir), "%s/start", tmpdir);
	make_state(&a, 1, small, 7);
	CHECK(ckpt_save(dir, &a, 1, NULL, 0, &err) == 0);
	make_state(&s, 1, small, 0);
	CHECK(ckpt_save_start(dir, &s, path, sizeof(path), &err) == 0);
	CHECK(strstr(path, "/" CKPT_START_NAME) != NULL);
	/* Not a checkpoint to resume, nor one to prune. */
	CHECK(ckpt_find_latest(dir, path, sizeof(path), &err) == 0);
	CHECK(strstr(path, "/ckpt-000000000007.gdc") != NULL);
	ckpt_state_free(&a);
	make_state(&a, 1, small, 8);
	CHECK(ckpt_save(dir, &a, 1, NULL, 0, &err) == 0);
	CHECK(count_files(dir, CKPT_START_NAME) == 1 && count_files(dir, "ckpt-0") == 1);
	CHECK(ckpt_start_path(dir, path, sizeof(path), &err) == 0);
	CHECK(ckpt_load(path, &b, &err) == 0 && same_state(&b, &s));
	ckpt_state_free(&b);

	/* origin: written on the loop's pool, read back for this model and
	 * seed only. */
	REQUIRE(uv_loop_init(&loop) == 0);
	CHECK(origin_save(&loop, dir, &a.spec, a.d, 42, a.x, &err) == 0);
	CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
	CHECK(origin_load(dir, &a.spec, a.d, 42, &x, &err) == 0 && x != NULL &&
	    memcmp(x, a.x, a.d * sizeof(float)) == 0);
	free(x);
	CHECK(origin_load(dir, &a.spec, a.d, 43, &x, &err) == -EINVAL && x == NULL);
	CHECK(strstr(err.msg, "seed 42, not 43") != NULL);
	s.spec.sizes[1] = 3;
	s.d = model_spec_nparams(&s.spec);
	CHECK(origin_load(dir, &s.spec, s.d, 42, &x, &err) == -EINVAL && x == NULL);
	origin_drop(dir);
	CHECK(origin_load(dir, &a.spec, a.d, 42, &x, &err) == -ENOENT && x == NULL);
	CHECK(count_files(dir, "ckpt-0") == 1);
	origin_drop(dir);
	CHECK(uv_loop_close(&loop) == 0);
	ckpt_state_free(&a);
	ckpt_state_free(&s);
	rm_tree(dir);
}

static const struct check_case cases[] = {
	{ "ckpt_roundtrip", test_roundtrip },
	{ "ckpt_latest_and_keep", test_latest_and_keep },
	{ "ckpt_corruption", test_corruption },
	{ "ckpt_unwritable", test_unwritable },
	{ "ckpt_clean", test_clean },
	{ "ckpt_start", test_start },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	const char *base = getenv("TMPDIR");
	int rc;

	if (sodium_init() < 0) {
		fprintf(stderr, "sodium_init failed\n");
		return 99;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_ckpt.XXXXXX",
	    base != NULL && *base != '\0' ? base : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}
	rc = check_main(argc, argv, cases, "test_ckpt");
	rm_tree(tmpdir);
	return rc;
}
