/*
 * config_key: what one key of the configuration is (struct config_key: its
 * name, option, type, field, range and help) and how a value of each type
 * is read into its field and shown in --help. Private to config: only
 * config.c and config_key.c include it.
 *
 * Apart from config.c, which holds the table of keys (which settings
 * exist, their defaults and the rules across them), because how an
 * integer, a size, a boolean or an enum is parsed and refused is the same
 * for every key and is read on its own. It knows struct config only as an
 * address and the field offsets the table gives, so it includes nothing
 * of config's and config.c includes it, never the other way round.
 */
#ifndef GD_CONFIG_KEY_H
#define GD_CONFIG_KEY_H

#include <stddef.h>

#include "util.h"

struct config;

enum config_type {
	CT_STR,       /* char *, strdup'd; parse(), if any, only validates */
	CT_INT,       /* int within [min, max] */
	CT_U64,       /* uint64_t */
	CT_SIZE,      /* size_t with optional K/M/G suffix, within [min, max] */
	CT_DOUBLE,    /* double within [min, max] */
	CT_BOOL,      /* int 0/1 */
	CT_ADDR,      /* char *, HOST:PORT by addr_split's rule */
	CT_ENUM,      /* an enum: the value's place among metavar's A|B|... */
	CT_CHOICE,    /* an enum: a row of another module's table (config_key_choices);
	               * --help shows the rows' names for the metavar */
	CT_CUSTOM     /* parse() does it */
};

struct config_key {
	const char *name;
	int short_opt;
	const char *metavar;      /* NULL: a flag on the command line */
	enum config_type type;
	size_t offset, size;      /* the field; config_set restores it on refusal */
	double min, max;
	int (*parse)(struct config *c, const char *v, struct errbuf *err);
	int runtime;              /* may change while running (gossipctl set) */
	const char *help;
};

/* A string field owns its copy: the old one is freed, v copied. */
void config_key_set_str(char **field, const char *v);
/* Parse v into k's field of c; err names the key and the reason. */
int config_key_apply(struct config *c, const struct config_key *k, const char *v,
    struct errbuf *err);
/* k's line of --help: option names, metavar (a CT_CHOICE key's rows) and help. */
void config_key_usage(const struct config_key *k);

#endif
