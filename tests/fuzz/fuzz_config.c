/*
 * fuzz_config: the config file parser and the argv parser, through
 * config_load. Input: the INI text up to the first NUL (written to a
 * private file and passed as -c FILE when not empty), then NUL-separated
 * arguments for a first config_load call, an empty argument, and the
 * arguments of a second call. The calls run back to back, as an embedder
 * or a test would make them, so getopt state that leaks from one call into
 * the next (a half-read short option cluster) is exercised. The oracle:
 * after its call each argument is overwritten with 'c's (and freed only
 * after the second call, so the allocator cannot hand the bytes out
 * again); a second call that goes on reading the first call's cluster then
 * sees "-c..." it was never given. When none of its own arguments holds a
 * 'c' and it still ends with a config_path, abort(). --help and --version
 * print to stdout, which is sent to /dev/null meanwhile.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "log.h"

#define FUZZ_ARGS 32

static char cfg_path[64];

static void
fuzz_cleanup(void)
{
	unlink(cfg_path);
}

static void
fuzz_init(void)
{
	int fd;

	if (cfg_path[0] != '\0')
		return;
	log_set_level(LOG_ERROR);
	snprintf(cfg_path, sizeof(cfg_path), "/tmp/gd-fuzz-config.XXXXXX");
	if ((fd = mkstemp(cfg_path)) < 0)
		abort();
	close(fd);
	atexit(fuzz_cleanup);
}

/* Run config_load on argv[0..argc), then poison every argument. */
static void
fuzz_load(char **argv, int argc)
{
	int may_have_c = 0;

	struct config c;
	struct errbuf err = { "" };
	int out, null;

	fflush(stdout);
	out = dup(1);
	null = open("/dev/null", O_WRONLY);
	dup2(null, 1);
	close(null);
	for (int i = 1; i < argc; i++)
		may_have_c |= strchr(argv[i], 'c') != NULL;
	memset(&c, 0, sizeof(c));
	(void)config_load(&c, argc, argv, &err);
	fflush(stdout);
	dup2(out, 1);
	close(out);
	if (!may_have_c && c.config_path != NULL) {
		fprintf(stderr, "fuzz_config: -c taken from an earlier call's arguments\n");
		abort();
	}
	config_free(&c);
	for (int i = 0; i < argc; i++)
		memset(argv[i], 'c', strlen(argv[i]));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size, *nul;
	char *argv[2][FUZZ_ARGS + 1];
	int argc[2] = { 0, 0 };
	FILE *f;

	fuzz_init();
	nul = memchr(p, '\0', size);
	if (nul == NULL)
		nul = end;
	argv[0][argc[0]++] = strdup("gossipd");
	argv[1][argc[1]++] = strdup("gossipd");
	if (nul > p) {
		if ((f = fopen(cfg_path, "w")) == NULL)
			abort();
		fwrite(p, 1, (size_t)(nul - p), f);
		fclose(f);
		argv[0][argc[0]++] = strdup("-c");
		argv[0][argc[0]++] = strdup(cfg_path);
	}
	p = nul < end ? nul + 1 : end;
	for (int call = 0; call < 2; call++) {
		while (p < end) {
			const uint8_t *e = memchr(p, '\0', (size_t)(end - p));
			size_t n;

			if (e == NULL)
				e = end;
			n = (size_t)(e - p);
			p = e < end ? e + 1 : end;
			if (n == 0)
				break;	/* the next call's arguments follow */
			if (argc[call] < FUZZ_ARGS)
				argv[call][argc[call]++] = strndup((const char *)e - n, n);
		}
		argv[call][argc[call]] = NULL;
		fuzz_load(argv[call], argc[call]);
	}
	for (int call = 0; call < 2; call++) {
		for (int i = 0; i < argc[call]; i++)
			free(argv[call][i]);
	}
	return 0;
}
