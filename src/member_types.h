/*
 * member_types: what the three parts of membership share: the protocol
 * and its API (member.h), the record table (member_table.h) and the wire
 * format (member_wire.h). The table and the wire format need the states,
 * the message types and the parameters, but not the protocol that builds
 * on them; with these in member.h, member.c would include the table and
 * the table member.h, a circle. Here, the includes run one way: member ->
 * member_table -> member_wire -> member_types. member.h includes this
 * header, so its users see no difference.
 */
#ifndef GD_MEMBER_TYPES_H
#define GD_MEMBER_TYPES_H

#include <stdint.h>

#include "proto.h"
#include "util.h"

/* Message types: membership owns 64..79 of the application range. */
#define MEMBER_T_PING		64
#define MEMBER_T_ACK		65
#define MEMBER_T_PING_REQ	66
#define MEMBER_T_SYNC		67
#define MEMBER_T_GOSSIP		68
#define MEMBER_T_FIRST		MEMBER_T_PING
#define MEMBER_T_LAST		79

enum member_state {
	MEMBER_ALIVE,
	MEMBER_SUSPECT,
	MEMBER_DEAD,
	MEMBER_LEFT,
};

static inline const char *
member_state_name(enum member_state s)
{
	static const char *const names[] = { "alive", "suspect", "dead", "left" };

	return (unsigned)s < GD_ARRAY_SIZE(names) ? names[s] : "unknown";
}

struct member_params {
	const char	*self_addr;	/* "HOST:PORT" as announced */
	uint64_t	self_id;	/* nonzero */
	uint64_t	incarnation;	/* starting value (wall-clock ms) */
	unsigned	period_ms;	/* 0: the default, for every field */
	unsigned	ping_timeout_ms;
	unsigned	suspicion_ms;
	unsigned	indirect_checks;
	unsigned	retransmit_mult;
	unsigned	gossip_ms;
	unsigned	gossip_fanout;
	unsigned	sync_ms;
	unsigned	leave_ms;
	unsigned	retry_ms;	/* first seed retry; doubles up to MEMBER_RETRY_MAX_MS */
};

struct member_ops {
	proto_send_fn	send;	/* the payload is copied before it returns */
	/* A member changed state (or appeared: old == new == ALIVE). */
	void	(*change)(void *arg, const char *addr, uint64_t id,
		    enum member_state old, enum member_state now);
	void	*arg;
};

#endif
