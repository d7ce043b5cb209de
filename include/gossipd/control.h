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
 * with the Prometheus text exposition in "text".
 */
#ifndef GOSSIPD_CONTROL_H
#define GOSSIPD_CONTROL_H

#define GD_CONTROL_MAX_LINE 65536

#define GD_CMD_STATUS "status"
#define GD_CMD_STATS "stats"
#define GD_CMD_CHECKPOINT "checkpoint"
#define GD_CMD_LEAVE "leave"
#define GD_CMD_WATCH "watch"
#define GD_CMD_SET "set"
#define GD_CMD_PEERS "peers"
#define GD_CMD_METRICS "metrics"

/* Default socket: GD_CONTROL_DIR_FMT with the uid, then "<job>.sock". */
#define GD_CONTROL_DIR_FMT "/tmp/gossipd-%u"
#define GD_CONTROL_DEFAULT_JOB "default"

#endif
