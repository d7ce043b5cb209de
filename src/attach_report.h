/*
 * attach_report: what a training process reports with a step request
 * (gossipd-attach(7)): the step it reached, loss, test loss, accuracy,
 * epoch and samples, the kind of optimizer that steps it, and the ranges
 * of its vector that mode share sends whole. It checks
 * them, one range per field, and takes the numbers into the process's
 * struct train_progress, summing samples into a rate over windows of a
 * second.
 *
 * Apart from attach.c, which owns the vector, the connection and the
 * checkpoints, because a report is checked and taken with none of those:
 * these numbers reach status, stats and /metrics, so what may pass is
 * read and tested on its own. It works on a request, a train_progress
 * and a rate window, and includes nothing of attach's.
 */
#ifndef GD_ATTACH_REPORT_H
#define GD_ATTACH_REPORT_H

#include <jansson.h>

#include "backend.h"	/* struct model_range */
#include "trainer.h"

/* The most samples one step may report: beyond any batch, and small
 * enough that a rate summed over a second's steps stays finite. */
#define ATTACH_REPORT_MAX_SAMPLES 1e9
/* The most ranges a step may ask to go whole: a model's vectors, merged
 * where adjacent, are a few per layer, and the request stays within one
 * control line (GD_CONTROL_MAX_LINE) with room to spare. */
#define ATTACH_REPORT_MAX_WHOLE 2048

/* Samples reported since t0 (0: no step yet). */
struct attach_report_rate {
	double t0;
	double samples;
};

/* Why a step request's report cannot be taken (a step before p's, a
 * field out of its range); NULL if it can. */
json_t *attach_report_refusal(json_t *req, const struct train_progress *p);
/* The optimizer the request names (config.h's enum optimizer_kind: sgd
 * or adaptive), or -1 for none; attach_report_refusal refuses another. */
int attach_report_optimizer(json_t *req);
/* The request's optional "whole", [[offset, count], ...] of the d values,
 * sorted and apart, into *w and *n (*w NULL when absent; the caller frees
 * it): NULL, or the error to answer. */
json_t *attach_report_whole(json_t *req, size_t d, struct model_range **w, size_t *n);
/* The report's numbers into p (its step already set), samples into r;
 * attach_report_refusal has checked them. */
void attach_report_take(json_t *req, struct train_progress *p,
    struct attach_report_rate *r, double now);

#endif
