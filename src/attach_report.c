/*
 * attach_report: see attach_report.h. Every field is optional, so a
 * process reports what it has; one that is present is checked whole (an
 * integer where one is wanted, finite, in range) because a single number
 * JSON cannot carry blanks the whole status reply.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attach_report.h"
#include "config.h"
#include "control.h"
#include "util.h"

/* The numbers a process may report at a boundary and their ranges;
 * samples are also summed into a rate. */
static const struct {
	const char *field;
	double min, max;          /* HUGE_VAL: any finite number */
	int integer;
} attach_report_fields[] = {
	{ "loss", -HUGE_VAL, HUGE_VAL, 0 },
	{ "test_loss", -HUGE_VAL, HUGE_VAL, 0 },
	{ "accuracy", -HUGE_VAL, HUGE_VAL, 0 },
	{ "samples", 0, ATTACH_REPORT_MAX_SAMPLES, 0 },
	{ "epoch", 0, UINT32_MAX, 1 },
};

int
attach_report_optimizer(json_t *req)
{
	const char *name = json_string_value(json_object_get(req, "optimizer"));

	/* a process names what steps it; auto is the daemon's word for none */
	for (int i = OPTIMIZER_SGD; name != NULL && i <= OPTIMIZER_ADAPTIVE; i++)
		if (strcmp(name, config_optimizer_names[i]) == 0)
			return i;
	return -1;
}

json_t *
attach_report_refusal(json_t *req, const struct train_progress *p)
{
	json_t *s = json_object_get(req, "step");

	if (!json_is_integer(s) || json_integer_value(s) < 0 ||
	    (uint64_t)json_integer_value(s) < p->step)
		return control_error("step: want an integer not less than %" PRIu64, p->step);
	if (json_object_get(req, "optimizer") != NULL && attach_report_optimizer(req) < 0)
		return control_error("step: optimizer: want \"sgd\" or \"adaptive\"");
	for (size_t i = 0; i < GD_ARRAY_SIZE(attach_report_fields); i++) {
		const char *f = attach_report_fields[i].field;
		double min = attach_report_fields[i].min, max = attach_report_fields[i].max;
		json_t *v = json_object_get(req, f);
		double x;

		if (v == NULL)
			continue;
		x = json_is_number(v) ? json_number_value(v) : NAN;
		if ((attach_report_fields[i].integer && !json_is_integer(v)) || !isfinite(x) ||
		    x < min || x > max)
			return max == HUGE_VAL ?
			    control_error("step: %s: want a finite number", f) :
			    control_error("step: %s: want %s from %.0f to %.0f", f,
			    attach_report_fields[i].integer ? "an integer" : "a number", min, max);
	}
	return NULL;
}

void
attach_report_take(json_t *req, struct train_progress *p, struct attach_report_rate *r,
    double now)
{
	json_t *v;

	if ((v = json_object_get(req, "loss")) != NULL)
		p->loss = json_number_value(v);
	if ((v = json_object_get(req, "epoch")) != NULL)
		p->epoch = (uint32_t)json_integer_value(v);
	if ((v = json_object_get(req, "accuracy")) != NULL) {
		p->accuracy = json_number_value(v);
		p->eval_step = p->step;
	}
	if ((v = json_object_get(req, "test_loss")) != NULL)
		p->test_loss = json_number_value(v);
	if ((v = json_object_get(req, "samples")) != NULL)
		r->samples += json_number_value(v);
	if (r->t0 == 0)
		r->t0 = now;
	else if (now - r->t0 >= 1.0) {
		p->samples_per_s = r->samples / (now - r->t0);
		r->samples = 0;
		r->t0 = now;
	}
}

json_t *
attach_report_whole(json_t *req, size_t d, struct model_range **w, size_t *n)
{
	json_t *v = json_object_get(req, "whole"), *pair;
	size_t i, end = 0;

	*w = NULL;
	*n = json_array_size(v);
	if (v == NULL)
		return NULL;
	if (!json_is_array(v) || *n > ATTACH_REPORT_MAX_WHOLE)
		return control_error("step: whole: want an array of at most %d [offset, count] "
		    "pairs", ATTACH_REPORT_MAX_WHOLE);
	*w = xcalloc(*n > 0 ? *n : 1, sizeof(**w));
	json_array_foreach(v, i, pair) {
		json_t *off = json_array_get(pair, 0), *len = json_array_get(pair, 1);
		json_int_t o = json_integer_value(off), l = json_integer_value(len);

		if (json_array_size(pair) != 2 || !json_is_integer(off) || !json_is_integer(len) ||
		    o < (json_int_t)end || l < 1 || (size_t)o > d || (size_t)l > d - (size_t)o) {
			free(*w);
			*w = NULL;
			return control_error("step: whole: item %zu: want [offset, count], integers, "
			    "count at least 1, after the item before and within the %zu values",
			    i, d);
		}
		(*w)[i] = (struct model_range){ (size_t)o, (size_t)l };
		end = (size_t)(o + l);
	}
	return NULL;
}
