/*
 * fuzz_ckpt: the checkpoint loader (ckpt_load). The input is the file. On
 * success the state must match its own header (d = parameters of the
 * spec), which is what --resume relies on. ASan/UBSan are the oracle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckpt.h"
#include "fuzz.h"

static char path[64];

static void
fuzz_cleanup(void)
{
	unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf err = { "" };
	struct ckpt_state st;
	FILE *f;
	int fd;

	if (path[0] == '\0') {
		snprintf(path, sizeof(path), "/tmp/gd-fuzz-ckpt.XXXXXX");
		if ((fd = mkstemp(path)) < 0)
			abort();
		close(fd);
		atexit(fuzz_cleanup);
	}
	if ((f = fopen(path, "wb")) == NULL)
		abort();
	fwrite(data, 1, size, f);
	fclose(f);
	memset(&st, 0, sizeof(st));
	if (ckpt_load(path, &st, &err) != 0)
		return 0;
	if (st.d != model_spec_nparams(&st.spec))
		abort();
	ckpt_state_free(&st);
	return 0;
}
