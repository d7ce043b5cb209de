/*
 * test_session: the handshake (both sides end with matching per-direction
 * keys; any tampering, another job key or a mismatched answer fails), seal
 * and open (every changed byte, sequence, part or direction is refused),
 * the replay window at its edges, body tags, key file rules and wiping.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "check.h"
#include "session.h"
#include "wire.h"

static uint8_t key[SESSION_KEY_SIZE], other_key[SESSION_KEY_SIZE];

static int
decode(const struct session_ctx *c, const uint8_t *buf, size_t len,
    struct wire_header *h)
{
	enum wire_reject r;

	return wire_frame_decode(buf, len, &c->lim, h, &r);
}

/* Run a full handshake I -> R; 0 if both ends agree. */
static int
handshake(struct session_ctx *ci, struct session_ctx *cr, struct session *out,
    struct session *in)
{
	struct session_hs hs;
	struct wire_header h;
	struct wire_hello peer;
	uint8_t ack[SESSION_HELLO_FRAME_MAX];
	size_t ack_len;

	if (session_hello_make(ci, &hs, "127.0.0.1:20001", 77) != 0)
		return -1;
	if (decode(cr, hs.hello, hs.hello_len, &h) != 0)
		return -2;
	if (session_hello_accept(cr, hs.hello, hs.hello_len, &h,
	    "127.0.0.1:20002", &peer, in, ack, &ack_len) != 0)
		return -3;
	if (strcmp(peer.addr, "127.0.0.1:20001") != 0 || in->peer_id != 1 ||
	    peer.held != 77 || peer.stamp != hs.stamp)
		return -4;
	if (decode(ci, ack, ack_len, &h) != 0)
		return -5;
	if (session_hello_finish(ci, &hs, ack, ack_len, &h, &peer, out) != 0)
		return -6;
	if (strcmp(peer.addr, "127.0.0.1:20002") != 0 || out->peer_id != 2)
		return -7;
	return 0;
}

static void
test_handshake(void)
{
	struct session_ctx ci, cr, cx;
	struct session out, in, tmp;
	struct session_hs hs, hs2;
	struct wire_header h;
	struct wire_hello peer;
	uint8_t ack[SESSION_HELLO_FRAME_MAX], bad[SESSION_HELLO_FRAME_MAX];
	size_t ack_len, i;
	uint8_t zero[SESSION_KEY_SIZE] = { 0 };

	CHECK(session_ctx_init(&ci, key, "job", 1, 1 << 20) == 0);
	CHECK(session_ctx_init(&cr, key, "job", 2, 1 << 20) == 0);
	CHECK(session_job_id("job") == ci.lim.job);
	CHECK(session_job_id("job") != session_job_id("job2"));
	CHECK(handshake(&ci, &cr, &out, &in) == 0);
	CHECK(memcmp(out.tx, in.rx, SESSION_KEY_SIZE) == 0);
	CHECK(memcmp(out.rx, in.tx, SESSION_KEY_SIZE) == 0);
	CHECK(memcmp(out.tx, out.rx, SESSION_KEY_SIZE) != 0);
	CHECK(memcmp(out.tx, zero, SESSION_KEY_SIZE) != 0);
	/* A second handshake gives new keys (ephemeral). */
	CHECK(handshake(&ci, &cr, &tmp, &in) == 0);
	CHECK(memcmp(tmp.tx, out.tx, SESSION_KEY_SIZE) != 0);

	/* Every flipped byte of a HELLO is caught (by decode or by MAC). */
	session_hello_make(&ci, &hs, "127.0.0.1:20001", 0);
	for (i = 0; i < hs.hello_len; i++) {
		memcpy(bad, hs.hello, hs.hello_len);
		bad[i] ^= 0x01;
		CHECK(decode(&cr, bad, hs.hello_len, &h) != 0 ||
		    session_hello_accept(&cr, bad, hs.hello_len, &h, "x:1",
		    &peer, &tmp, ack, &ack_len) != 0);
	}
	/* Another job key: the MAC fails. */
	CHECK(session_ctx_init(&cx, other_key, "job", 3, 1 << 20) == 0);
	CHECK(decode(&cx, hs.hello, hs.hello_len, &h) == 0);
	CHECK(session_hello_accept(&cx, hs.hello, hs.hello_len, &h, "x:1",
	    &peer, &tmp, ack, &ack_len) == -EBADMSG);
	/* A HELLO claiming to come from the receiver itself. */
	session_ctx_wipe(&cx);
	CHECK(session_ctx_init(&cx, key, "job", 2, 1 << 20) == 0);
	session_hello_make(&cx, &hs2, "127.0.0.1:20003", 0);
	CHECK(decode(&cr, hs2.hello, hs2.hello_len, &h) == 0);
	CHECK(session_hello_accept(&cr, hs2.hello, hs2.hello_len, &h, "x:1",
	    &peer, &tmp, ack, &ack_len) == -EBADMSG);

	/* An answer binds to its HELLO: not accepted for another one. */
	CHECK(decode(&cr, hs.hello, hs.hello_len, &h) == 0);
	CHECK(session_hello_accept(&cr, hs.hello, hs.hello_len, &h,
	    "127.0.0.1:20002", &peer, &tmp, ack, &ack_len) == 0);
	session_hello_make(&ci, &hs2, "127.0.0.1:20001", 0);
	CHECK(decode(&ci, ack, ack_len, &h) == 0);
	CHECK(session_hello_finish(&ci, &hs2, ack, ack_len, &h, &peer, &tmp) ==
	    -EBADMSG);
	/* Tampered answers fail; the genuine one still works after them. */
	for (i = 0; i < ack_len; i++) {
		memcpy(bad, ack, ack_len);
		bad[i] ^= 0x80;
		CHECK(decode(&ci, bad, ack_len, &h) != 0 ||
		    session_hello_finish(&ci, &hs, bad, ack_len, &h, &peer,
		    &tmp) != 0);
	}
	CHECK(decode(&ci, ack, ack_len, &h) == 0);
	CHECK(session_hello_finish(&ci, &hs, ack, ack_len, &h, &peer, &tmp) ==
	    0);
	/* The ephemeral secret is gone once used: no second finish. */
	CHECK(session_hello_finish(&ci, &hs, ack, ack_len, &h, &peer, &tmp) ==
	    -EBADMSG);
	/* Stamps grow. */
	CHECK(session_stamp() < session_stamp());

	session_wipe(&out);
	CHECK(sodium_is_zero((const uint8_t *)&out, sizeof(out)));
	session_ctx_wipe(&ci);
	CHECK(sodium_is_zero((const uint8_t *)&ci, sizeof(ci)));
	session_ctx_wipe(&cr);
	session_ctx_wipe(&cx);
	session_hs_wipe(&hs2);
	CHECK(sodium_is_zero((const uint8_t *)&hs2, sizeof(hs2)));
}

static void
test_seal(void)
{
	struct session_ctx ci, cr;
	struct session out, in;
	uint8_t ad[WIRE_HEADER_SIZE], m[300], c[300 + WIRE_MAC_SIZE];
	uint8_t d[300], bad[300 + WIRE_MAC_SIZE];
	uint64_t seq;
	size_t i;

	session_ctx_init(&ci, key, "job", 1, 1 << 20);
	session_ctx_init(&cr, key, "job", 2, 1 << 20);
	CHECK(handshake(&ci, &cr, &out, &in) == 0);
	randombytes_buf(ad, sizeof(ad));
	randombytes_buf(m, sizeof(m));
	seq = session_next_seq(&out);
	CHECK(seq == 1 && session_next_seq(&out) == 2);
	session_seal(&out, ad, seq, 0, m, sizeof(m), c);
	CHECK(session_open(&in, ad, seq, 0, c, sizeof(c), d) == 0);
	CHECK(memcmp(d, m, sizeof(m)) == 0);
	/* Wrong sequence, part, direction, length. */
	CHECK(session_open(&in, ad, seq + 1, 0, c, sizeof(c), d) == -EBADMSG);
	CHECK(session_open(&in, ad, seq, 1, c, sizeof(c), d) == -EBADMSG);
	CHECK(session_open(&out, ad, seq, 0, c, sizeof(c), d) == -EBADMSG);
	CHECK(session_open(&in, ad, seq, 0, c, sizeof(c) - 1, d) == -EBADMSG);
	CHECK(session_open(&in, ad, seq, 0, c, WIRE_MAC_SIZE - 1, d) ==
	    -EBADMSG);
	/* Any changed byte of ciphertext or additional data. */
	for (i = 0; i < sizeof(c); i++) {
		memcpy(bad, c, sizeof(c));
		bad[i] ^= 0x20;
		CHECK(session_open(&in, ad, seq, 0, bad, sizeof(c), d) ==
		    -EBADMSG);
	}
	for (i = 0; i < sizeof(ad); i++) {
		ad[i] ^= 0x04;
		CHECK(session_open(&in, ad, seq, 0, c, sizeof(c), d) ==
		    -EBADMSG);
		ad[i] ^= 0x04;
	}
	/* Empty messages (body announcements) are authenticated too. */
	session_seal(&out, ad, 7, 0, NULL, 0, c);
	CHECK(session_open(&in, ad, 7, 0, c, WIRE_MAC_SIZE, d) == 0);
	c[0] ^= 1;
	CHECK(session_open(&in, ad, 7, 0, c, WIRE_MAC_SIZE, d) == -EBADMSG);
	/* The ACK direction uses the other key. */
	session_seal(&in, ad, 1, 0, m, 10, c);
	CHECK(session_open(&out, ad, 1, 0, c, 10 + WIRE_MAC_SIZE, d) == 0);
	/* Body tags agree between the two ends, and differ per message. */
	CHECK(session_body_tag(&out, 5, 3, 1) == session_body_tag(&in, 5, 3, 0));
	CHECK(session_body_tag(&out, 5, 3, 1) != session_body_tag(&out, 6, 3, 1));
	CHECK(session_body_tag(&out, 5, 3, 1) != session_body_tag(&out, 5, 4, 1));
	CHECK(session_body_tag(&out, 5, 3, 1) != session_body_tag(&in, 5, 3, 1));
	session_wipe(&out);
	session_wipe(&in);
	session_ctx_wipe(&ci);
	session_ctx_wipe(&cr);
}

static void
test_replay(void)
{
	struct session s;
	uint64_t i;

	memset(&s, 0, sizeof(s));
	CHECK(session_replay_check(&s, 0) == -EALREADY);
	CHECK(session_replay_check(&s, 1) == 0);
	session_replay_update(&s, 1);
	CHECK(session_replay_check(&s, 1) == -EALREADY);
	/* Out of order inside the window: each accepted once. */
	session_replay_update(&s, 10);
	CHECK(s.rx_top == 10);
	for (i = 2; i < 10; i++)
		CHECK(session_replay_check(&s, i) == 0);
	session_replay_update(&s, 5);
	CHECK(session_replay_check(&s, 5) == -EALREADY);
	CHECK(session_replay_check(&s, 6) == 0);
	CHECK(s.rx_top == 10);
	/* Edges: top - (WINDOW - 1) is still in, top - WINDOW is out. */
	session_replay_update(&s, 2000);
	CHECK(session_replay_check(&s, 2000 - (SESSION_WINDOW - 1)) == 0);
	CHECK(session_replay_check(&s, 2000 - SESSION_WINDOW) == -EALREADY);
	CHECK(session_replay_check(&s, 10) == -EALREADY);
	CHECK(session_replay_check(&s, 1999) == 0);
	/* A jump clears the stale bits that alias the new positions. */
	session_replay_update(&s, 1999);
	session_replay_update(&s, 2001);
	session_replay_update(&s, 3024);
	CHECK(session_replay_check(&s, 3024) == -EALREADY);
	CHECK(session_replay_check(&s, 3023) == 0);	/* aliases 1999 */
	CHECK(session_replay_check(&s, 3022) == 0);
	CHECK(session_replay_check(&s, 2001) == -EALREADY);
	CHECK(session_replay_check(&s, 2000) == -EALREADY);
	CHECK(session_replay_check(&s, 1999) == -EALREADY);
	session_replay_update(&s, 3024 + SESSION_WINDOW);
	CHECK(session_replay_check(&s, 3023 + SESSION_WINDOW) == 0);
	/* Slide one at a time across a whole window and back-check. */
	for (i = 1; i <= 3 * SESSION_WINDOW; i++) {
		uint64_t q = 5000 + i;

		CHECK(session_replay_check(&s, q) == 0);
		session_replay_update(&s, q);
		CHECK(session_replay_check(&s, q) == -EALREADY);
		CHECK(i == 1 || session_replay_check(&s, q - 1) == -EALREADY);
	}
	/* Very large sequence numbers. */
	session_replay_update(&s, UINT64_MAX - 1);
	CHECK(session_replay_check(&s, UINT64_MAX) == 0);
	CHECK(session_replay_check(&s, UINT64_MAX - 1) == -EALREADY);
	CHECK(session_replay_check(&s, 5000) == -EALREADY);
}

static void
write_file(const char *path, size_t n, mode_t mode)
{
	uint8_t buf[64];
	int fd;

	unlink(path);
	memset(buf, 7, sizeof(buf));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, buf, n) == (ssize_t)n);
	close(fd);
	CHECK(chmod(path, mode) == 0);
}

static void
test_key_files(void)
{
	char dir[] = "/tmp/test_session.XXXXXX", path[128], other[128];
	uint8_t k[SESSION_KEY_SIZE], k2[SESSION_KEY_SIZE];
	struct errbuf err;
	struct stat st;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/job.key", dir);
	snprintf(other, sizeof(other), "%s/other.key", dir);
	CHECK(session_key_generate(path, &err) == 0);
	CHECK(stat(path, &st) == 0);
	CHECK((st.st_mode & 07777) == 0600 && st.st_size == SESSION_KEY_SIZE);
	CHECK(session_key_load(path, k, &err) == 0);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, k2, sizeof(k2)) == (ssize_t)sizeof(k2));
	close(fd);
	CHECK(memcmp(k, k2, sizeof(k)) == 0);
	/* Never overwrites. */
	CHECK(session_key_generate(path, &err) == -EEXIST);
	CHECK(strstr(err.msg, path) != NULL);
	CHECK(session_key_load(path, k2, &err) == 0 &&
	    memcmp(k, k2, sizeof(k)) == 0);
	/* Two keys differ. */
	CHECK(session_key_generate(other, &err) == 0);
	CHECK(session_key_load(other, k2, &err) == 0);
	CHECK(memcmp(k, k2, sizeof(k)) != 0);
	/* Group or other access refused, with path and mode in the reason. */
	CHECK(chmod(path, 0640) == 0);
	CHECK(session_key_load(path, k, &err) == -EPERM);
	CHECK(strstr(err.msg, path) != NULL && strstr(err.msg, "0640") != NULL);
	CHECK(chmod(path, 0604) == 0);
	CHECK(session_key_load(path, k, &err) == -EPERM);
	CHECK(chmod(path, 0602) == 0);
	CHECK(session_key_load(path, k, &err) == -EPERM);
	CHECK(chmod(path, 0400) == 0);
	CHECK(session_key_load(path, k, &err) == 0);
	/* Exactly 32 bytes. */
	write_file(path, 31, 0600);
	CHECK(session_key_load(path, k, &err) == -EINVAL);
	write_file(path, 33, 0600);
	CHECK(session_key_load(path, k, &err) == -EINVAL);
	write_file(path, 0, 0600);
	CHECK(session_key_load(path, k, &err) == -EINVAL);
	write_file(path, 32, 0600);
	CHECK(session_key_load(path, k, &err) == 0);
	/* Not a regular file, missing file, unwritable place. */
	CHECK(session_key_load(dir, k, &err) != 0);
	unlink(path);
	CHECK(session_key_load(path, k, &err) == -ENOENT);
	CHECK(session_key_generate("/nonexistent/dir/key", &err) == -ENOENT);
	unlink(other);
	rmdir(dir);
	sodium_memzero(k, sizeof(k));
	sodium_memzero(k2, sizeof(k2));
}

static const struct check_case cases[] = {
	{ "session_handshake", test_handshake },
	{ "session_seal", test_seal },
	{ "session_replay", test_replay },
	{ "session_key_files", test_key_files },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	if (sodium_init() < 0) {
		fprintf(stderr, "libsodium failed to initialise\n");
		return 1;
	}
	randombytes_buf(key, sizeof(key));
	randombytes_buf(other_key, sizeof(other_key));
	return check_main(argc, argv, cases, "test_session");
}
