/*
 * fuzz_member: membership message handling. Each input starts a fresh
 * member (this peer, 10.0.0.1:1) that already knows three peers, then plays
 * a script of records, each
 *	u8 type (64 + n % 5: PING, ACK, PING_REQ, SYNC, GOSSIP),
 *	u8 sender (n % 4: one of the three or a stranger; bit 7: report it
 *	down instead, member_peer_down; bit 6: this record's sends fail),
 *	u16 length, the message bytes, u8 time to let pass in 8 ms steps
 * through member_msg_decode, member_recv and member_tick. A type byte with
 * bit 7 set makes the record a compact GOSSIP instead: u8 count, then
 * count pairs (u8 member index and state, u8 incarnation step) that the
 * harness encodes with rising incarnations per member; random bytes rarely
 * make rising 64-bit incarnations, and state changes need them. Sends are
 * recorded and called back after each record, never inside, as member.h
 * requires. ASan/UBSan are the oracle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "log.h"
#include "member.h"
#include "member_wire.h"


static const char *const fuzz_addrs[] = { "10.0.0.2:2", "10.0.0.3:3", "10.0.0.4:4",
	"10.0.0.9:9" };

static uint64_t inc[4];		/* last incarnation per address, compact records */

static int
fuzz_send(void *arg, const char *addr, uint8_t type, const void *buf, size_t len,
    proto_sent_cb cb, void *cbarg)
{
	(void)arg;
	(void)addr;
	(void)type;
	(void)buf;
	(void)len;
	return fuzz_hold(cb, cbarg);
}

static void
fuzz_change(void *arg, const char *addr, uint64_t id, enum member_state old,
    enum member_state now)
{
	(void)arg;
	(void)addr;
	(void)id;
	(void)old;
	(void)now;
}

/* Encode a compact GOSSIP record (see the top) into buf; returns its length. */
static size_t
fuzz_compact(struct fuzz_in *in, uint8_t *buf, size_t cap, struct member_update *u)
{
	struct member_msg msg = { .u = u };
	int len;

	msg.n = (uint16_t)(fuzz_u8(in) % 64);
	for (uint16_t i = 0; i < msg.n; i++) {
		uint8_t a = fuzz_u8(in);
		unsigned who = a % 4;

		inc[who] += fuzz_u8(in) % 4;
		u[i] = (struct member_update){ .state = (uint8_t)((a >> 2) % 4),
		    .id = who + 2, .incarnation = inc[who] };
		snprintf(u[i].addr, sizeof(u[i].addr), "%s", fuzz_addrs[who]);
	}
	len = member_msg_encode(MEMBER_T_GOSSIP, &msg, buf, cap);
	return len < 0 ? 0 : (size_t)len;
}

/* Tell m about the three known peers, as a GOSSIP from the first. */
static void
fuzz_introduce(struct member *m, double now)
{
	struct member_update u[3];
	struct member_msg msg = { .n = 3, .u = u };
	uint8_t buf[512];
	int len;

	for (int i = 0; i < 3; i++) {
		u[i] = (struct member_update){ .state = MEMBER_ALIVE, .id = (uint64_t)i + 2,
		    .incarnation = 5 };
		snprintf(u[i].addr, sizeof(u[i].addr), "%s", fuzz_addrs[i]);
	}
	len = member_msg_encode(MEMBER_T_GOSSIP, &msg, buf, sizeof(buf));
	if (len < 0)
		abort();
	member_recv(m, now, 2, fuzz_addrs[0], MEMBER_T_GOSSIP, buf, (size_t)len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct member_update ubuf[MEMBER_MSG_MAX_UPDATES];
	static uint8_t compact[64 * (18 + WIRE_ADDR_MAX) + 16];
	struct fuzz_in in = { data, size };
	struct member_params p = { .self_addr = "10.0.0.1:1", .self_id = 1,
	    .incarnation = 1000 };
	struct member_ops ops = { fuzz_send, fuzz_change, NULL };
	struct member_info info[8];
	struct errbuf err = { "" };
	struct member *m;
	double now = 100.0;

	log_set_level(LOG_ERROR);
	for (int i = 0; i < 4; i++)
		inc[i] = 5;
	if (member_new(&p, &ops, now, &m, &err) != 0)
		abort();
	fuzz_introduce(m, now);
	fuzz_release(0);
	while (in.n > 0) {
		uint8_t t = fuzz_u8(&in);
		uint8_t type = (uint8_t)(MEMBER_T_FIRST + (t & 0x7f) % 5);
		uint8_t who = fuzz_u8(&in);
		const char *from = fuzz_addrs[who % 4];
		struct member_msg msg = { .u = ubuf };
		const uint8_t *buf;
		size_t len;

		if (t & 0x80) {
			type = MEMBER_T_GOSSIP;
			len = fuzz_compact(&in, compact, sizeof(compact), ubuf);
			buf = compact;
		} else {
			len = fuzz_bytes(&in, fuzz_u16(&in), &buf);
		}

		(void)member_msg_decode(type, buf, len, &msg, MEMBER_MSG_MAX_UPDATES, &err);
		if (who & 0x80)
			member_peer_down(m, now, from);
		else
			member_recv(m, now, (uint64_t)(who % 4) + 2, from, type, buf, len);
		now += fuzz_u8(&in) * 0.008;
		member_tick(m, now);
		fuzz_release(who & 0x40 ? -EIO : 0);
	}
	(void)member_list(m, info, 8);
	FUZZ_STATS(member_stats_json, m);
	member_leave(m, now);
	fuzz_release(0);
	member_free(m);
	return 0;
}
