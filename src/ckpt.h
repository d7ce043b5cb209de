/*
 * ckpt: checkpoints of one peer's training state. A file holds a versioned
 * header (model spec, d, step, epoch, seed), the parameters and the momentum,
 * and a checksum over all of it (format in include/gossipd/ckpt_format.h).
 * Writes are atomic: temporary file, fsync, rename, fsync of the directory,
 * so a crash leaves either the old or the new file, never half of one. The
 * temporary file a crash or a kill leaves behind (.ckpt-XXXXXX, as large as
 * a checkpoint) is removed by ckpt_clean at the next start.
 * Loading checks everything and refuses, with a reason, what does not match.
 */
#ifndef GD_CKPT_H
#define GD_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "util.h"

struct ckpt_state {
	struct model_spec spec;
	size_t d;
	uint64_t step;     /* optimizer steps taken */
	uint32_t epoch;    /* epochs completed */
	uint64_t seed;
	float *x;          /* d parameters */
	float *v;          /* d momentum values */
};

/* Writes DIR/ckpt-<step, 12 digits>.gdc and keeps the newest `keep` files.
 * path (may be NULL) receives the file's name. */
int ckpt_save(const char *dir, const struct ckpt_state *st, int keep,
    char *path, size_t pathlen, struct errbuf *err);
/* The job's start model, kept beside the checkpoints (origin.h says why)
 * in the same format, at step 0: DIR/start.gdc, written as atomically
 * as a checkpoint, never pruned, never taken for the newest checkpoint. */
#define CKPT_START_NAME "start.gdc"
int ckpt_save_start(const char *dir, const struct ckpt_state *st, char *path, size_t pathlen,
    struct errbuf *err);
/* DIR/start.gdc into path. */
int ckpt_start_path(const char *dir, char *path, size_t pathlen, struct errbuf *err);
/* Allocates st->x and st->v; on error nothing is allocated. */
int ckpt_load(const char *path, struct ckpt_state *st, struct errbuf *err);
/* Newest checkpoint in dir by step; -ENOENT when there is none. */
int ckpt_find_latest(const char *dir, char *path, size_t pathlen, struct errbuf *err);
void ckpt_state_free(struct ckpt_state *st);
/* Removes, and logs, the temporary files of saves in dir that no process
 * is writing any more (see ckpt.c); nothing else is touched. Returns how
 * many were removed; a missing dir holds none. */
int ckpt_clean(const char *dir, struct errbuf *err);

#endif
