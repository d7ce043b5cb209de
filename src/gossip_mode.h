/*
 * gossip_mode: the table of exchange modes, one row each. A row says all
 * that differs between modes: its name (--mode) and its byte in a REQ, how
 * both sides come to the same mask (rebuilt from the REQ's parameters, or
 * chosen by the initiator and sent as indices), whether its exchanges
 * overlap every other one, and how it closes. Everything else (the REQ and
 * REPLY, the averaging, value formats, vetting) is the same for every mode,
 * so the exchange (gossip.c), the config, the closing phase and attach read
 * these fields and none compares modes. Adding a mode is a row here and the
 * functions it names. Mode share is no exchange: its row says so (shares)
 * and rounds sends shares (share.h) in its rounds instead.
 *
 * Kept apart from gossip.h so that config.c can name the modes without the
 * exchange code: the row's functions are the mask and drift modules'.
 */
#ifndef GD_GOSSIP_MODE_H
#define GD_GOSSIP_MODE_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"	/* enum gossip_mode: a row's index */

struct drift;
struct errbuf;
struct mask;
struct model;

struct gossip_mode_row {
	const char *name;
	uint8_t wire;          /* the REQ's mode byte; never reused */
	const char *about;     /* --help: what one exchange mixes */
	/* Rebuilt masks: both sides build the mask from the REQ's (seed,
	 * nonce, d, density, block), so no index travels. NULL: the
	 * initiator chooses with select and the indices travel as varint
	 * gaps (mask_encode), and the REQ's block is 0. */
	int (*build)(struct mask *m, uint64_t seed, uint64_t nonce, size_t d, double density,
	    size_t block);
	/* Chosen masks: the k coordinates to send and their values (room for
	 * k floats); what it leaves is the residual it keeps, sent by later
	 * exchanges. NULL with build. */
	int (*select)(struct drift *dr, struct model *m, size_t k, struct mask *out,
	    float *values);
	/* Refuses parameters build could not build before any arithmetic on
	 * them (a peer's REQ, an attaching trainer's size); NULL: any. */
	int (*check)(size_t d, double density, size_t block, struct errbuf *err);
	/* Fraction of the model one exchange mixes whatever --density says;
	 * 0: --density. */
	double density;
	/* Its exchanges overlap every other one: while this peer has one of
	 * its own in flight it answers them BUSY, and in this mode it
	 * answers every REQ BUSY then. */
	int exclusive;
	/* The mode of closing exchanges (gossipd(8) CLOSING). */
	enum gossip_mode closes_as;
	/* Its rounds send every member a share (share.h) in place of an
	 * exchange with one partner: no REQ is in this mode, and its peers
	 * exchange only in the closing phase. */
	int shares;
};

/* NULL past the table. */
const struct gossip_mode_row *gossip_mode_row(enum gossip_mode m);
/* The mode whose REQ byte is wire, or -EBADMSG. */
int gossip_mode_by_wire(uint8_t wire, enum gossip_mode *out);
/* The fraction of the model one exchange of mode m mixes at --density. */
double gossip_mode_density(enum gossip_mode m, double density);
/* "unknown" past the table. */
const char *gossip_mode_name(enum gossip_mode m);
/* Row i's name and about (config's --mode), NULL past the table. */
const char *gossip_mode_choice(int i, const char **about);

#endif
