/*
 * replay: a plain main() for a fuzz target, so the corpora run as a
 * regression test in every build (no clang, no libFuzzer). Each argument
 * is a file or a directory whose files are fed, in name order, one by one
 * to LLVMFuzzerTestOneInput. A crash, sanitizer report or abort() (a
 * target's oracle) fails the run; the file being run is printed first.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;
	int rc = -1;

	if (f == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		goto out;
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "replay: %s: cannot read\n", path);
	free(buf);
	fclose(f);
	return rc;
}

static int
replay_name_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int
replay_dir(const char *dir, unsigned *count)
{
	struct dirent **ents;
	int n, rc = 0;

	n = scandir(dir, &ents, NULL, replay_name_cmp);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];

		if (ents[i]->d_name[0] != '.' && rc == 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
			rc = replay_file(path);
			(*count)++;
		}
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int
main(int argc, char **argv)
{
	unsigned count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count) < 0 :
		    (count++, replay_file(argv[i]) < 0))
			return 1;
	}
	printf("replay: %u inputs, no crash\n", count);
	return 0;
}
