/*
 * service: sd_notify(3) messages to the service manager (service.h).
 * libsystemd's sd_notify does the sending (the socket address forms, the
 * credentials); this file decides what is said. Each call is one
 * datagram; nothing is kept between calls but whether a failure was
 * logged.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "service.h"

/* A STATUS= line longer than this is cut: systemctl shows one line. */
#define SERVICE_MSG_MAX 512

static int service_warned;

/* msg goes out as it is, once its STATUS= line is made one line: a
 * newline in its text (a path from the config may hold one) would start
 * another assignment. STATUS= always comes last in a message. */
static void
service_send(char *msg)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	char *nl;
	int rc;

	if (sock == NULL)
		return;
	if ((nl = strstr(msg, "STATUS=")) != NULL)
		for (nl = strchr(nl, '\n'); nl != NULL; nl = strchr(nl, '\n'))
			*nl = ' ';
	rc = sd_notify(0, msg);
	if (rc < 0 && !service_warned) {
		service_warned = 1;
		log_warn("cannot notify the service manager at %s: %s", sock, strerror(-rc));
	}
}

void
service_ready(void)
{
	char msg[] = "READY=1";

	service_send(msg);
}

void
service_status(const char *fmt, ...)
{
	char msg[SERVICE_MSG_MAX] = "STATUS=";
	size_t n = strlen(msg);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
	va_end(ap);
	service_send(msg);
}

void
service_progress(const char *state, const struct train_progress *p)
{
	char total[32] = "", acc[48] = "";

	if (p->total_steps > 0)
		snprintf(total, sizeof(total), " of %" PRIu64, p->total_steps);
	if (p->accuracy >= 0)
		snprintf(acc, sizeof(acc), ", test accuracy %.4f", p->accuracy);
	service_status("%s: step %" PRIu64 "%s, epoch %" PRIu32 ", loss %.4f%s", state, p->step,
	    total, p->epoch, p->loss, acc);
}

void
service_stopping(const char *why)
{
	char msg[SERVICE_MSG_MAX];

	snprintf(msg, sizeof(msg), "STOPPING=1\nSTATUS=leaving: %s", why);
	service_send(msg);
}
