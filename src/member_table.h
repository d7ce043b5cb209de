/*
 * member_table: the state of a member (struct member, private to the
 * membership module: member.h is the API) and its record table: lookup,
 * the probe order, and the rules that merge an update into a record
 * (incarnations, state precedence, refuting news about this peer). Apart
 * from the protocol in member.c because these rules decide what every
 * peer believes and are read and reasoned about on their own; the protocol
 * only asks the table and feeds it updates.
 *
 * The table is built to hold 10,000 members without a step that costs
 * O(N) per message (the simulator runs thousands of peers, each holding
 * such a table, issue 33; 10,000 of them take 13.4 GB):
 * - a record is 64 bytes; its address, up to WIRE_ADDR_MAX but mostly
 *   some 15 characters, is a string of its own that the record owns,
 *   so the array does not carry 97 mostly empty bytes per record;
 * - an index by address (open addressing, linear probing, positions + 1,
 *   at most half full) finds a record in O(1) on average; a record never
 *   leaves but by member_table_reap, which compacts the array and builds
 *   the index again, so the index needs no deletion;
 * - the number of records in each state is kept, so the live count
 *   (retransmissions, joined, alone) is not a scan;
 * - records with news (transmits > 0) sit in one list per count of
 *   transmissions left, oldest first, linked through the records (no
 *   allocation when news comes or goes), so a message takes the records
 *   with the most left without looking at the others (member.c
 *   piggyback).
 * member_check verifies all of these against the records.
 */
#ifndef GD_MEMBER_TABLE_H
#define GD_MEMBER_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "member_types.h"
#include "member_wire.h"
#include "rng.h"

#define MEMBER_PIGGY_BYTES	1200
/* Records per slice of a table walk (member.h): a slice holds a binomial
 * count around it, 511 fit in a SYNC, and one over is had later. */
#define MEMBER_WALK_SLICE	384
/* A walk ends after this many slices in a row taught nothing: the table
 * is had (gossip brought the rest), or the count that started it was
 * not true (a forged answer would otherwise make a peer ask for up to
 * 65,535 slices, two a second). */
#define MEMBER_WALK_IDLE	2
#define MEMBER_MAX_RELAYS	64
#define MEMBER_MAX_SEEDS	64
#define MEMBER_LH_MAX		3	/* local health: timeouts x (1 + lh) */
#define MEMBER_REAP_S		300.0	/* forget dead and left records */
#define MEMBER_RTT_ALPHA	0.125
#define MEMBER_TX_CAP		(MEMBER_HDR + 1 + WIRE_ADDR_MAX + \
	MEMBER_MSG_MAX_UPDATES * (MEMBER_UPD_HDR + WIRE_ADDR_MAX))

/* 64 bytes: see the top comment. */
struct mentry {
	char		*addr;		/* owned */
	uint64_t	id;
	uint64_t	inc;
	double		since;
	double		suspect_deadline;
	double		last_contact;
	float		rtt;		/* EWMA seconds: a float is plenty */
	uint32_t	news_prev, news_next;	/* in news[transmits]; NEWS_NONE */
	uint16_t	transmits;	/* only through member_table_set_transmits */
	uint8_t		state;		/* enum member_state; member_table_set_state */
	uint8_t		ordered;	/* in the probe order */
};

#define NEWS_NONE	UINT32_MAX

/* The records with t transmissions left, linked through news_prev and
 * news_next, indices into member.e: the first is the one longest there. */
struct news {
	uint32_t	first, last;
};

struct probe {
	int		active;
	int		indirect_sent;
	char		target[WIRE_ADDR_MAX + 1];
	uint32_t	seq;
	double		sent;
	double		direct_deadline;
	double		end;
};

struct relay {
	uint32_t	my_seq;
	uint32_t	their_seq;
	char		requester[WIRE_ADDR_MAX + 1];
	double		expires;
};

struct seed {
	char		addr[WIRE_ADDR_MAX + 1];
	double		next;
	unsigned	backoff_ms;
};

struct member_counters {
	uint64_t	pings_sent, pings_received, acks_sent, acks_received;
	uint64_t	ping_reqs_sent, ping_reqs_received, relayed_acks;
	uint64_t	probes, probe_failures, indirect_successes, probes_asked;
	uint64_t	suspicions, deaths, deaths_declared, lefts, joins;
	uint64_t	refutations, updates_received, updates_sent;
	uint64_t	syncs_sent, syncs_received, gossip_sent;
	uint64_t	malformed, send_errors, pauses;
};

struct member {
	struct member_params p;
	struct member_ops ops;
	struct rng	rng;
	struct mentry	*e;		/* e[0] is this peer */
	size_t		n, cap;
	uint32_t	*index;		/* by address: position in e + 1; 0 empty */
	size_t		index_cap;	/* a power of two, >= 2 * cap */
	unsigned	count[MEMBER_LEFT + 1];	/* records in each state */
	struct news	*news;		/* news[t]: records with transmits t */
	size_t		nnews;		/* lists in news */
	size_t		pending;	/* records with transmits > 0 */
	size_t		*order;		/* probe order: indices into e */
	size_t		norder, pos;
	struct probe	probe;
	/* asked to be probed out of turn (member_probe) once the probe in
	 * flight ends; "" none */
	char		asked[WIRE_ADDR_MAX + 1];
	struct relay	relays[MEMBER_MAX_RELAYS];
	struct seed	seeds[MEMBER_MAX_SEEDS];
	size_t		nseeds;
	uint32_t	next_seq;
	size_t		sync_pos;	/* the next SYNC starts at e[1 + sync_pos] */
	/* A walk of a larger table (member.c): walk_next of walk_k slices
	 * asked for; none while walk_next == walk_k. */
	uint16_t	walk_k, walk_next;
	uint8_t		walk_idle;	/* slices in a row that taught nothing */
	unsigned	lh;
	int		joined;
	int		leaving;
	unsigned	leave_pending;
	double		leave_deadline;
	double		last_tick;
	double		next_probe, next_gossip, next_sync, next_reap;
	/* Alone: the next record to ask (rescue in member.c), when, and
	 * the pause between two, doubled each pass. */
	size_t		rescue_pos;
	double		next_rescue;
	unsigned	rescue_ms;
	uint8_t		*tx;
	struct member_update *ubuf;
	struct member_counters c;
};

/* Set up the table with this peer's record; free everything it holds. */
void member_table_init(struct member *m, const char *self_addr, double now);
void member_table_free(struct member *m);
struct mentry *member_table_find(struct member *m, const char *addr);
/* The index's hash of an address; its high 32 bits are well mixed. */
uint64_t member_table_hash(const char *addr);
/* Alive or suspect: a member that takes part. */
int member_table_live(const struct mentry *e);
unsigned member_table_live_count(const struct member *m);
/* Give e's news its full count of retransmissions. */
void member_table_spread(struct member *m, struct mentry *e);
void member_table_set_transmits(struct member *m, struct mentry *e, unsigned t);
/* Drop all news: nobody is left to tell. */
void member_table_hush(struct member *m);
/* Only the state and the counts (member_leave); set_state does the rest. */
void member_table_state(struct member *m, struct mentry *e, enum member_state s);
void member_table_set_state(struct member *m, struct mentry *e, enum member_state s,
    double now);
void member_table_order_rebuild(struct member *m);
/* Forget dead and left records older than MEMBER_REAP_S. */
void member_table_reap(struct member *m, double now);
/* Merge one received update into the table; 1 if it added a record.
 * A join this peer is still spreading that comes back unchanged from
 * another member, as its news or in its table (SYNC), costs one of the
 * transmissions left (Demers et al. 1987, rumour mongering with a
 * counter): a record everybody holds is heard often and stops being news
 * soon, so N peers that start together do not each send N log N updates
 * long after they agreed, while a single join, which few hold yet, is
 * spread as before. Suspect, dead and left news keep their full count:
 * detection rests on it. */
int member_table_apply(struct member *m, const struct member_update *u, double now);
/* -EINVAL with what is wrong if the index, the counts, the news lists or
 * the probe order disagree with the records. */
int member_table_check(const struct member *m, struct errbuf *err);

#endif
