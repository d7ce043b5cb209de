/*
 * ckpt: see ckpt.h. The header is encoded field by field at the offsets of
 * struct gd_ckpt_header (little-endian, whatever the host), and floats go
 * out as their little-endian bit patterns, so files move between machines.
 * The checksum is streamed over exactly the bytes written or read; a load
 * hands out nothing until it has matched.
 *
 * Files are named ckpt-<step, at least 12 digits>.gdc: the step orders them,
 * and anything else in the directory (temporary .ckpt-XXXXXX files of a save
 * in progress or one that crashed, foreign files) is ignored.
 *
 * A save holds an exclusive flock on its temporary file until the file is
 * renamed or removed, and the kernel drops it when the process dies, kill -9
 * included. ckpt_clean removes a temporary file only when it can take that
 * lock itself: a file left by a dead process, never one that a live process
 * (another peer sharing the directory by mistake) is still writing. Age
 * would not tell them apart: a killed peer restarts within seconds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "gossipd/ckpt_format.h"
#include "ckpt.h"
#include "log.h"
#include "wire.h"

_Static_assert(sizeof(struct gd_ckpt_header) == GD_CKPT_HEADER_SIZE,
    "checkpoint header layout");
_Static_assert(GD_CKPT_MAX_LAYERS == MODEL_MAX_LAYERS,
    "checkpoint and model layer limits");
_Static_assert(sizeof(float) == 4, "IEEE-754 binary32 floats");

#define CKPT_HOFF(f) offsetof(struct gd_ckpt_header, f)
/* Far above any MLP, low enough that d cannot overflow. */
#define CKPT_MAX_UNITS (1 << 24)
/* Floats encoded per write / decoded per read. */
#define CKPT_CHUNK 16384

static int
ckpt_write_all(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads exactly n bytes; -EIO with errno 0 means the file ended early. */
static int
ckpt_read_all(int fd, void *buf, size_t n)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t r = read(fd, p, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0) {
			errno = 0;
			return -EIO;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Step from "ckpt-<digits>.gdc" as ckpt_save spells it; -1 for any other
 * name, so that each step has exactly one file name. */
static int
ckpt_name_step(const char *name, uint64_t *step)
{
	const char *p = name + 5;
	char canon[64];
	uint64_t v = 0;
	size_t nd = 0;

	if (strncmp(name, "ckpt-", 5) != 0)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, nd++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (nd == 0 || strcmp(p, ".gdc") != 0)
		return -1;
	snprintf(canon, sizeof(canon), "ckpt-%012" PRIu64 ".gdc", v);
	if (strcmp(canon, name) != 0)
		return -1;
	*step = v;
	return 0;
}

/* The template ckpt_save hands mkostemp; a name is one of its files when
 * mkostemp's six characters replaced the X's. */
#define CKPT_TMP_PREFIX ".ckpt-"
#define CKPT_TMP_RANDOM 6

static int
ckpt_is_tmp_name(const char *name)
{
	const char *p = name + strlen(CKPT_TMP_PREFIX);
	size_t n = 0;

	if (strncmp(name, CKPT_TMP_PREFIX, strlen(CKPT_TMP_PREFIX)) != 0)
		return 0;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
	    p++)
		n++;
	return *p == '\0' && n == CKPT_TMP_RANDOM;
}

/* mkdir -p with mode 0700 for what it creates. */
static int
ckpt_mkdirs(const char *dir, struct errbuf *err)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return errbuf_set(err, -ENAMETOOLONG, "bad checkpoint directory \"%s\"", dir);
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return errbuf_set(err, -errno, "cannot create %s: %s", buf, strerror(errno));
		if (c == '\0')
			break;
		*p = c;
	}
	return 0;
}

static int
ckpt_sync_dir(const char *dir, struct errbuf *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
	if (fsync(fd) != 0)
		rc = errbuf_set(err, -errno, "fsync %s: %s", dir, strerror(errno));
	close(fd);
	return rc;
}

static int
ckpt_cmp_step(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Deletes all but the newest `keep` checkpoints by step, never the one just
 * written (a save at a lower step than older files, after a restart from an
 * older one, must not remove itself).
 */
static int
ckpt_prune(const char *dir, int keep, uint64_t written, struct errbuf *err)
{
	uint64_t *steps = NULL, st;
	size_t n = 0, cap = 0;
	struct dirent *de;
	char path[PATH_MAX];
	DIR *d;
	int rc = 0;

	if ((d = opendir(dir)) == NULL)
		return errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (ckpt_name_step(de->d_name, &st) != 0)
			continue;
		if (n == cap) {
			uint64_t *ns;

			cap = cap ? 2 * cap : 16;
			if ((ns = realloc(steps, cap * sizeof(*steps))) == NULL) {
				rc = errbuf_set(err, -ENOMEM, "out of memory listing %s", dir);
				goto out;
			}
			steps = ns;
		}
		steps[n++] = st;
	}
	if (errno != 0) {
		rc = errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (n <= (size_t)keep)
		goto out;
	qsort(steps, n, sizeof(*steps), ckpt_cmp_step);
	for (size_t i = 0; i < n - (size_t)keep; i++) {
		if (steps[i] == written)
			continue;
		snprintf(path, sizeof(path), "%s/ckpt-%012" PRIu64 ".gdc", dir, steps[i]);
		if (unlink(path) != 0 && errno != ENOENT) {
			rc = errbuf_set(err, -errno, "cannot remove %s: %s", path, strerror(errno));
			goto out;
		}
	}
out:
	closedir(d);
	free(steps);
	return rc;
}

/* what names the file or state checked, for the reason. */
static int
ckpt_check_spec(const char *what, const struct model_spec *spec, size_t d,
    struct errbuf *err)
{
	/* An external trainer's vector: no layers, any size. */
	if (spec->nlayers == 0)
		return d >= 1 ? 0 : errbuf_set(err, -EINVAL, "%s: empty flat vector", what);
	if (spec->nlayers < 1 || spec->nlayers > MODEL_MAX_LAYERS)
		return errbuf_set(err, -EINVAL, "%s: model has %d layers (0 to %d allowed)",
		    what, spec->nlayers, MODEL_MAX_LAYERS);
	for (int i = 0; i <= spec->nlayers; i++)
		if (spec->sizes[i] < 1 || spec->sizes[i] > CKPT_MAX_UNITS)
			return errbuf_set(err, -EINVAL, "%s: layer size %d out of range",
			    what, spec->sizes[i]);
	if (model_spec_nparams(spec) != d)
		return errbuf_set(err, -EINVAL,
		    "%s: d = %zu does not match the model's %zu parameters",
		    what, d, model_spec_nparams(spec));
	return 0;
}

static void
ckpt_encode_header(const struct ckpt_state *st, unsigned char *h)
{
	memset(h, 0, GD_CKPT_HEADER_SIZE);
	memcpy(h + CKPT_HOFF(magic), GD_CKPT_MAGIC, 8);
	wire_put_u32(h + CKPT_HOFF(version), GD_CKPT_VERSION);
	wire_put_u32(h + CKPT_HOFF(header_size), GD_CKPT_HEADER_SIZE);
	wire_put_u32(h + CKPT_HOFF(nlayers), (uint32_t)st->spec.nlayers);
	for (int i = 0; i <= st->spec.nlayers; i++)
		wire_put_u32(h + CKPT_HOFF(sizes) + 4 * (size_t)i, (uint32_t)st->spec.sizes[i]);
	wire_put_u64(h + CKPT_HOFF(d), st->d);
	wire_put_u64(h + CKPT_HOFF(step), st->step);
	wire_put_u64(h + CKPT_HOFF(seed), st->seed);
	wire_put_u32(h + CKPT_HOFF(epoch), st->epoch);
	wire_put_u32(h + CKPT_HOFF(flags), 0);
}

/* Writes n floats as LE bit patterns, feeding the checksum on the way. */
static int
ckpt_write_floats(int fd, const float *v, size_t n, crypto_generichash_state *hs,
    unsigned char *buf)
{
	while (n > 0) {
		size_t k = n < CKPT_CHUNK ? n : CKPT_CHUNK;
		int rc;

		for (size_t i = 0; i < k; i++) {
			uint32_t u;

			memcpy(&u, &v[i], 4);
			wire_put_u32(buf + 4 * i, u);
		}
		crypto_generichash_update(hs, buf, 4 * k);
		if ((rc = ckpt_write_all(fd, buf, 4 * k)) != 0)
			return rc;
		v += k;
		n -= k;
	}
	return 0;
}

/* Writes st atomically as DIR/name (see top); path as ckpt_save's. */
static int
ckpt_write(const char *dir, const char *name, const struct ckpt_state *st, char *path,
    size_t pathlen, struct errbuf *err)
{
	unsigned char h[GD_CKPT_HEADER_SIZE], sum[GD_CKPT_CHECKSUM_SIZE], *buf = NULL;
	char tmp[PATH_MAX], final[PATH_MAX];
	crypto_generichash_state hs;
	int fd = -1, rc, n;

	if (sodium_init() < 0)
		return errbuf_set(err, -EIO, "libsodium failed to initialise");
	if ((rc = ckpt_check_spec("checkpoint", &st->spec, st->d, err)) != 0)
		return rc;
	if (st->x == NULL || st->v == NULL)
		return errbuf_set(err, -EINVAL, "checkpoint state without parameters");
	n = snprintf(final, sizeof(final), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(final) || (path != NULL && (size_t)n >= pathlen))
		return errbuf_set(err, -ENAMETOOLONG, "%s: checkpoint path too long", dir);
	snprintf(tmp, sizeof(tmp), "%s/" CKPT_TMP_PREFIX "XXXXXX", dir);
	if ((rc = ckpt_mkdirs(dir, err)) != 0)
		return rc;
	if ((buf = malloc(4 * CKPT_CHUNK)) == NULL)
		return errbuf_set(err, -ENOMEM, "out of memory for the checkpoint buffer");

	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		rc = errbuf_set(err, -errno, "cannot create a file in %s: %s", dir, strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	if (fchmod(fd, 0600) != 0) {
		rc = errbuf_set(err, -errno, "chmod %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* Ours while it is written (see top). Where the file system has no
	 * locks, ckpt_clean cannot take one either and leaves the file. */
	(void)flock(fd, LOCK_EX | LOCK_NB);
	ckpt_encode_header(st, h);
	crypto_generichash_init(&hs, NULL, 0, sizeof(sum));
	crypto_generichash_update(&hs, h, sizeof(h));
	if ((rc = ckpt_write_all(fd, h, sizeof(h))) != 0 ||
	    (rc = ckpt_write_floats(fd, st->x, st->d, &hs, buf)) != 0 ||
	    (rc = ckpt_write_floats(fd, st->v, st->d, &hs, buf)) != 0) {
		errbuf_set(err, rc, "write %s: %s", tmp, strerror(-rc));
		goto out;
	}
	crypto_generichash_final(&hs, sum, sizeof(sum));
	if ((rc = ckpt_write_all(fd, sum, sizeof(sum))) != 0) {
		errbuf_set(err, rc, "write %s: %s", tmp, strerror(-rc));
		goto out;
	}
	if (fsync(fd) != 0) {
		rc = errbuf_set(err, -errno, "fsync %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = close(fd);
	fd = -1;
	if (rc != 0) {
		rc = errbuf_set(err, -errno, "close %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (rename(tmp, final) != 0) {
		rc = errbuf_set(err, -errno, "rename %s to %s: %s", tmp, final, strerror(errno));
		goto out;
	}
	tmp[0] = '\0';
	if ((rc = ckpt_sync_dir(dir, err)) != 0)
		goto out;
	if (path != NULL)
		memcpy(path, final, (size_t)n + 1);
out:
	if (fd >= 0)
		close(fd);
	if (tmp[0] != '\0')
		unlink(tmp);
	free(buf);
	return rc;
}

/* keep < 1 keeps every file. */
int
ckpt_save(const char *dir, const struct ckpt_state *st, int keep,
    char *path, size_t pathlen, struct errbuf *err)
{
	char name[64];
	struct errbuf perr;
	int rc;

	snprintf(name, sizeof(name), "ckpt-%012" PRIu64 ".gdc", st->step);
	if ((rc = ckpt_write(dir, name, st, path, pathlen, err)) != 0)
		return rc;
	/* The new file is durable by now: failing to tidy up old ones is
	 * worth a warning, not a failed save. */
	if (keep > 0 && ckpt_prune(dir, keep, st->step, &perr) != 0)
		log_warn("checkpoint pruning: %s", perr.msg);
	return 0;
}

int
ckpt_save_start(const char *dir, const struct ckpt_state *st, char *path, size_t pathlen,
    struct errbuf *err)
{
	return ckpt_write(dir, CKPT_START_NAME, st, path, pathlen, err);
}

int
ckpt_start_path(const char *dir, char *path, size_t pathlen, struct errbuf *err)
{
	int n = snprintf(path, pathlen, "%s/" CKPT_START_NAME, dir);

	if (n < 0 || (size_t)n >= pathlen)
		return errbuf_set(err, -ENAMETOOLONG, "%s: path too long", dir);
	return 0;
}

/* Decodes and checks a header; fills spec, d, step, epoch and seed. */
static int
ckpt_decode_header(const char *path, const unsigned char *h, off_t size,
    struct ckpt_state *st, struct errbuf *err)
{
	uint32_t v, nl, hsz;
	uint64_t d;
	int rc;

	if (memcmp(h + CKPT_HOFF(magic), GD_CKPT_MAGIC, 8) != 0)
		return errbuf_set(err, -EINVAL, "%s: not a gossipd checkpoint (bad magic)", path);
	if ((v = wire_get_u32(h + CKPT_HOFF(version))) != GD_CKPT_VERSION)
		return errbuf_set(err, -ENOTSUP, "%s: unsupported checkpoint version %" PRIu32,
		    path, v);
	if ((hsz = wire_get_u32(h + CKPT_HOFF(header_size))) != GD_CKPT_HEADER_SIZE)
		return errbuf_set(err, -EINVAL, "%s: header size %" PRIu32 " (expected %d)",
		    path, hsz, GD_CKPT_HEADER_SIZE);
	d = wire_get_u64(h + CKPT_HOFF(d));
	if (d > ((uint64_t)size - GD_CKPT_HEADER_SIZE - GD_CKPT_CHECKSUM_SIZE) / 8 ||
	    (uint64_t)size != GD_CKPT_HEADER_SIZE + 8 * d + GD_CKPT_CHECKSUM_SIZE)
		return errbuf_set(err, -EINVAL,
		    "%s: file size %jd does not match d = %" PRIu64 " in its header "
		    "(truncated or corrupt)", path, (intmax_t)size, d);
	nl = wire_get_u32(h + CKPT_HOFF(nlayers));
	if (nl > GD_CKPT_MAX_LAYERS)
		return errbuf_set(err, -EINVAL, "%s: %" PRIu32 " layers (0 to %d allowed)",
		    path, nl, GD_CKPT_MAX_LAYERS);
	memset(&st->spec, 0, sizeof(st->spec));
	st->spec.nlayers = (int)nl;
	for (uint32_t i = 0; i <= GD_CKPT_MAX_LAYERS; i++) {
		uint32_t s = wire_get_u32(h + CKPT_HOFF(sizes) + 4 * i);

		if ((i > nl || nl == 0) && s != 0)
			return errbuf_set(err, -EINVAL, "%s: size set past the last layer", path);
		if (nl == 0)
			continue;
		if (i <= nl && (s < 1 || s > CKPT_MAX_UNITS))
			return errbuf_set(err, -EINVAL, "%s: layer size %" PRIu32 " out of range",
			    path, s);
		if (i <= nl)
			st->spec.sizes[i] = (int)s;
	}
	if ((rc = ckpt_check_spec(path, &st->spec, (size_t)d, err)) != 0)
		return rc;
	if (wire_get_u32(h + CKPT_HOFF(flags)) != 0)
		return errbuf_set(err, -EINVAL, "%s: unknown flags set", path);
	for (size_t i = CKPT_HOFF(reserved); i < GD_CKPT_HEADER_SIZE; i++)
		if (h[i] != 0)
			return errbuf_set(err, -EINVAL, "%s: reserved header bytes not zero", path);
	st->d = (size_t)d;
	st->step = wire_get_u64(h + CKPT_HOFF(step));
	st->seed = wire_get_u64(h + CKPT_HOFF(seed));
	st->epoch = wire_get_u32(h + CKPT_HOFF(epoch));
	return 0;
}

/* Reads n LE floats into v, feeding the checksum with the raw bytes. */
static int
ckpt_read_floats(int fd, float *v, size_t n, crypto_generichash_state *hs)
{
	unsigned char *p = (unsigned char *)v;
	int rc;

	if ((rc = ckpt_read_all(fd, p, 4 * n)) != 0)
		return rc;
	crypto_generichash_update(hs, p, 4 * n);
	for (size_t i = 0; i < n; i++) {
		uint32_t u = wire_get_u32(p + 4 * i);

		memcpy(&v[i], &u, 4);
	}
	return 0;
}

int
ckpt_load(const char *path, struct ckpt_state *st, struct errbuf *err)
{
	unsigned char h[GD_CKPT_HEADER_SIZE], sum[GD_CKPT_CHECKSUM_SIZE],
	    want[GD_CKPT_CHECKSUM_SIZE];
	crypto_generichash_state hs;
	struct ckpt_state t = { 0 };
	struct stat sb;
	int fd, rc;

	if (sodium_init() < 0)
		return errbuf_set(err, -EIO, "libsodium failed to initialise");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errbuf_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0) {
		rc = errbuf_set(err, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = errbuf_set(err, -EINVAL, "%s: not a regular file", path);
		goto out;
	}
	if (sb.st_size < GD_CKPT_HEADER_SIZE + GD_CKPT_CHECKSUM_SIZE) {
		rc = errbuf_set(err, -EINVAL, "%s: truncated (%jd bytes)", path,
		    (intmax_t)sb.st_size);
		goto out;
	}
	if ((rc = ckpt_read_all(fd, h, sizeof(h))) != 0) {
		errbuf_set(err, rc, "%s: read error: %s", path,
		    errno ? strerror(errno) : "file shrank");
		goto out;
	}
	if ((rc = ckpt_decode_header(path, h, sb.st_size, &t, err)) != 0)
		goto out;
	t.x = malloc(t.d * sizeof(float));
	t.v = malloc(t.d * sizeof(float));
	if (t.x == NULL || t.v == NULL) {
		rc = errbuf_set(err, -ENOMEM, "%s: out of memory for %zu parameters", path, t.d);
		goto out;
	}
	crypto_generichash_init(&hs, NULL, 0, sizeof(sum));
	crypto_generichash_update(&hs, h, sizeof(h));
	if ((rc = ckpt_read_floats(fd, t.x, t.d, &hs)) != 0 ||
	    (rc = ckpt_read_floats(fd, t.v, t.d, &hs)) != 0 ||
	    (rc = ckpt_read_all(fd, want, sizeof(want))) != 0) {
		errbuf_set(err, rc, "%s: read error: %s", path,
		    errno ? strerror(errno) : "file shrank");
		goto out;
	}
	crypto_generichash_final(&hs, sum, sizeof(sum));
	if (sodium_memcmp(sum, want, sizeof(sum)) != 0) {
		rc = errbuf_set(err, -EBADMSG, "%s: checksum mismatch (file corrupt)", path);
		goto out;
	}
	*st = t;
	t.x = NULL;
	t.v = NULL;
	rc = 0;
out:
	close(fd);
	free(t.x);
	free(t.v);
	return rc;
}

int
ckpt_find_latest(const char *dir, char *path, size_t pathlen, struct errbuf *err)
{
	struct dirent *de;
	uint64_t best = 0, st;
	int found = 0, n;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (ckpt_name_step(de->d_name, &st) != 0)
			continue;
		if (!found || st > best) {
			best = st;
			found = 1;
			n = snprintf(path, pathlen, "%s/%s", dir, de->d_name);
			if (n < 0 || (size_t)n >= pathlen) {
				closedir(d);
				return errbuf_set(err, -ENAMETOOLONG, "%s: path too long", dir);
			}
		}
	}
	if (errno != 0) {
		n = errno;
		closedir(d);
		return errbuf_set(err, -n, "%s: %s", dir, strerror(n));
	}
	closedir(d);
	if (!found)
		return errbuf_set(err, -ENOENT, "no checkpoint in %s", dir);
	return 0;
}

void
ckpt_state_free(struct ckpt_state *st)
{
	if (st == NULL)
		return;
	free(st->x);
	free(st->v);
	st->x = NULL;
	st->v = NULL;
}

/* Removes dir/name if it is a regular file whose lock (see top) is free;
 * returns 1 removed, 0 left, or a negative errno. */
static int
ckpt_clean_one(int dfd, const char *dir, const char *name, struct errbuf *err)
{
	struct stat sb;
	int fd, rc = 0;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 0 :
		    errbuf_set(err, -errno, "%s/%s: %s", dir, name, strerror(errno));
	if (fstat(fd, &sb) != 0) {
		rc = errbuf_set(err, -errno, "%s/%s: %s", dir, name, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || flock(fd, LOCK_EX | LOCK_NB) != 0)
		goto out;
	/* A save of another process between its mkostemp and its flock
	 * loses its file here: its rename then fails, with a reason, and
	 * no checkpoint is harmed. */
	if (unlinkat(dfd, name, 0) != 0) {
		rc = errno == ENOENT ? 0 :
		    errbuf_set(err, -errno, "cannot remove %s/%s: %s", dir, name, strerror(errno));
		goto out;
	}
	log_info("checkpoint: removed %s/%s (%lld bytes), left by a save that did not finish",
	    dir, name, (long long)sb.st_size);
	rc = 1;
out:
	close(fd);
	return rc;
}

int
ckpt_clean(const char *dir, struct errbuf *err)
{
	struct dirent *de;
	int removed = 0, rc = 0;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (!ckpt_is_tmp_name(de->d_name))
			continue;
		if ((rc = ckpt_clean_one(dirfd(d), dir, de->d_name, err)) < 0)
			goto out;
		removed += rc;
	}
	if (errno != 0) {
		rc = errbuf_set(err, -errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	rc = removed;
out:
	closedir(d);
	return rc;
}
