/*
 * bootstrap: how a joiner gets the model of a running job. The model is
 * cut into chunks of at most GOSSIP_CHUNK_FLOATS, and the chunks are dealt
 * round-robin to up to BOOTSTRAP_MAX_DONORS donors picked at random among
 * the live members (so joiners arriving together spread over the job
 * rather than all pulling from one peer). All requests go out at once; a
 * chunk whose donor fails, refuses or misses the deadline is asked again
 * from another donor. When every chunk is in, the joiner adopts the
 * highest step any donor reported, and with it the learning-rate position.
 *
 * Like gossip and member it does no I/O and reads no clock.
 */
#ifndef GD_BOOTSTRAP_H
#define GD_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define BOOTSTRAP_MAX_DONORS 3

struct bootstrap_ops {
	int (*send)(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
	    void (*cb)(void *cbarg, int status), void *cbarg);
	void *arg;
};

struct bootstrap;

/* d floats to fetch; timeout per chunk request in seconds. */
int bootstrap_new(size_t d, double timeout, const struct bootstrap_ops *ops,
    struct bootstrap **out);
void bootstrap_free(struct bootstrap *b);
/* Pick donors among members (self excluded) and ask for every chunk.
 * -EAGAIN when there is no member to ask. */
int bootstrap_start(struct bootstrap *b, double now, const char *const *members, size_t n);
/* A GOSSIP_T_CHUNK message. */
void bootstrap_recv(struct bootstrap *b, double now, const char *from, const uint8_t *buf,
    size_t len);
/* A donor became unreachable: its chunks go to the others now. */
void bootstrap_donor_down(struct bootstrap *b, double now, const char *addr);
/* Re-asks overdue chunks; returns the next deadline, < 0 when none.
 * Fails (bootstrap_failed) when no donor is left. */
double bootstrap_tick(struct bootstrap *b, double now);
int bootstrap_done(const struct bootstrap *b);
int bootstrap_failed(const struct bootstrap *b);
/* Valid once done: the pulled parameters (d floats) and the step. */
const float *bootstrap_params(const struct bootstrap *b);
uint64_t bootstrap_step(const struct bootstrap *b);
int bootstrap_stats_json(const struct bootstrap *b, json_t *obj);

#endif
