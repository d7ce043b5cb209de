/* origin: see origin.h. */
#include "origin.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "log.h"

/* One write on the pool: it owns everything it touches. */
struct origin_job {
	uv_work_t work;
	char *dir;
	struct ckpt_state st;
	int rc;
	char msg[PATH_MAX + 256];
};

static void
origin_job_free(struct origin_job *j)
{
	if (j == NULL)
		return;
	free(j->dir);
	ckpt_state_free(&j->st);
	free(j);
}

static void
origin_work(uv_work_t *w)
{
	struct origin_job *j = w->data;
	struct errbuf err = { "" };

	j->rc = ckpt_save_start(j->dir, &j->st, j->msg, sizeof(j->msg), &err);
	if (j->rc < 0)
		snprintf(j->msg, sizeof(j->msg), "%s", err.msg);
}

static void
origin_done(uv_work_t *w, int status)
{
	struct origin_job *j = w->data;

	if (status < 0)
		log_warn("start: the job's start model was not kept: %s", uv_strerror(status));
	else if (j->rc < 0)
		log_warn("start: the job's start model was not kept (a resumed peer will judge "
		    "no ways): %s", j->msg);
	else
		log_info("start: the job's start model kept in %s", j->msg);
	origin_job_free(j);
}

int
origin_save(uv_loop_t *loop, const char *dir, const struct model_spec *spec, size_t d,
    uint64_t seed, const float *x, struct errbuf *err)
{
	struct origin_job *j = calloc(1, sizeof(*j));
	int rc;

	if (j == NULL || (j->dir = strdup(dir)) == NULL ||
	    (j->st.x = malloc(d * sizeof(float))) == NULL ||
	    (j->st.v = calloc(d, sizeof(float))) == NULL) {
		origin_job_free(j);
		return errbuf_set(err, -ENOMEM, "out of memory for the start model's copy");
	}
	memcpy(j->st.x, x, d * sizeof(float));
	j->st.spec = *spec;
	j->st.d = d;
	j->st.seed = seed;
	j->work.data = j;
	if ((rc = uv_queue_work(loop, &j->work, origin_work, origin_done)) < 0) {
		origin_job_free(j);
		return errbuf_set(err, rc, "cannot queue the start model's write: %s",
		    uv_strerror(rc));
	}
	return 0;
}

int
origin_load(const char *dir, const struct model_spec *spec, size_t d, uint64_t seed,
    float **x, struct errbuf *err)
{
	struct ckpt_state st;
	char path[PATH_MAX];
	int rc;

	*x = NULL;
	if ((rc = ckpt_start_path(dir, path, sizeof(path), err)) < 0)
		return rc;
	if ((rc = ckpt_load(path, &st, err)) < 0)
		return rc;
	if (!model_spec_equal(&st.spec, spec) || st.d != d)
		rc = errbuf_set(err, -EINVAL, "%s is of another model (%zu parameters, not %zu)",
		    path, st.d, d);
	else if (st.seed != seed)
		rc = errbuf_set(err, -EINVAL, "%s was made with seed %" PRIu64 ", not %" PRIu64,
		    path, st.seed, seed);
	if (rc == 0) {
		*x = st.x;
		st.x = NULL;
	}
	ckpt_state_free(&st);
	return rc;
}

void
origin_drop(const char *dir)
{
	char path[PATH_MAX];

	if (ckpt_start_path(dir, path, sizeof(path), NULL) == 0 && unlink(path) != 0 &&
	    errno != ENOENT)
		log_warn("start: cannot remove %s: %s", path, strerror(errno));
}
