/*
 * log: leveled messages to stderr, one line each, with a timestamp and the
 * level. Safe from any thread (one write(2) per line). The level can change
 * at run time (gossipctl set log_level debug).
 */
#ifndef GD_LOG_H
#define GD_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* "error", "warn", "info" or "debug"; -EINVAL otherwise. */
int log_level_parse(const char *s, enum log_level *out);
void log_set_level(enum log_level l);

void log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
