/*
 * trainer: see trainer.h. Only dispatch lives here; optional ops that a
 * kind leaves NULL do nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

struct trainer {
	const struct trainer_ops *ops;
	void *impl;
};

struct trainer *
trainer_new(const struct trainer_ops *ops, void *impl)
{
	struct trainer *t = xmalloc(sizeof(*t));

	t->ops = ops;
	t->impl = impl;
	return t;
}

void
trainer_free(struct trainer *t)
{
	if (t == NULL)
		return;
	t->ops->free(t->impl);
	free(t);
}

const char *
trainer_name(const struct trainer *t)
{
	return t->ops->name;
}

int
trainer_load(struct trainer *t, const struct ckpt_state *st, struct errbuf *err)
{
	return t->ops->load(t->impl, st, err);
}

int
trainer_start(struct trainer *t, uint64_t step, int fresh, char *what, size_t n,
    struct errbuf *err)
{
	return t->ops->start(t->impl, step, fresh, what, n, err);
}

int
trainer_active(const struct trainer *t)
{
	return t != NULL && t->ops->active(t->impl);
}

int
trainer_present(const struct trainer *t)
{
	return t != NULL && t->ops->present(t->impl);
}

void
trainer_progress(const struct trainer *t, struct train_progress *p)
{
	if (trainer_active(t)) {
		t->ops->progress(t->impl, p);
		return;
	}
	memset(p, 0, sizeof(*p));
	p->accuracy = p->test_loss = -1;
}

const char *
trainer_no_model(const struct trainer *t)
{
	return t->ops->no_model(t->impl);
}

uint64_t
trainer_checkpoint(struct trainer *t)
{
	return t->ops->checkpoint(t->impl);
}

int
trainer_stop(struct trainer *t)
{
	return t->ops->stop(t->impl);
}

int
trainer_refresh_final(struct trainer *t)
{
	return t->ops->refresh_final != NULL ? t->ops->refresh_final(t->impl) : -ENOTSUP;
}

void
trainer_resume(struct trainer *t)
{
	if (t != NULL && t->ops->resume != NULL)
		t->ops->resume(t->impl);
}

int
trainer_catch_up(struct trainer *t, uint64_t step)
{
	if (t == NULL || t->ops->catch_up == NULL)
		return -ENOTSUP;
	t->ops->catch_up(t->impl, step);
	return 0;
}

void
trainer_status(const struct trainer *t, json_t *st)
{
	if (t->ops->status != NULL)
		t->ops->status(t->impl, st);
}

int
trainer_command(struct trainer *t, uint64_t client, const char *cmd, json_t *req,
    json_t **reply)
{
	return t->ops->command != NULL ? t->ops->command(t->impl, client, cmd, req, reply) :
	    -ENOENT;
}

void
trainer_gone(struct trainer *t, uint64_t client)
{
	if (t != NULL && t->ops->gone != NULL)
		t->ops->gone(t->impl, client);
}

void
trainer_close(struct trainer *t)
{
	if (t != NULL)
		t->ops->close(t->impl);
}
