/*
 * addr: the one rule for "HOST:PORT" strings, and lists of them. The
 * config checks listen, join and peers with it at load, and the transport splits the same
 * strings for libfabric, so an address the config accepts is one the
 * transport can open, and a peer's announced address parses the same way
 * everywhere. HOST is a name or IPv4 address without ':', or an IPv6
 * address in brackets ("[::1]:7000"), never empty; PORT is decimal in
 * 1..65535.
 */
#ifndef GD_ADDR_H
#define GD_ADDR_H

#include <stddef.h>

#include "util.h"

/* "65535" and its NUL. */
#define ADDR_PORT_LEN	6

/*
 * Split addr into host (brackets of an IPv6 address removed, at most
 * hostlen - 1 bytes) and port (canonical decimal). Returns 0, or -EINVAL
 * when addr breaks the rule above or the host does not fit.
 */
int addr_split(const char *addr, char *host, size_t hostlen, char port[ADDR_PORT_LEN]);
/* addr_split's verdict in words: 0, or -EINVAL with the reason in err. */
int addr_check(const char *addr, struct errbuf *err);

/* Most bytes of a list file read: a wrong path (a device, a huge file)
 * fails instead of hanging or filling memory. */
#define ADDR_LIST_FILE_MAX	(1 << 20)

/*
 * A list of addresses: "A:P,B:P", or "@FILE" with addresses apart by
 * white space and '#' starting a comment to the end of its line. On
 * success *out holds *n >= 1 copies (addr_list_free); else -EINVAL with
 * the bad entry, the empty list or the unreadable file in err.
 */
int addr_list_parse(const char *v, char ***out, size_t *n, struct errbuf *err);
void addr_list_free(char **list, size_t n);

#endif
