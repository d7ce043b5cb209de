/*
 * The gossipd control protocol, for programs that talk to a peer's control
 * socket (gossipctl is one).
 *
 * Transport: a Unix stream socket, mode 0600, in a directory of mode 0700;
 * the server serves only callers with its own uid (or root).
 * Framing: one JSON object per line, each way, UTF-8, at most
 * GD_CONTROL_MAX_LINE bytes including the newline.
 * Request: {"cmd":"<command>", ...arguments}.
 * Reply: {"ok":true, ...} or {"ok":false,"error":"<reason>"}.
 * After a successful "watch" the server keeps sending
 * {"event":"progress", ...status fields} and, when a member changes state,
 * {"event":"member","addr":...,"id":...,"state":...,"was":...} lines
 * until the client hangs up. "metrics" replies {"ok":true,"text":"..."}
 * with the Prometheus text exposition in "text". A training process
 * attaches with the GD_ATTACH_COMMANDS below (gossipd-attach(7)).
 */
#ifndef GOSSIPD_CONTROL_H
#define GOSSIPD_CONTROL_H

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define GD_CONTROL_MAX_LINE 65536

/*
 * The commands, one row each: X(name, arguments, help). ARGUMENTS names
 * the request's string fields in order, upper-case ("KEY VALUE" is sent as
 * {"cmd":"set","key":"...","value":"..."}); a request without one of them
 * is refused. gossipd dispatches on this table and gossipctl builds its
 * usage and its requests from it, so a command is added here and nowhere
 * else in the protocol.
 */
#define GD_COMMANDS(X) \
	X(status, "", "the peer's state, step, epoch, loss and accuracy") \
	X(peers, "", "every member: id, address, state, incarnation, rtt") \
	X(stats, "", "all counters") \
	X(metrics, "", "counters and gauges in Prometheus text format") \
	X(watch, "", "live progress until interrupted or the peer stops") \
	X(checkpoint, "", "write a checkpoint now and print its path") \
	X(leave, "", "stop the peer cleanly (final checkpoint, exit 0)") \
	X(set, "KEY VALUE", "change a runtime-tunable key (gossipd.conf(5) marks them)") \
	X(version, "", "the peer's gossipd version and wire protocol version")

/*
 * The requests a training process sends to attach (gossipd-attach(7)),
 * rows as above; gossipctl does not offer them. Their other fields are
 * numbers, checked by the daemon.
 */
#define GD_ATTACH_COMMANDS(X) \
	X(attach, "", "share the model's vector with this training process") \
	X(step, "", "a step boundary: apply queued mixes, then go on") \
	X(evaluate, "", "the job's model in the vector for an evaluation, the process's kept") \
	X(train, "", "the process's own model back after an evaluation") \
	X(detach, "", "the training process lets go of the vector")

/* Reads a row's ARGUMENTS: the next field name, lower-cased into field
 * (cut to size), and *args moved past it; 0 when none is left. */
static inline int
gd_command_field(const char **args, char *field, size_t size)
{
	size_t n, i;

	*args += strspn(*args, " ");
	n = strcspn(*args, " ");
	if (n == 0 || size == 0)
		return 0;
	for (i = 0; i < n && i + 1 < size; i++)
		field[i] = (char)tolower((unsigned char)(*args)[i]);
	field[i] = '\0';
	*args += n;
	return 1;
}

/* Default socket: GD_CONTROL_DIR_FMT with the uid, then "<job>.sock". */
#define GD_CONTROL_DIR_FMT "/tmp/gossipd-%u"
#define GD_CONTROL_DEFAULT_JOB "default"

#endif
