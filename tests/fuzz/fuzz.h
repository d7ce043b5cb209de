/*
 * fuzz: what every libFuzzer target under tests/fuzz shares. A target is one
 * fuzz_NAME.c with LLVMFuzzerTestOneInput; it drives one module through its
 * public header only, with mocks (ops callbacks) living in the target. The
 * same file links either libFuzzer (fuzz_NAME, --enable-fuzzing) or
 * replay.c (replay_NAME, every build: make check replays the corpora).
 *
 * Inputs are cut into fields with a cursor that never fails: past the end
 * every read yields zeros, so any byte string is a valid input.
 */
#ifndef GD_FUZZ_H
#define GD_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t
fuzz_u8(struct fuzz_in *in)
{
	uint8_t v = 0;

	if (in->n > 0) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static inline uint16_t
fuzz_u16(struct fuzz_in *in)
{
	uint16_t lo = fuzz_u8(in);

	return (uint16_t)(lo | (uint16_t)fuzz_u8(in) << 8);
}

/* Up to want bytes (fewer at the end of the input); returns how many. */
static inline size_t
fuzz_bytes(struct fuzz_in *in, size_t want, const uint8_t **out)
{
	size_t n = want < in->n ? want : in->n;

	*out = in->p;
	in->p += n;
	in->n -= n;
	return n;
}

/* The longest message a record carries; longer ones are cut to it. */
#define FUZZ_MSG_MAX 4096

/* A message record's head and message: u8 type (first + n % 2, for the
 * modules that speak two message types), u8 flags, u16 length, then the
 * message, copied into msg so that the target may patch it before the
 * module sees it. Returns the message's length. */
static inline size_t
fuzz_msg(struct fuzz_in *in, uint8_t first, uint8_t *type, uint8_t *flags,
    uint8_t msg[FUZZ_MSG_MAX])
{
	const uint8_t *buf;
	size_t len;

	*type = (uint8_t)(first + fuzz_u8(in) % 2);
	*flags = fuzz_u8(in);
	len = fuzz_bytes(in, fuzz_u16(in), &buf);
	if (len > FUZZ_MSG_MAX)
		len = FUZZ_MSG_MAX;
	memcpy(msg, buf, len);
	return len;
}

/* A module's NAME_stats_json(obj, json) into a fresh object that is then
 * dropped: what the stats walk (every counter, table and peer the input
 * left) is what gets fuzzed. A macro, as each module types obj its own way;
 * the module's header brings jansson. */
#define FUZZ_STATS(stats_json, obj) do {                                  \
	json_t *fuzz_stats_ = json_object();                                \
	(void)stats_json(obj, fuzz_stats_);                                 \
	json_decref(fuzz_stats_);                                           \
} while (0)

/* Send callbacks a target holds back, to run later with the status the
 * input picks; callbacks may send again, so release runs until none is
 * left. One list per target process, hence static here. */
#define FUZZ_PENDING 4096
static struct {
	void (*cb)(void *, int);
	void *arg;
} fuzz_pending[FUZZ_PENDING];
static size_t fuzz_npending;

static inline int
fuzz_hold(void (*cb)(void *, int), void *arg)
{
	if (cb == NULL)
		return 0;
	if (fuzz_npending == FUZZ_PENDING)
		return -ENOBUFS;
	fuzz_pending[fuzz_npending].cb = cb;
	fuzz_pending[fuzz_npending].arg = arg;
	fuzz_npending++;
	return 0;
}

static inline void
fuzz_release(int status)
{
	while (fuzz_npending > 0) {
		fuzz_npending--;
		fuzz_pending[fuzz_npending].cb(fuzz_pending[fuzz_npending].arg, status);
	}
}

#endif
