/*
 * log: see log.h. The level is an atomic so the loop thread can change it
 * while the trainer logs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static _Atomic int log_level = LOG_INFO;
static const char *const log_names[] = { "error", "warn", "info", "debug" };

int
log_level_parse(const char *s, enum log_level *out)
{
	for (int i = LOG_ERROR; i <= LOG_DEBUG; i++) {
		if (strcmp(s, log_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}


void
log_set_level(enum log_level l)
{
	atomic_store(&log_level, (int)l);
}


void
log_msg(enum log_level l, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if ((int)l > atomic_load(&log_level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_names[l]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
