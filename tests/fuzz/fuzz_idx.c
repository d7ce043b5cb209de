/*
 * fuzz_idx: the IDX loader (data_load) and the shard split behind it.
 * Input: a flags byte (bit 0: store the files gzip'd, as the dataset
 * package ships them; bits 1-2: shard count - 1; bit 3: dirichlet split),
 * u16 length of the image file, the image file, then the label file. Both
 * land in a private directory as train-images-idx3-ubyte and
 * train-labels-idx1-ubyte (.gz). ASan/UBSan are the oracle; on success the
 * loaded set must be self-consistent (labels below nclasses).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <zlib.h>

#include "data.h"
#include "fuzz.h"

static char dir[64];

static void
fuzz_write(const char *name, int gz, const uint8_t *p, size_t n)
{
	char path[128], other[128];
	FILE *f;
	gzFile z;

	snprintf(path, sizeof(path), "%s/%s%s", dir, name, gz ? ".gz" : "");
	snprintf(other, sizeof(other), "%s/%s%s", dir, name, gz ? "" : ".gz");
	unlink(other);
	if (gz) {
		if ((z = gzopen(path, "wb")) == NULL)
			abort();
		if (n > 0)
			gzwrite(z, p, (unsigned)n);
		gzclose(z);
		return;
	}
	if ((f = fopen(path, "wb")) == NULL)
		abort();
	fwrite(p, 1, n, f);
	fclose(f);
}

static void
fuzz_cleanup(void)
{
	static const char *const names[] = { "train-images-idx3-ubyte",
		"train-labels-idx1-ubyte" };
	char path[128];

	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s%s", dir, names[i / 2], i % 2 ? ".gz" : "");
		unlink(path);
	}
	rmdir(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct data_partition part = { DATA_IID, 0 };
	struct errbuf err = { "" };
	struct data_set s;
	const uint8_t *img;
	size_t nimg, *idx = NULL, nidx;
	uint8_t flags;

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "/tmp/gd-fuzz-idx.XXXXXX");
		if (mkdtemp(dir) == NULL)
			abort();
		atexit(fuzz_cleanup);
	}
	flags = fuzz_u8(&in);
	nimg = fuzz_bytes(&in, fuzz_u16(&in), &img);
	fuzz_write("train-images-idx3-ubyte", flags & 1, img, nimg);
	fuzz_write("train-labels-idx1-ubyte", flags & 1, in.p, in.n);
	memset(&s, 0, sizeof(s));
	if (data_load(dir, "train", &s, &err) != 0)
		return 0;
	for (size_t i = 0; i < s.n; i++) {
		if (s.y[i] >= s.nclasses)
			abort();
	}
	if (flags & 8)
		part = (struct data_partition){ DATA_DIRICHLET, 0.5 };
	if (data_shard(&s, 0, ((flags >> 1) & 3) + 1u, &part, 1, &idx, &nidx, &err) == 0) {
		for (size_t i = 0; i < nidx; i++) {
			if (idx[i] >= s.n)
				abort();
		}
		free(idx);
	}
	data_free(&s);
	return 0;
}
