/*
 * addr: see addr.h. An unbracketed host may not hold ':', so "::1:7000"
 * is refused rather than guessed at: it could as well be a port-less
 * address.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "util.h"

int
addr_split(const char *addr, char *host, size_t hostlen, char port[ADDR_PORT_LEN])
{
	const char *colon, *h = addr;
	size_t hl;
	long p;

	if (addr == NULL || (colon = strrchr(addr, ':')) == NULL)
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (*addr == '[') {
		if (hl < 3 || addr[hl - 1] != ']')
			return -EINVAL;
		h = addr + 1;
		hl -= 2;
	} else if (memchr(addr, ':', hl) != NULL) {
		return -EINVAL;
	}
	if (hl == 0 || hl >= hostlen || memchr(h, '[', hl) != NULL ||
	    memchr(h, ']', hl) != NULL)
		return -EINVAL;
	if (colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
	    util_parse_long(colon + 1, 1, 65535, &p) < 0)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, ADDR_PORT_LEN, "%ld", p);
	return 0;
}

int
addr_check(const char *addr, struct errbuf *err)
{
	char host[256], port[ADDR_PORT_LEN];

	if (addr_split(addr, host, sizeof(host), port) < 0)
		return errbuf_set(err, -EINVAL, "'%s' is not HOST:PORT "
		    "([ADDR]:PORT for IPv6, port in [1, 65535])", addr);
	return 0;
}

void
addr_list_free(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* The text of a list file with its comments cut, lines kept apart. Whole
 * lines (getline), so that a long comment is cut whole too. */
static int
addr_read_list_file(const char *path, char **out, struct errbuf *err)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *text;
	size_t len = 0, cap = 0;
	ssize_t got;
	int rc = 0;

	if (f == NULL)
		return errbuf_set(err, -EINVAL, "cannot open %s: %s", path, strerror(errno));
	text = xcalloc(1, 1);
	while ((got = getline(&line, &cap, f)) >= 0) {
		size_t l;

		if ((size_t)got > ADDR_LIST_FILE_MAX || len + (size_t)got + 1 > ADDR_LIST_FILE_MAX) {
			rc = errbuf_set(err, -EINVAL, "%s is longer than %d bytes", path,
			    ADDR_LIST_FILE_MAX);
			break;
		}
		line[strcspn(line, "#\n")] = '\0';
		l = strlen(line);
		text = xrealloc(text, len + l + 2, 1);
		memcpy(text + len, line, l);
		len += l;
		text[len++] = '\n';
		text[len] = '\0';
	}
	free(line);
	fclose(f);
	if (rc < 0) {
		free(text);
		return rc;
	}
	*out = text;
	return 0;
}

int
addr_list_parse(const char *v, char ***out, size_t *n, struct errbuf *err)
{
	char *text = NULL, *tok, *save, **list = NULL;
	const char *sep = ",";
	size_t k = 0;
	int rc;

	if (v[0] == '@') {
		if ((rc = addr_read_list_file(v + 1, &text, err)) < 0)
			return rc;
		sep = " \t\r\n";
	} else {
		text = xstrdup(v);
	}
	for (tok = strtok_r(text, sep, &save); tok != NULL; tok = strtok_r(NULL, sep, &save)) {
		if ((rc = addr_check(tok, err)) < 0)
			goto out;
		list = xrealloc(list, k + 1, sizeof(*list));
		list[k++] = xstrdup(tok);
	}
	if (k == 0) {
		rc = errbuf_set(err, -EINVAL, "no address in '%s'", v);
		goto out;
	}
	*out = list;
	*n = k;
	list = NULL;
	k = 0;
	rc = 0;
out:
	addr_list_free(list, k);
	free(text);
	return rc;
}
