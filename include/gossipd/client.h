/*
 * libgossipd: the C client of the gossipd attach protocol (gossipd-attach(7)).
 *
 * A training process attaches to the control socket of a peer started with
 * --trainer external, gets the model's flat parameter vector as shared
 * memory (params float32 values in host byte order), trains on it, and
 * tells the peer at every optimizer step boundary, where the peer applies
 * the mixes its partners sent. Link with `pkg-config --libs gossipd`
 * (-lgossipd); the library needs only libc, jansson and libsodium (the
 * digest of gd_client_attach_from).
 *
 * A session:
 *
 *	struct gd_client *c;
 *	char err[256];
 *	int stop = 0;
 *
 *	if (gd_client_attach(NULL, n, &c, err, sizeof(err)) < 0)
 *		die(err);
 *	float *w = gd_client_params(c);
 *	uint64_t step = gd_client_start_step(c);
 *	if (gd_client_fresh(c))
 *		init_model(w, n);          // write the initial parameters
 *	else
 *		load_model(w, n);          // the job's model: continue from step
 *	if (gd_client_step(c, step, NULL, &stop, err, sizeof(err)) < 0)
 *		die(err);
 *	while (!stop) {
 *		struct gd_client_report r = GD_CLIENT_REPORT_INIT;
 *
 *		r.loss = sgd_step(w, n);   // one optimizer step on w
 *		if (gd_client_step(c, ++step, &r, &stop, err, sizeof(err)) < 0)
 *			die(err);
 *	}
 *	gd_client_detach(c);
 *
 * gd_client_attach does not send the first step: the caller writes its
 * initial parameters when gd_client_fresh() says so, then calls
 * gd_client_step with gd_client_start_step(). Until that first step a
 * fresh peer takes part in no exchange.
 *
 * The memory belongs to the caller between gd_client_step calls and to
 * the daemon during one (the daemon writes it only then); the daemon may
 * read it at any time.
 *
 * Errors: every function that can fail returns a negative errno and, when
 * err is not NULL, writes a message into err (errlen bytes, always
 * terminated). When the daemon refused a request the message is the
 * daemon's own "error" string and the connection stays usable; the errno
 * is a best guess from it (-EBUSY: a process is already attached;
 * -EACCES: refused for its uid; -ESHUTDOWN: the peer is leaving;
 * -EOPNOTSUPP: the peer's trainer is builtin; otherwise -EINVAL).
 * Any other failure (I/O error, timeout, a reply that breaks the
 * protocol, the daemon gone) closes the connection, which detaches the
 * process: later calls fail with -ENOTCONN and the same message, and the
 * memory stays mapped (the daemon's again) until gd_client_detach.
 *
 * Every descriptor the library opens is close-on-exec. The library never
 * raises SIGPIPE and does not touch signal dispositions; interrupted
 * system calls are retried. A struct gd_client is used by one thread at a
 * time.
 */
#ifndef GOSSIPD_CLIENT_H
#define GOSSIPD_CLIENT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How long gd_client_attach waits for the attach reply. A joiner's peer
 * replies only once it has pulled the model from its donors. */
#define GD_CLIENT_ATTACH_TIMEOUT_MS 300000
/* The default for every later reply (gd_client_set_timeout changes it).
 * With --lag a step reply is held until the peer's exchanges end. */
#define GD_CLIENT_TIMEOUT_MS 120000

struct gd_client;

/*
 * What a step request reports, shown by the peer in status, watch and
 * metrics. A field that is not a finite number (NaN: start from
 * GD_CLIENT_REPORT_INIT) is absent from the request. samples and epoch
 * are counts: when present they must be whole and not negative.
 */
struct gd_client_report {
	double loss;      /* recent training loss */
	double samples;   /* training samples since the previous step request */
	double epoch;     /* the current epoch */
	double accuracy;  /* after an evaluation: test accuracy, 0 to 1 */
	double test_loss; /* after an evaluation: test loss */
};

#define GD_CLIENT_REPORT_INIT { NAN, NAN, NAN, NAN, NAN }

/*
 * Connects to the control socket socket_path (NULL: the default job's,
 * /tmp/gossipd-UID/default.sock), attaches with a vector of params float32
 * values (1 to 2^31-1), and maps the shared memory the peer sends. Waits
 * up to GD_CLIENT_ATTACH_TIMEOUT_MS for the reply. On success *out is the
 * new client; on error *out is NULL and nothing is left open. The memory
 * is not written: zero when gd_client_fresh(), else the job's model.
 */
int gd_client_attach(const char *socket_path, size_t params, struct gd_client **out,
    char *err, size_t errlen);

/* gd_client_attach for a caller whose initial parameters exist before it
 * attaches (init, params floats): when gd_client_fresh(), the library
 * has written them into the vector. The request carries their digest
 * (BLAKE2b-256), so that in a fresh job (gossipd(8), START) a process
 * whose values are those the job started from (every process seeded
 * alike) keeps them and its peer pulls nothing. */
int gd_client_attach_from(const char *socket_path, const float *init, size_t params,
    struct gd_client **out, char *err, size_t errlen);

/* The shared vector: gd_client_nparams(c) floats, valid until
 * gd_client_detach. */
float *gd_client_params(struct gd_client *c);
size_t gd_client_nparams(const struct gd_client *c);

/* The step to continue from (the "step" of the attach reply). */
uint64_t gd_client_start_step(const struct gd_client *c);

/* 1 when the vector holds no model of the job yet (it is zero): write the
 * initial parameters before the first gd_client_step. 0 when it holds the
 * job's model (resumed, pulled from donors, or left by an earlier
 * process): load it. */
int gd_client_fresh(const struct gd_client *c);

/* Timeout in milliseconds for the replies after the attach reply (step,
 * status, leave); 0 or less waits for ever. Default GD_CLIENT_TIMEOUT_MS. */
void gd_client_set_timeout(struct gd_client *c, int timeout_ms);

/* Names the kind of optimizer that steps the vector, "sgd" or "adaptive"
 * (one that divides a step by the gradient's running size: Adam, AdamW,
 * RMSprop, Adagrad, Adadelta); the next gd_client_step tells the peer,
 * whose mode share weighs shares by it (gossipd(8), --optimizer auto).
 * -EINVAL for another kind. */
int gd_client_set_optimizer(struct gd_client *c, const char *kind, char *err, size_t errlen);

/* Names n ranges of the vector, ranges[2i] its offset and ranges[2i+1]
 * its count (sorted, apart, none empty), that mode share sends whole in
 * every share beside the top of the rest: the model's vectors (biases,
 * norms' gains), which a top of the whole model starves (gossipd(8),
 * SHARE). The next gd_client_step tells the peer; n 0 names none again.
 * -EINVAL for ranges that are not so. */
int gd_client_set_whole(struct gd_client *c, const size_t *ranges, size_t n, char *err,
    size_t errlen);

/*
 * A step boundary: step is the number of optimizer steps taken so far (not
 * less than in the previous call), report NULL or what to report. Does not
 * return before the peer has applied the mixes queued for this boundary;
 * returns how many it applied (0: the memory is as the caller left it), or
 * a negative errno. *stop (stop may be NULL) is set to 1 when the peer is
 * leaving: its final checkpoint holds the memory as of this boundary and
 * the caller should end its training, else to 0.
 */
int gd_client_step(struct gd_client *c, uint64_t step, const struct gd_client_report *report,
    int *stop, char *err, size_t errlen);

/*
 * An evaluation (gossipd-attach(7), "evaluate"): where the peer's mode
 * keeps one model for the whole job (mode share), the vector becomes that
 * model, the caller's own kept by the peer until gd_client_train, so that
 * what the caller evaluates is what the job learnt. Returns 1 when it did;
 * 0 when the mode has none (another mode, no model yet, the closing
 * phase): the vector is as it was; or a negative errno. Calling it again before
 * gd_client_train changes nothing. A gd_client_step in between lets the
 * own model go: the caller trained on the job's.
 */
int gd_client_evaluate(struct gd_client *c, char *err, size_t errlen);

/* Puts the caller's own model back after gd_client_evaluate: 1 when it
 * did, 0 when there was none to put back, or a negative errno. */
int gd_client_train(struct gd_client *c, char *err, size_t errlen);

/* The peer's status reply, one JSON object ({"ok":true,...}) without its
 * newline, in *json (malloc'd: the caller frees it). */
int gd_client_status(struct gd_client *c, char **json, char *err, size_t errlen);

/* Tells the peer to leave (as `gossipctl leave`): it writes its final
 * checkpoint at the next step boundary, whose reply says stop. */
int gd_client_leave(struct gd_client *c, char *err, size_t errlen);

/* Detaches (best effort: the daemon detaches a closed connection anyway),
 * unmaps the memory, closes the connection and frees c. NULL is a no-op. */
void gd_client_detach(struct gd_client *c);

#ifdef __cplusplus
}
#endif

#endif
