/*
 * attach_report: what a training process reports with a step request
 * (gossipd-attach(7)): the step it reached, loss, test loss, accuracy,
 * epoch and samples, and the kind of optimizer that steps it. It checks
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

#include "trainer.h"

/* The most samples one step may report: beyond any batch, and small
 * enough that a rate summed over a second's steps stays finite. */
#define ATTACH_REPORT_MAX_SAMPLES 1e9

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
/* The report's numbers into p (its step already set), samples into r;
 * attach_report_refusal has checked them. */
void attach_report_take(json_t *req, struct train_progress *p,
    struct attach_report_rate *r, double now);

#endif
