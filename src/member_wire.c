/*
 * member_wire: see member_wire.h.
 */
#include <errno.h>
#include <string.h>

#include "member_wire.h"

int
member_msg_encode(uint8_t type, const struct member_msg *msg, uint8_t *buf,
    size_t cap)
{
	size_t off = MEMBER_HDR, tl, al;
	uint16_t i;

	if (cap < MEMBER_HDR)
		return -EMSGSIZE;
	buf[0] = MEMBER_WIRE_VERSION;
	buf[1] = msg->flags;
	wire_put_u16(buf + 2, msg->n);
	wire_put_u32(buf + 4, msg->seq);
	if (type == MEMBER_T_PING_REQ) {
		tl = strlen(msg->target);
		if (tl == 0 || tl > WIRE_ADDR_MAX || off + 1 + tl > cap)
			return -EMSGSIZE;
		buf[off] = (uint8_t)tl;
		memcpy(buf + off + 1, msg->target, tl);
		off += 1 + tl;
	}
	for (i = 0; i < msg->n; i++) {
		const struct member_update *u = &msg->u[i];

		al = strlen(u->addr);
		if (al == 0 || al > WIRE_ADDR_MAX ||
		    off + MEMBER_UPD_HDR + al > cap)
			return -EMSGSIZE;
		buf[off] = u->state;
		buf[off + 1] = (uint8_t)al;
		wire_put_u64(buf + off + 2, u->id);
		wire_put_u64(buf + off + 10, u->incarnation);
		memcpy(buf + off + MEMBER_UPD_HDR, u->addr, al);
		off += MEMBER_UPD_HDR + al;
	}
	return (int)off;
}

int
member_addr_ok(const uint8_t *p, size_t n)
{
	if (n == 0 || n > WIRE_ADDR_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e)
			return 0;
	return 1;
}

int
member_msg_decode(uint8_t type, const uint8_t *buf, size_t len,
    struct member_msg *msg, size_t max, struct errbuf *err)
{
	size_t off = MEMBER_HDR, tl, al;
	uint16_t i;

	if (type < MEMBER_T_PING || type > MEMBER_T_GOSSIP)
		return errbuf_set(err, -EBADMSG, "unknown type %u", type);
	if (buf == NULL || len < MEMBER_HDR)
		return errbuf_set(err, -EBADMSG, "%zu bytes, shorter than a header",
		    len);
	if (buf[0] != MEMBER_WIRE_VERSION)
		return errbuf_set(err, -EBADMSG, "version %u", buf[0]);
	msg->flags = buf[1];
	msg->n = wire_get_u16(buf + 2);
	msg->seq = wire_get_u32(buf + 4);
	msg->target[0] = '\0';
	if (msg->n > max)
		return errbuf_set(err, -EBADMSG, "%u updates, at most %zu", msg->n,
		    max);
	if (type == MEMBER_T_PING_REQ) {
		if (off + 1 > len)
			return errbuf_set(err, -EBADMSG, "no target");
		tl = buf[off];
		if (off + 1 + tl > len || !member_addr_ok(buf + off + 1, tl))
			return errbuf_set(err, -EBADMSG, "bad target address");
		memcpy(msg->target, buf + off + 1, tl);
		msg->target[tl] = '\0';
		off += 1 + tl;
	}
	for (i = 0; i < msg->n; i++) {
		struct member_update *u = &msg->u[i];

		if (off + MEMBER_UPD_HDR > len)
			return errbuf_set(err, -EBADMSG, "update %u truncated", i);
		u->state = buf[off];
		al = buf[off + 1];
		u->id = wire_get_u64(buf + off + 2);
		u->incarnation = wire_get_u64(buf + off + 10);
		if (u->state > MEMBER_LEFT)
			return errbuf_set(err, -EBADMSG, "update %u: state %u", i,
			    u->state);
		if (u->id == 0)
			return errbuf_set(err, -EBADMSG, "update %u: id 0", i);
		if (off + MEMBER_UPD_HDR + al > len ||
		    !member_addr_ok(buf + off + MEMBER_UPD_HDR, al))
			return errbuf_set(err, -EBADMSG, "update %u: bad address", i);
		memcpy(u->addr, buf + off + MEMBER_UPD_HDR, al);
		u->addr[al] = '\0';
		off += MEMBER_UPD_HDR + al;
	}
	if (off != len)
		return errbuf_set(err, -EBADMSG, "%zu trailing bytes", len - off);
	return 0;
}
