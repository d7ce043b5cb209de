/*
 * config_key: see config_key.h. A value is checked whole before its field
 * is written, so a refused value leaves the field as it was (a CT_CUSTOM
 * key's parse() writes its fields itself; a CT_STR key's only validates,
 * the copy is made here). The names of a
 * CT_CHOICE key are another module's table, looked up by the key's name
 * in config_key_choices, so neither this module nor that one holds a copy
 * of the other's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "config_key.h"
#include "gossip_mode.h"

void
config_key_set_str(char **field, const char *v)
{
	free(*field);
	*field = xstrdup(v);
}

static int
config_key_parse_bool(const char *v, int *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

	for (size_t i = 0; i < GD_ARRAY_SIZE(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * The names of a CT_CHOICE key are its module's table, not a copy here:
 * --help shows them in place of the metavar, and each row's about where
 * the help says %s; a value is a row's name. choice(i, &about) gives row
 * i's name, NULL past the last.
 */
typedef const char *config_key_choice_fn(int i, const char **about);

static const struct config_key_choices {
	const char *key;
	config_key_choice_fn *choice;
} config_key_choices[] = {
	{ "mode", gossip_mode_choice },
};

static config_key_choice_fn *
config_key_choice(const struct config_key *k)
{
	for (size_t i = 0; i < GD_ARRAY_SIZE(config_key_choices); i++) {
		if (strcmp(config_key_choices[i].key, k->name) == 0)
			return config_key_choices[i].choice;
	}
	abort();
}

/* k's names joined by sep; with about, the rows' abouts as a list ("a, b,
 * or c"). Cut to n bytes. */
static void
config_key_choice_list(const struct config_key *k, const char *sep, int about, char *buf,
    size_t n)
{
	config_key_choice_fn *choice = config_key_choice(k);
	const char *name, *text, *next;
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; (name = choice(i, &text)) != NULL && used < n; i++) {
		const char *s = i == 0 ? "" : !about ? sep :
		    choice(i + 1, &next) != NULL ? ", " : i > 1 ? ", or " : " or ";

		used += (size_t)snprintf(buf + used, n - used, "%s%s", s, about ? text : name);
	}
}

/* v's row among a CT_CHOICE key's, or -EINVAL. */
static int
config_key_parse_choice(const struct config_key *k, const char *v)
{
	config_key_choice_fn *choice = config_key_choice(k);
	const char *name, *about;

	for (int i = 0; (name = choice(i, &about)) != NULL; i++) {
		if (strcmp(name, v) == 0)
			return i;
	}
	return -EINVAL;
}

/* v's place among the names "a|b|c", or -EINVAL. */
static int
config_key_parse_enum(const char *names, const char *v)
{
	size_t n = strlen(v);
	int i = 0;

	for (const char *p = names; *p != '\0'; i++) {
		size_t len = strcspn(p, "|");

		if (len == n && strncmp(p, v, n) == 0)
			return i;
		p += len + (p[len] == '|');
	}
	return -EINVAL;
}

static int
config_key_enum_error(const struct config_key *k, const char *v, struct errbuf *err)
{
	char names[128];
	size_t n = 0;

	if (k->type == CT_CHOICE) {
		config_key_choice_list(k, ", ", 0, names, sizeof(names));
		return errbuf_set(err, -EINVAL, "%s: '%s' is not one of %s", k->name, v, names);
	}
	for (const char *p = k->metavar; *p != '\0' && n + 3 < sizeof(names); p++) {
		if (*p == '|') {
			names[n++] = ',';
			names[n++] = ' ';
		} else {
			names[n++] = *p;
		}
	}
	names[n] = '\0';
	return errbuf_set(err, -EINVAL, "%s: '%s' is not one of %s", k->name, v, names);
}

static int
config_key_parse_size(const char *v, uint64_t *out)
{
	char num[32];
	size_t n = strlen(v);
	uint64_t mult = 1, x;
	int rc;

	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, v, n + 1);
	switch (num[n - 1]) {
	case 'k': case 'K': mult = 1ULL << 10; break;
	case 'm': case 'M': mult = 1ULL << 20; break;
	case 'g': case 'G': mult = 1ULL << 30; break;
	default: break;
	}
	if (mult != 1)
		num[n - 1] = '\0';
	if ((rc = util_parse_u64(num, &x)) < 0)
		return rc;
	if (x > UINT64_MAX / mult)
		return -ERANGE;
	*out = x * mult;
	return 0;
}

int
config_key_apply(struct config *c, const struct config_key *k, const char *v, struct errbuf *err)
{
	char *field = (char *)c + k->offset;
	struct errbuf why;
	double d;
	long l;
	uint64_t u;
	int rc, b;

	switch (k->type) {
	case CT_STR:
		if (*v == '\0')
			return errbuf_set(err, -EINVAL, "%s: must not be empty", k->name);
		if (k->parse != NULL && (rc = k->parse(c, v, err)) < 0)
			return rc;
		config_key_set_str((char **)field, v);
		return 0;
	case CT_INT:
		rc = util_parse_long(v, (long)k->min, (long)k->max, &l);
		if (rc == -ERANGE)
			return errbuf_set(err, rc, "%s: %s is out of range [%.0f, %.0f]",
			    k->name, v, k->min, k->max);
		if (rc < 0)
			return errbuf_set(err, rc, "%s: '%s' is not an integer", k->name, v);
		*(int *)field = (int)l;
		return 0;
	case CT_U64:
		rc = util_parse_u64(v, &u);
		if (rc < 0)
			return errbuf_set(err, rc, "%s: '%s' is not a non-negative integer",
			    k->name, v);
		*(uint64_t *)field = u;
		return 0;
	case CT_SIZE:
		rc = config_key_parse_size(v, &u);
		if (rc == 0 && ((double)u < k->min || (double)u > k->max))
			rc = -ERANGE;
		if (rc == -ERANGE)
			return errbuf_set(err, rc, "%s: %s is out of range [%.0f, %.0f]",
			    k->name, v, k->min, k->max);
		if (rc < 0)
			return errbuf_set(err, rc, "%s: '%s' is not a size (N, NK, NM or NG)",
			    k->name, v);
		*(size_t *)field = (size_t)u;
		return 0;
	case CT_DOUBLE:
		rc = util_parse_double(v, k->min, k->max, &d);
		if (rc == -ERANGE)
			return errbuf_set(err, rc, "%s: %s is out of range [%g, %g]",
			    k->name, v, k->min, k->max);
		if (rc < 0)
			return errbuf_set(err, rc, "%s: '%s' is not a number", k->name, v);
		*(double *)field = d;
		return 0;
	case CT_BOOL:
		if (config_key_parse_bool(v, &b) < 0)
			return errbuf_set(err, -EINVAL, "%s: '%s' is not a boolean (yes/no)",
			    k->name, v);
		*(int *)field = b;
		return 0;
	case CT_ADDR:
		if (addr_check(v, &why) < 0)
			return errbuf_set(err, -EINVAL, "%s: %s", k->name, why.msg);
		config_key_set_str((char **)field, v);
		return 0;
	case CT_ENUM:
		if ((rc = config_key_parse_enum(k->metavar, v)) < 0)
			return config_key_enum_error(k, v, err);
		*(int *)field = rc;
		return 0;
	case CT_CHOICE:
		if ((rc = config_key_parse_choice(k, v)) < 0)
			return config_key_enum_error(k, v, err);
		*(int *)field = rc;
		return 0;
	case CT_CUSTOM:
		return k->parse(c, v, err);
	}
	return -EINVAL;
}

void
config_key_usage(const struct config_key *k)
{
	const char *metavar = k->metavar, *help = k->help, *at;
	char left[192], name[40], names[128], about[512], text[640];
	size_t j;

	for (j = 0; k->name[j] && j < sizeof(name) - 1; j++)
		name[j] = k->name[j] == '_' ? '-' : k->name[j];
	name[j] = '\0';
	if (k->type == CT_CHOICE) {
		config_key_choice_list(k, "|", 0, names, sizeof(names));
		metavar = names;
	}
	if (k->type == CT_CHOICE && (at = strstr(k->help, "%s")) != NULL) {
		config_key_choice_list(k, NULL, 1, about, sizeof(about));
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - k->help), k->help,
		    about, at + 2);
		help = text;
	}
	if (k->short_opt)
		snprintf(left, sizeof(left), "-%c, --%s%s%s", k->short_opt, name,
		    metavar ? " " : "", metavar ? metavar : "");
	else
		snprintf(left, sizeof(left), "    --%s%s%s", name,
		    metavar ? " " : "", metavar ? metavar : "");
	printf("  %-38s %s\n", left, help);
}
