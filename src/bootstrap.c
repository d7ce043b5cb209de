/*
 * bootstrap: see bootstrap.h. Requests carry an id (chunk index plus a
 * generation that grows with every re-ask), so a late answer to a request
 * that was already given to another donor is recognised and dropped.
 */
#include "bootstrap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "gossip.h"
#include "log.h"
#include "wire.h"

struct bootstrap_chunk {
	size_t off, len;
	int donor;           /* index into donors, -1 when not asked */
	uint32_t gen;        /* bumps on every (re)request */
	int have;
	double deadline;
};

struct bootstrap_donor {
	char addr[WIRE_ADDR_MAX + 1];
	int failed;
};

struct bootstrap {
	size_t d;
	double timeout;
	struct bootstrap_ops ops;
	float *x;
	struct bootstrap_chunk *chunks;
	size_t nchunks, have;
	struct bootstrap_donor donors[BOOTSTRAP_MAX_DONORS];
	int ndonors, next_donor;
	uint64_t step;
	int failed;
	uint64_t requests, reasks, refused, stale, malformed;
};

int
bootstrap_new(size_t d, double timeout, const struct bootstrap_ops *ops, struct bootstrap **out)
{
	struct bootstrap *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return -ENOMEM;
	b->d = d;
	b->timeout = timeout;
	b->ops = *ops;
	b->nchunks = (d + GOSSIP_CHUNK_FLOATS - 1) / GOSSIP_CHUNK_FLOATS;
	b->x = malloc(d * sizeof(float));
	b->chunks = calloc(b->nchunks, sizeof(*b->chunks));
	if (b->x == NULL || b->chunks == NULL) {
		bootstrap_free(b);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->nchunks; i++) {
		b->chunks[i].off = i * GOSSIP_CHUNK_FLOATS;
		b->chunks[i].len = i + 1 < b->nchunks ? GOSSIP_CHUNK_FLOATS :
		    d - i * GOSSIP_CHUNK_FLOATS;
		b->chunks[i].donor = -1;
	}
	*out = b;
	return 0;
}

void
bootstrap_free(struct bootstrap *b)
{
	if (b == NULL)
		return;
	free(b->x);
	free(b->chunks);
	free(b);
}

/* The next donor still standing, round-robin; -1 when none is. */
static int
bootstrap_next_donor(struct bootstrap *b, int avoid)
{
	for (int k = 0; k < b->ndonors; k++) {
		int i = (b->next_donor + k) % b->ndonors;

		if (!b->donors[i].failed && (i != avoid || b->ndonors == 1)) {
			b->next_donor = (i + 1) % b->ndonors;
			return i;
		}
	}
	return -1;
}

static void
bootstrap_ask(struct bootstrap *b, size_t ci, double now, int avoid)
{
	struct bootstrap_chunk *c = &b->chunks[ci];
	uint8_t req[GOSSIP_PULL_SIZE];
	int di = bootstrap_next_donor(b, avoid);

	if (di < 0) {
		b->failed = 1;
		return;
	}
	c->donor = di;
	c->gen++;
	c->deadline = now + b->timeout;
	gossip_pull_encode(req, (uint64_t)c->gen << 32 | ci, c->off, c->len);
	b->requests++;
	if (b->ops.send(b->ops.arg, b->donors[di].addr, GOSSIP_T_PULL, req, sizeof(req), NULL,
	    NULL) < 0)
		c->deadline = now;	/* re-asked at the next tick */
}

int
bootstrap_start(struct bootstrap *b, double now, const char *const *members, size_t n)
{
	size_t *order;

	if (n == 0)
		return -EAGAIN;
	order = malloc(n * sizeof(*order));
	if (order == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	/* A random choice of donors, so that joiners spread the load. */
	for (size_t i = n; i > 1; i--) {
		size_t j = randombytes_uniform((uint32_t)i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	b->ndonors = 0;
	for (size_t i = 0; i < n && b->ndonors < BOOTSTRAP_MAX_DONORS; i++) {
		snprintf(b->donors[b->ndonors].addr, sizeof(b->donors[0].addr), "%s",
		    members[order[i]]);
		b->donors[b->ndonors++].failed = 0;
	}
	free(order);
	for (size_t i = 0; i < b->nchunks; i++)
		bootstrap_ask(b, i, now, -1);
	return 0;
}

void
bootstrap_recv(struct bootstrap *b, double now, const char *from, const uint8_t *buf,
    size_t len)
{
	struct gossip_chunk gc;
	struct bootstrap_chunk *c;
	size_t ci;

	if (gossip_chunk_decode(buf, len, &gc) < 0) {
		b->malformed++;
		return;
	}
	ci = (size_t)(gc.id & 0xffffffffu);
	if (ci >= b->nchunks) {
		b->malformed++;
		return;
	}
	c = &b->chunks[ci];
	if (c->have || (uint32_t)(gc.id >> 32) != c->gen || c->donor < 0 ||
	    strcmp(from, b->donors[c->donor].addr) != 0) {
		b->stale++;
		return;
	}
	if (gc.status < 0 || gc.off != c->off || gc.len != c->len) {
		b->refused++;
		b->reasks++;
		bootstrap_ask(b, ci, now, c->donor);
		return;
	}
	memcpy(b->x + c->off, gc.values, c->len * sizeof(float));
	c->have = 1;
	b->have++;
	if (gc.step > b->step)
		b->step = gc.step;
}

void
bootstrap_donor_down(struct bootstrap *b, double now, const char *addr)
{
	for (int i = 0; i < b->ndonors; i++) {
		if (strcmp(b->donors[i].addr, addr) != 0 || b->donors[i].failed)
			continue;
		log_info("bootstrap: donor %s is gone; asking the others", addr);
		b->donors[i].failed = 1;
		for (size_t ci = 0; ci < b->nchunks; ci++) {
			if (!b->chunks[ci].have && b->chunks[ci].donor == i) {
				b->reasks++;
				bootstrap_ask(b, ci, now, i);
			}
		}
	}
}

double
bootstrap_tick(struct bootstrap *b, double now)
{
	double next = -1;

	for (size_t ci = 0; ci < b->nchunks && !b->failed; ci++) {
		struct bootstrap_chunk *c = &b->chunks[ci];

		if (c->have || c->donor < 0)
			continue;
		if (now >= c->deadline) {
			b->reasks++;
			bootstrap_ask(b, ci, now, c->donor);
		}
		if (next < 0 || c->deadline < next)
			next = c->deadline;
	}
	return b->failed ? -1 : next;
}

int
bootstrap_done(const struct bootstrap *b)
{
	return b->have == b->nchunks;
}

int
bootstrap_failed(const struct bootstrap *b)
{
	return b->failed;
}

const float *
bootstrap_params(const struct bootstrap *b)
{
	return b->x;
}

uint64_t
bootstrap_step(const struct bootstrap *b)
{
	return b->step;
}

int
bootstrap_stats_json(const struct bootstrap *b, json_t *obj)
{
	json_t *donors = json_array();

	for (int i = 0; i < b->ndonors; i++)
		json_array_append_new(donors, json_string(b->donors[i].addr));
	return json_object_set_new(obj, "bootstrap", json_pack(
	    "{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "donors", donors,
	    "chunks", (json_int_t)b->nchunks, "received", (json_int_t)b->have,
	    "requests", (json_int_t)b->requests, "reasked", (json_int_t)b->reasks,
	    "refused", (json_int_t)b->refused, "stale", (json_int_t)b->stale,
	    "step", (json_int_t)b->step, "failed", b->failed));
}
