/*
 * member: who is in the job, without a coordinator. SWIM (Das et al. 2002)
 * with the Lifeguard refinements that matter on a busy machine: each
 * protocol period this peer pings one member (round-robin over a shuffled
 * list); without an ack by ping_timeout it asks indirect_checks others to
 * ping it (PING_REQ); without any ack by the end of the period the member
 * is suspect, and dead once suspicion_timeout passes without a refutation.
 * A live peer refutes a suspicion (or a dead record) about itself by
 * raising its incarnation. Updates (alive, suspect, dead, left) ride on
 * every message, infection-style: each one about n members is sent
 * retransmit_mult * ceil(log2(n + 1)) times, a join fewer as other members
 * are heard repeating it (member_table_apply), and a gossip timer pushes
 * pending updates to gossip_fanout members so news does not wait for the
 * next probe. Joiners and a periodic anti-entropy round exchange the whole
 * table (SYNC), which also heals a job that started as two groups. A table
 * larger than a message goes in turns; an answer that brought members not
 * known before asks for the next turn one period later instead of sync_ms.
 * A peer far behind (an answer says its sender holds a slice more records
 * than we do: a joiner) walks the table instead: it asks for slice 1, 2,
 * ... K of its addresses' hashes, one a period, each of a random member,
 * so a job of N is had whole in N/384 periods with the load spread over
 * the job; two slices in a row that teach nothing end it (the table is
 * had, or the count was false). Turns from random members would not do:
 * each answerer's turn starts where its own last one stopped, so they
 * overlap at random and the last records come by coupon collecting (a
 * joiner into 3,000 listed everyone after 42 s, into 1,000 after 1.7).
 *
 * A peer that knows no live member but itself (its seeds gone before it
 * reached them, or every member it knew declared dead or left, maybe
 * wrongly: a partition, a pause) would otherwise wait forever for someone
 * to contact it. Its seeds not yet heard of are retried as always; on top
 * of that it asks every member it ever heard of, one at a time in turn
 * (the dead and left records it holds, which are not forgotten while it
 * is alone), each pass slower, up to MEMBER_RETRY_MAX_MS between two.
 *
 * Members are keyed by their listen address ("HOST:PORT"); the id and
 * incarnation say which process at that address a record is about. A
 * process starts with an incarnation taken from the wall clock (ms), so a
 * peer restarted on the same address outranks its own old dead or left
 * record and rejoins cleanly.
 *
 * The module does no I/O and reads no clock: the caller passes the time
 * to every call, sends through ops->send, and calls member_tick by
 * member_next_deadline. That keeps the whole state machine testable with
 * a fake clock and a fake network (tests/test_member.c).
 */
#ifndef GD_MEMBER_H
#define GD_MEMBER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "member_types.h"	/* message types, states, member_params, member_ops */
#include "proto.h"
#include "util.h"
#include "wire.h"

/* The range and its names, for the transport (proto.h). */
extern const struct proto member_proto;

/* Defaults, in milliseconds. With them a crashed peer is dead in every
 * view within about 1-2 periods (detection) + suspicion + 0.5 s, < 5 s. */
#define MEMBER_DEFAULT_PERIOD_MS	500
#define MEMBER_DEFAULT_PING_TIMEOUT_MS	200
#define MEMBER_DEFAULT_SUSPICION_MS	2000
#define MEMBER_DEFAULT_INDIRECT		3
#define MEMBER_DEFAULT_RETRANSMIT	3
#define MEMBER_DEFAULT_GOSSIP_MS	200
#define MEMBER_DEFAULT_FANOUT		3
#define MEMBER_DEFAULT_SYNC_MS		10000
#define MEMBER_DEFAULT_LEAVE_MS		2000
#define MEMBER_DEFAULT_RETRY_MS		500
#define MEMBER_RETRY_MAX_MS		8000

struct member;

/* A snapshot of one record, for peers listings and other modules. */
struct member_info {
	char		addr[WIRE_ADDR_MAX + 1];
	uint64_t	id;
	uint64_t	incarnation;
	enum member_state state;
	int		self;
	double		rtt;		/* EWMA seconds; < 0 unknown */
	double		last_contact;	/* time of the last message; < 0 never */
	double		since;		/* time it entered its state */
};

int member_new(const struct member_params *p, const struct member_ops *ops,
    double now, struct member **out, struct errbuf *err);
/* Frees everything; sends still in flight must have called back. */
void member_free(struct member *m);

/* Contact addr to join (a --peers entry or --join). The own address is
 * ignored; unreachable ones are retried with backoff until they answer
 * or become known through someone else. */
int member_add_seed(struct member *m, const char *addr, double now);

/* Run what is due; returns the time of the next deadline. */
double member_tick(struct member *m, double now);
double member_next_deadline(struct member *m);

/* A membership message passed the transport's checks. */
void member_recv(struct member *m, double now, uint64_t sender,
    const char *sender_addr, uint8_t type, const uint8_t *buf, size_t len);
/* The transport gave up on addr: treat like a failed probe. */
void member_peer_down(struct member *m, double now, const char *addr);

/* Probe addr, a member alive in this peer's view, now rather than in its
 * turn (after the probe in flight, if that is of another): a caller
 * about to wait on it (an exchange over a link it never measured, whose
 * deadline cannot be short) learns within a period whether it answers,
 * instead of when its turn comes or another member's suspicion reaches
 * this one (a first exchange with a peer frozen just then waited ~1 s
 * at 32 peers). -ENOENT: not a live member other than this peer. */
int member_probe(struct member *m, double now, const char *addr);

/* Announce `left` to every member and stop probing. Done when each has
 * acknowledged or leave_ms passed (member_leave_done, then 1). */
void member_leave(struct member *m, double now);
int member_leave_done(struct member *m, double now);

/* 1 once this peer knows another live member (or needs none: no seeds). */
int member_joined(const struct member *m);
/* Members in a state, this peer included. */
unsigned member_count(const struct member *m, enum member_state s);
/* Copy up to max records into out (this peer first); returns how many
 * records there are. */
size_t member_list(const struct member *m, struct member_info *out, size_t max);
/* Copy the addresses of up to max live members other than this peer into
 * out; returns how many there are. */
size_t member_live(const struct member *m, char (*out)[WIRE_ADDR_MAX + 1], size_t max);
uint64_t member_incarnation(const struct member *m);

/* Add "membership": {counters..., gauges...} to obj. */
int member_stats_json(const struct member *m, json_t *obj);
/* Runtime knobs (gossipctl set): period, ping timeout, suspicion. */
void member_set_timing(struct member *m, unsigned period_ms,
    unsigned ping_timeout_ms, unsigned suspicion_ms);

/* Exposed for tests and fuzzing: 0 if the record table's invariants hold
 * (the probe order names each other record at most once; the index finds
 * every record at its place and holds nothing else; the counts by state
 * and the news lists agree with the records), else -EINVAL (-ENOMEM if
 * it could not look). O(N): not for every message of a large job. */
int member_check(const struct member *m, struct errbuf *err);

#endif
