/*
 * select: which live member this peer exchanges with next. It keeps, per
 * link, EWMAs of the bandwidth and round-trip time measured by finished
 * exchanges, when the link was last used, and its recent failures, and it
 * chooses a partner by policy:
 *  - random: uniform over live members (the baseline);
 *  - adaptive: uniform over the candidates, which are the links whose
 *    bandwidth is at least max_bandwidth / bw_ratio, plus every link not
 *    used for stale_after seconds (the connectivity guard that keeps the
 *    graph mixing and re-measures slow links), plus links never measured.
 * Links that failed recently sit out a backoff that doubles per failure,
 * and members that sent poisoned values sit out a longer, decaying one.
 * Nothing here does I/O or reads a clock: callers pass the time.
 */
#ifndef GD_SELECT_H
#define GD_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kinds.h"	/* enum select_policy */
#include "wire.h"

/* Reasons an offence may be recorded under (gossip's refusals fit). */
#define SELECT_REASONS 4

struct select_params {
	enum select_policy policy;
	double bw_ratio;        /* > 1 */
	double stale_after;     /* seconds */
};

struct select_link {
	char addr[WIRE_ADDR_MAX + 1];
	double bandwidth;       /* bytes/s EWMA; < 0 unknown */
	double rtt;             /* seconds EWMA of an exchange; < 0 unknown */
	double last_used;       /* < 0 never */
	double retry_at;        /* failure backoff ends */
	unsigned failures;      /* consecutive */
	uint64_t selected;      /* times picked */
	uint64_t exchanges;     /* finished successfully */
	/* Values refused from this member, by the caller's reason index;
	 * the penalty decays with time and keeps it out until shun_until. */
	uint64_t offences[SELECT_REASONS];
	double penalty, penalty_at, shun_until;
};

struct select;

const char *select_policy_name(enum select_policy p);

int select_new(const struct select_params *p, struct select **out);
void select_free(struct select *s);
void select_set_params(struct select *s, const struct select_params *p);

/* Pick among addrs (live members, self excluded), skipping `exclude`
 * (may be NULL: e.g. the member that just answered BUSY). Returns one of
 * addrs, or NULL when none is eligible. */
const char *select_pick(struct select *s, double now, const char *const *addrs, size_t n,
    const char *exclude);
/* An exchange with addr ended: ok with bytes moved (both ways) in
 * seconds, or failed. */
void select_record(struct select *s, const char *addr, double now, size_t bytes,
    double seconds, int ok);
/* addr sent values this peer refused (reason < SELECT_REASONS): it sits
 * out for a time that doubles with its penalty, which halves every
 * SELECT_PENALTY_HALFLIFE seconds, so a member that recovers (or was
 * refused once by chance) comes back. */
void select_offence(struct select *s, const char *addr, double now, unsigned reason);
/* Counts a refusal of addr's values without the sit-out (one that another
 * rule already keeps out of choice). */
void select_note_refusal(struct select *s, const char *addr, unsigned reason);
/* NULL if the link was never picked or measured. */
const struct select_link *select_link(const struct select *s, const char *addr);
/* Add "select": {policy, candidates_last, picks...} to obj. */
int select_stats_json(const struct select *s, json_t *obj);

#endif
