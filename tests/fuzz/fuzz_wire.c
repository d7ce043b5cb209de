/*
 * fuzz_wire: the frame decoder and the handshake body decoder, the first
 * code to read a peer's bytes. Input: one selector byte (which limits the
 * decoder checks against), then the frame. A decoded header must describe bytes that lie
 * inside the input (the contract session relies on); abort() if not.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "wire.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	struct wire_limits lim = { .job = 0x1122334455667788ull };
	struct wire_header h;
	struct wire_hello hl;
	enum wire_reject why;
	uint8_t enc[WIRE_HEADER_SIZE];
	uint8_t sel = fuzz_u8(&in);
	uint8_t *hbuf;

	lim.max_message_size = sel & 1 ? WIRE_MESSAGE_LIMIT : WIRE_INLINE_MAX;
	if (sel & 2)
		lim.job = in.n >= 16 ? wire_get_u64(in.p + 8) : 0;
	if (wire_frame_decode(in.p, in.n, &lim, &h, &why) < 0) {
		if (wire_reject_name(why) == NULL)
			abort();
		return 0;
	}
	if (h.payload_len > lim.max_message_size)
		abort();
	if ((h.flags & WIRE_F_INLINE) &&
	    WIRE_HEADER_SIZE + h.payload_len + WIRE_MAC_SIZE > in.n)
		abort();
	(void)wire_type_name(h.type);
	(void)wire_chunk_count(h.payload_len);
	(void)wire_body_size(h.payload_len);
	/* Every header byte is decoded: re-encoding gives the input back. */
	wire_header_encode(&h, enc);
	if (memcmp(enc, in.p, WIRE_HEADER_SIZE) != 0)
		abort();
	if (h.flags & WIRE_F_INLINE) {
		if (wire_hello_decode(in.p + WIRE_HEADER_SIZE, (size_t)h.payload_len, &hl) == 0) {
			if (wire_hello_size(&hl) != h.payload_len)
				abort();
			hbuf = malloc(WIRE_HELLO_MAX);
			wire_hello_encode(&hl, hbuf);
			if (memcmp(hbuf, in.p + WIRE_HEADER_SIZE, (size_t)h.payload_len) != 0)
				abort();
			free(hbuf);
		}
	}
	return 0;
}
