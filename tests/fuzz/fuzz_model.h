/*
 * fuzz_model: the small real model that the gossip and pull targets feed
 * their messages to (3-5-3, d = 38 parameters, cpu backend). It is made
 * once per process, model_new being far slower than one input, and reset
 * to the same values before every input, so that an input replays alike.
 */
#ifndef GD_FUZZ_MODEL_H
#define GD_FUZZ_MODEL_H

#include <stdlib.h>

#include "log.h"
#include "model.h"

/* The model, with the values it had when made; quiets the log. */
static inline struct model *
fuzz_model(void)
{
	static struct model *model;
	static float *x0;
	struct model_spec spec;
	struct errbuf err = { "" };

	if (model == NULL) {
		log_set_level(LOG_ERROR);
		if (model_spec_parse("3-5-3", &spec, &err) != 0 ||
		    model_new(&spec, "cpu", 1, 1, 1, &model, &err) != 0 ||
		    (x0 = malloc(model->d * sizeof(float))) == NULL ||
		    model_snapshot(model, x0, NULL) != 0)
			abort();
	}
	if (model_restore(model, x0, NULL) != 0)
		abort();
	return model;
}

#endif
