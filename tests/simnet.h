/*
 * simnet: what the unit tests' in-memory networks share. Each keeps its
 * peers in an array of structs with the address in a char array member
 * `addr`, and its fake send must turn an address back into a peer.
 */
#ifndef GD_TESTS_SIMNET_H
#define GD_TESTS_SIMNET_H

#include <stddef.h>
#include <string.h>

/* The index of the element of arr[0..n) whose addr is a; -1 when none. */
#define SIMNET_BY_ADDR(arr, n, a)                                          \
	simnet_by_addr((const char *)(arr), sizeof((arr)[0]),               \
	    (size_t)((const char *)(arr)[0].addr - (const char *)(arr)), (n), (a))

static inline int
simnet_by_addr(const char *base, size_t stride, size_t off, int n, const char *addr)
{
	for (int i = 0; i < n; i++)
		if (strcmp(base + (size_t)i * stride + off, addr) == 0)
			return i;
	return -1;
}

#endif
