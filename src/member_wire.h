/*
 * member_wire: the byte layout of membership messages and its encoder and
 * bounds-checked decoder. Kept apart from the protocol (member.c) so the
 * one place that reads untrusted bytes is small, testable and fuzzed on its
 * own (tests/test_member.c, tests/fuzz/fuzz_member.c); it knows nothing of
 * the member table.
 *
 * Layout, little-endian:
 *	0 version(u8)=1  1 flags(u8)  2 update count(u16)  4 seq(u32)
 *	(SYNC: in a request, 0 or the slice asked for, K << 16 | s + 1, of
 *	K slices of the addresses' hashes; in an answer, its sender's
 *	record count)
 *	PING_REQ only: 8 target length(u8), target bytes
 *	then per update: state(u8) addr length(u8) id(u64) incarnation(u64)
 *	addr bytes
 */
#ifndef GD_MEMBER_WIRE_H
#define GD_MEMBER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "member_types.h"
#include "util.h"
#include "wire.h"

#define MEMBER_WIRE_VERSION	1
#define MEMBER_F_REPLY		0x01	/* SYNC: answer with your table */
#define MEMBER_F_SLICE		0x02	/* SYNC: an answer with a slice */
#define MEMBER_HDR		8
#define MEMBER_UPD_HDR		18

/* One record as it travels. */
struct member_update {
	uint8_t		state;
	uint64_t	id;
	uint64_t	incarnation;
	char		addr[WIRE_ADDR_MAX + 1];
};
#define MEMBER_MSG_MAX_UPDATES	512
struct member_msg {
	uint8_t		flags;
	uint32_t	seq;
	char		target[WIRE_ADDR_MAX + 1];	/* PING_REQ only */
	uint16_t	n;
	struct member_update *u;	/* caller's array of max entries */
};
/* Returns bytes written, or -EMSGSIZE if it does not fit in cap. */
int member_msg_encode(uint8_t type, const struct member_msg *msg,
    uint8_t *buf, size_t cap);
/* Returns 0 or -EBADMSG (reason in err); at most max updates. */
int member_msg_decode(uint8_t type, const uint8_t *buf, size_t len,
    struct member_msg *msg, size_t max, struct errbuf *err);

/* 1 if p[0..n) is an address a member may have: 1..WIRE_ADDR_MAX
 * printable ASCII bytes without spaces. */
int member_addr_ok(const uint8_t *p, size_t n);

#endif
