/*
 * simopt: the simulators' option values. Each is parsed strictly (the
 * daemon's util_parse_* rules) and a bad one is named on stderr with the
 * option, the value and the range, under the program's name, so that both
 * simulators answer bad flags alike (exit 2 is their caller's).
 */
#ifndef GD_SIMOPT_H
#define GD_SIMOPT_H

#include <stdint.h>

/* The program's name in the messages, set once by main. */
extern const char *simopt_prog;

/* Option --name's value s into *out; 0 or -EINVAL (said on stderr). */
int simopt_real(const char *name, const char *s, double min, double max, double *out);
int simopt_long(const char *name, const char *s, long min, long max, long *out);
int simopt_int(const char *name, const char *s, long min, long max, int *out);
int simopt_u64(const char *name, const char *s, uint64_t *out);
/* One of names[] (n of them): its index. */
int simopt_choice(const char *name, const char *s, const char *const *names, int n, int *out);
/* "A,B" milliseconds with 0 <= A <= B, into seconds. */
int simopt_range_ms(const char *name, const char *s, double *lo, double *hi);

#endif
