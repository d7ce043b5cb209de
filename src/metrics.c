/*
 * metrics: see metrics.h.
 *
 * One table, metric_defs[], names every figure: where it sits in the JSON
 * (a section and a key), its Prometheus name, type and HELP text. The
 * table, not the JSON, decides names and types, because the JSON does not
 * say which numbers only grow, and Prometheus wants units in names
 * (_seconds, _bytes) and _total on counters, where the JSON has short
 * keys. A numeric field that the table does not know is still exported,
 * under a name made from its path and the HELP text "undocumented ...":
 * nothing is lost, and tests/metrics_http.sh fails until it is described.
 *
 * Strings become labels: the peer's identity and settings on gossipd_info,
 * states as one series with the state as label (gossipd_state), and the
 * per-peer figures of `peers` carry peer (its id) and addr.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util.h"

struct mbuf {
	char	*s;
	size_t	len, cap;
	int	oom;
};

static void
out(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
out(struct mbuf *b, const char *fmt, ...)
{
	va_list ap;
	char *ns;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		ns = realloc(b->s, b->cap * 2 + (size_t)n);

		if (ns == NULL) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = b->cap * 2 + (size_t)n;
	}
}

enum metric_kind {
	MK_NUMBER,	/* a number or a boolean (1/0) */
	MK_MAP,		/* an object of numbers: one series per key, as label */
	MK_STATE,	/* a string: one series, the string as label, value 1 */
	MK_SKIP,	/* exported under another name elsewhere */
};

struct metric_def {
	const char		*section;	/* see metrics_section() */
	const char		*key;
	enum metric_kind	kind;
	const char		*name;
	const char		*type;		/* "counter" or "gauge" */
	const char		*label;		/* MK_MAP, MK_STATE: the label's name */
	const char		*help;
};

#define C "counter"
#define G "gauge"

static const struct metric_def metric_defs[] = {
	/* status */
	{ "status", "state", MK_STATE, "gossipd_state", G, "state",
	    "1 for the peer's current state (starting, joining, stranded, waiting, training, closing, lingering, done, failed, leaving)" },
	{ "status", "step", MK_NUMBER, "gossipd_step", G, NULL,
	    "training steps of this peer's model (a joiner starts at its donors' step)" },
	{ "status", "total_steps", MK_NUMBER, "gossipd_total_steps", G, NULL,
	    "steps in the training budget (0 while unknown)" },
	{ "status", "epoch", MK_NUMBER, "gossipd_epoch", G, NULL,
	    "job epoch the trainer is in (passes over the job's training data, gossipd(8) --epochs)" },
	{ "status", "lr", MK_NUMBER, "gossipd_learning_rate", G, NULL,
	    "learning rate of the latest step" },
	{ "status", "loss", MK_NUMBER, "gossipd_loss", G, NULL,
	    "training loss reported for the latest steps" },
	{ "status", "accuracy", MK_NUMBER, "gossipd_accuracy", G, NULL,
	    "test-set accuracy of the latest evaluation (-1 before the first)" },
	{ "status", "test_loss", MK_NUMBER, "gossipd_test_loss", G, NULL,
	    "test-set loss of the latest evaluation (-1 before the first)" },
	{ "status", "eval_step", MK_NUMBER, "gossipd_eval_step", G, NULL,
	    "step at which the latest evaluation was taken" },
	{ "status", "samples_per_s", MK_NUMBER, "gossipd_samples_per_second", G, NULL,
	    "training samples per second, recent rate" },
	{ "status", "elapsed", MK_NUMBER, "gossipd_training_seconds", G, NULL,
	    "seconds since training began here" },
	{ "status", "members", MK_NUMBER, "gossipd_members", G, NULL,
	    "alive members of the job known to this peer, itself included" },
	{ "status", "bytes_sent", MK_NUMBER, "gossipd_bytes_sent_total", C, NULL,
	    "bytes this peer's transport sent, all message types" },
	{ "status", "bytes_received", MK_NUMBER, "gossipd_bytes_received_total", C, NULL,
	    "bytes this peer's transport received and accepted, all message types" },
	{ "status", "exchanges", MK_NUMBER, "gossipd_exchanges_total", C, NULL,
	    "model exchanges finished, started here or served for a partner" },
	{ "status", "lag_wait_s", MK_NUMBER, "gossipd_lag_wait_seconds_total", C, NULL,
	    "seconds training waited for an exchange older than --lag rounds" },
	{ "status", "lag_waits", MK_NUMBER, "gossipd_lag_waits_total", C, NULL,
	    "times training waited for an exchange older than --lag rounds" },
	{ "status", "longest_gap_s", MK_NUMBER, "gossipd_exchange_gap_max_seconds", G, NULL,
	    "longest time between two exchanges of this peer, time stopped (SIGSTOP) not counted" },
	{ "status", "own_exchanges", MK_NUMBER, "gossipd_own_exchanges_total", C, NULL,
	    "model exchanges this peer started that finished" },
	{ "status", "longest_own_gap_s", MK_NUMBER, "gossipd_own_exchange_gap_max_seconds", G, NULL,
	    "longest time between two finished exchanges this peer started, time stopped (SIGSTOP) not counted" },
	{ "status", "consensus_distance", MK_NUMBER, "gossipd_consensus_distance", G, NULL,
	    "smoothed RMS difference between this peer's values and its partners' on exchanged coordinates (absent until measured)" },
	{ "status", "consensus_distance_relative", MK_NUMBER, "gossipd_consensus_distance_ratio", G, NULL,
	    "the consensus distance divided by the RMS of this peer's own values there, smoothed (absent until measured)" },
	{ "status", "ok", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "status", "attach", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "status", "bytes_sent_by_type", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "status", "bytes_received_by_type", MK_SKIP, NULL, NULL, NULL, NULL },
	/* status.attach, with --trainer external */
	{ "attach", "state", MK_STATE, "gossipd_attach_state", G, "state",
	    "1 for the attached training process's state (waiting, pulling, attached, stalled, detached)" },
	{ "attach", "pid", MK_NUMBER, "gossipd_attach_pid", G, NULL,
	    "process id of the attached training process (0: none)" },
	{ "attach", "params", MK_NUMBER, "gossipd_attach_parameters", G, NULL,
	    "values in the vector the training process shares" },
	{ "attach", "holds_model", MK_NUMBER, "gossipd_attach_holds_model", G, NULL,
	    "1 once the shared vector holds the job's model" },
	{ "attach", "idle_s", MK_NUMBER, "gossipd_attach_idle_seconds", G, NULL,
	    "seconds since the attached process's latest step boundary" },
	{ "status", "closing", MK_SKIP, NULL, NULL, NULL, NULL },
	/* status.closing, once the closing phase began */
	{ "closing", "exchanges", MK_NUMBER, "gossipd_closing_exchanges_total", C, NULL,
	    "exchanges this peer started and finished in the closing phase" },
	{ "closing", "failed", MK_NUMBER, "gossipd_closing_failed_total", C, NULL,
	    "exchanges this peer started in the closing phase that were busy or failed" },
	{ "closing", "bytes", MK_NUMBER, "gossipd_closing_bytes_sent_total", C, NULL,
	    "bytes this peer sent since the closing phase began" },
	{ "closing", "budget_bytes", MK_NUMBER, "gossipd_closing_budget_bytes", G, NULL,
	    "bytes the closing phase may send (close_budget model sizes)" },
	{ "closing", "started_at", MK_NUMBER, "gossipd_closing_started_timestamp_seconds", G,
	    NULL, "Unix time at which the closing phase began" },
	{ "closing", "seconds", MK_NUMBER, "gossipd_closing_seconds", G, NULL,
	    "seconds the closing phase has run, or ran once ended" },
	{ "closing", "distance", MK_NUMBER, "gossipd_closing_distance_ratio", G, NULL,
	    "largest relative distance of the last closing exchanges; it ends the phase at close_distance (absent until measured)" },
	{ "closing", "reason", MK_STATE, "gossipd_closing_reason", G, "reason",
	    "1 for why the closing phase ended (distance, budget, timeout, alone, leave)" },
	/* stats.train, stats.model */
	{ "train", "steps", MK_NUMBER, "gossipd_train_steps_total", C, NULL,
	    "training steps taken" },
	{ "train", "checkpoints", MK_NUMBER, "gossipd_train_checkpoints_total", C, NULL,
	    "checkpoints written" },
	{ "train", "shard_samples", MK_NUMBER, "gossipd_train_shard_samples", G, NULL,
	    "training samples in this peer's shard" },
	{ "train", "samples_per_s", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "train", "evaluations_at", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "model", "parameters", MK_NUMBER, "gossipd_model_parameters", G, NULL,
	    "parameters of the model" },
	{ "model", "threads", MK_NUMBER, "gossipd_model_threads", G, NULL,
	    "BLAS threads of the built-in trainer" },
	/* stats.transport */
	{ "transport", "rejected", MK_MAP, "gossipd_transport_rejected_total", C, "reason",
	    "messages dropped by the transport, by reason" },
	{ "transport", "bytes_sent", MK_MAP, "gossipd_transport_bytes_sent_total", C, "type",
	    "bytes sent, by message type" },
	{ "transport", "bytes_received", MK_MAP, "gossipd_transport_bytes_received_total", C,
	    "type", "bytes received and accepted, by message type" },
	{ "transport", "messages_sent", MK_NUMBER, "gossipd_transport_messages_sent_total", C,
	    NULL, "messages sent" },
	{ "transport", "messages_received", MK_NUMBER,
	    "gossipd_transport_messages_received_total", C, NULL,
	    "messages received and accepted" },
	/* stats.membership */
	{ "membership", "pings_sent", MK_NUMBER, "gossipd_membership_pings_sent_total", C, NULL,
	    "membership probes sent" },
	{ "membership", "pings_received", MK_NUMBER, "gossipd_membership_pings_received_total", C,
	    NULL, "membership probes received" },
	{ "membership", "acks_sent", MK_NUMBER, "gossipd_membership_acks_sent_total", C, NULL,
	    "probe acknowledgements sent" },
	{ "membership", "acks_received", MK_NUMBER, "gossipd_membership_acks_received_total", C,
	    NULL, "probe acknowledgements received" },
	{ "membership", "ping_reqs_sent", MK_NUMBER, "gossipd_membership_ping_reqs_sent_total",
	    C, NULL, "indirect probe requests sent" },
	{ "membership", "ping_reqs_received", MK_NUMBER,
	    "gossipd_membership_ping_reqs_received_total", C, NULL,
	    "indirect probe requests received" },
	{ "membership", "relayed_acks", MK_NUMBER, "gossipd_membership_relayed_acks_total", C,
	    NULL, "acknowledgements relayed for an indirect probe" },
	{ "membership", "probes", MK_NUMBER, "gossipd_membership_probes_total", C, NULL,
	    "probe periods run" },
	{ "membership", "probe_failures", MK_NUMBER, "gossipd_membership_probe_failures_total", C,
	    NULL, "probes unanswered, directly and indirectly" },
	{ "membership", "indirect_successes", MK_NUMBER,
	    "gossipd_membership_indirect_successes_total", C, NULL,
	    "probes answered only through another member" },
	{ "membership", "probes_asked", MK_NUMBER, "gossipd_membership_probes_asked_total", C,
	    NULL, "probes asked for out of turn (a partner over a link never measured)" },
	{ "membership", "suspicions", MK_NUMBER, "gossipd_membership_suspicions_total", C, NULL,
	    "members marked suspect" },
	{ "membership", "deaths", MK_NUMBER, "gossipd_membership_deaths_total", C, NULL,
	    "members learnt dead" },
	{ "membership", "deaths_declared", MK_NUMBER, "gossipd_membership_deaths_declared_total",
	    C, NULL, "members this peer declared dead" },
	{ "membership", "lefts", MK_NUMBER, "gossipd_membership_lefts_total", C, NULL,
	    "members learnt to have left" },
	{ "membership", "joins", MK_NUMBER, "gossipd_membership_joins_total", C, NULL,
	    "members learnt to have joined" },
	{ "membership", "refutations", MK_NUMBER, "gossipd_membership_refutations_total", C, NULL,
	    "suspicions of this peer it refuted" },
	{ "membership", "updates_received", MK_NUMBER,
	    "gossipd_membership_updates_received_total", C, NULL,
	    "membership updates received" },
	{ "membership", "updates_sent", MK_NUMBER, "gossipd_membership_updates_sent_total", C,
	    NULL, "membership updates sent" },
	{ "membership", "syncs_sent", MK_NUMBER, "gossipd_membership_syncs_sent_total", C, NULL,
	    "whole member lists sent" },
	{ "membership", "syncs_received", MK_NUMBER, "gossipd_membership_syncs_received_total", C,
	    NULL, "whole member lists received" },
	{ "membership", "gossip_sent", MK_NUMBER, "gossipd_membership_gossip_sent_total", C, NULL,
	    "updates piggybacked on membership messages" },
	{ "membership", "malformed", MK_NUMBER, "gossipd_membership_malformed_total", C, NULL,
	    "membership messages dropped as malformed" },
	{ "membership", "send_errors", MK_NUMBER, "gossipd_membership_send_errors_total", C, NULL,
	    "membership messages that could not be sent" },
	{ "membership", "pauses", MK_NUMBER, "gossipd_membership_pauses_total", C, NULL,
	    "times this peer's own loop was seen stalled past a probe period" },
	{ "membership", "alive", MK_NUMBER, "gossipd_membership_alive", G, NULL,
	    "members alive, this peer included" },
	{ "membership", "suspect", MK_NUMBER, "gossipd_membership_suspect", G, NULL,
	    "members suspect" },
	{ "membership", "dead", MK_NUMBER, "gossipd_membership_dead", G, NULL,
	    "members dead" },
	{ "membership", "left", MK_NUMBER, "gossipd_membership_left", G, NULL,
	    "members that left" },
	{ "membership", "incarnation", MK_NUMBER, "gossipd_membership_incarnation", G, NULL,
	    "this peer's incarnation number" },
	{ "membership", "local_health", MK_NUMBER, "gossipd_membership_local_health", G, NULL,
	    "Lifeguard local health multiplier (0 healthy)" },
	/* stats.gossip */
	{ "gossip", "density", MK_NUMBER, "gossipd_gossip_density", G, NULL,
	    "saps: fraction of the model one exchange mixes" },
	{ "gossip", "block", MK_NUMBER, "gossipd_gossip_mask_block", G, NULL,
	    "saps: consecutive coordinates per mask block" },
	{ "gossip", "initiated", MK_NUMBER, "gossipd_gossip_initiated_total", C, NULL,
	    "exchanges this peer started" },
	{ "gossip", "completed", MK_NUMBER, "gossipd_gossip_completed_total", C, NULL,
	    "exchanges this peer started and finished" },
	{ "gossip", "served", MK_NUMBER, "gossipd_gossip_served_total", C, NULL,
	    "exchanges served for a partner" },
	{ "gossip", "busy_received", MK_NUMBER, "gossipd_gossip_busy_received_total", C, NULL,
	    "BUSY answers received from partners" },
	{ "gossip", "busy_sent", MK_NUMBER, "gossipd_gossip_busy_sent_total", C, NULL,
	    "BUSY answers sent to partners" },
	{ "gossip", "failed", MK_NUMBER, "gossipd_gossip_failed_total", C, NULL,
	    "exchanges that failed" },
	{ "gossip", "timeouts", MK_NUMBER, "gossipd_gossip_timeouts_total", C, NULL,
	    "exchanges past their deadline" },
	{ "gossip", "partner_gone", MK_NUMBER, "gossipd_gossip_partner_gone_total", C, NULL,
	    "exchanges ended because the partner stopped being alive" },
	{ "gossip", "refused", MK_NUMBER, "gossipd_gossip_refused_total", C, NULL,
	    "exchange requests refused" },
	{ "gossip", "malformed", MK_NUMBER, "gossipd_gossip_malformed_total", C, NULL,
	    "exchange messages dropped as malformed" },
	{ "gossip", "bad_mask", MK_NUMBER, "gossipd_gossip_bad_mask_total", C, NULL,
	    "requests whose density and block no mask can hold" },
	{ "gossip", "consensus_distance", MK_SKIP, NULL, NULL, NULL, NULL },
	{ "gossip", "rejected", MK_MAP, "gossipd_gossip_rejected_total", C, "reason",
	    "received model values refused, by reason" },
	{ "gossip", "own_nonfinite", MK_NUMBER, "gossipd_gossip_own_nonfinite_total", C, NULL,
	    "exchanges withheld because this peer's own values were not finite" },
	{ "gossip", "far_ratio_max", MK_NUMBER, "gossipd_gossip_far_ratio_max", G, NULL,
	    "largest ratio of a received slice's distance to the far bound" },
	/* stats.select */
	{ "select", "bw_ratio", MK_NUMBER, "gossipd_select_bw_ratio", G, NULL,
	    "adaptive: links within this factor of the fastest are candidates" },
	{ "select", "stale_after", MK_NUMBER, "gossipd_select_stale_after_seconds", G, NULL,
	    "adaptive: a link unused this long is a candidate again" },
	{ "select", "picks", MK_NUMBER, "gossipd_select_picks_total", C, NULL,
	    "partners picked" },
	{ "select", "none_eligible", MK_NUMBER, "gossipd_select_none_eligible_total", C, NULL,
	    "rounds with no partner to pick" },
	{ "select", "candidates_last", MK_NUMBER, "gossipd_select_candidates", G, NULL,
	    "candidates at the latest pick" },
	/* stats.trust: robust mixing (trust.h) */
	{ "trust", "factor", MK_NUMBER, "gossipd_trust_clip_factor", G, NULL,
	    "clipping radius as a multiple of the members' median distance (0: off)" },
	{ "trust", "radius", MK_NUMBER, "gossipd_trust_radius", G, NULL,
	    "current clipping radius of received slices (absent without a quorum)" },
	{ "trust", "members", MK_NUMBER, "gossipd_trust_members", G, NULL,
	    "members this peer keeps a suspicion score of" },
	{ "trust", "suspects", MK_NUMBER, "gossipd_trust_suspects", G, NULL,
	    "members whose suspicion is at least 0.5: not partners, not mixed" },
	{ "trust", "clipped", MK_NUMBER, "gossipd_trust_clipped_total", C, NULL,
	    "received slices pulled in to the clipping radius" },
	/* stats.share: mode share (share.h) */
	{ "share", "rounds", MK_NUMBER, "gossipd_share_rounds_total", C, NULL,
	    "mode share: rounds that sent this peer's share" },
	{ "share", "sent", MK_NUMBER, "gossipd_share_sent_total", C, NULL,
	    "share messages a member acknowledged" },
	{ "share", "send_failed", MK_NUMBER, "gossipd_share_send_failed_total", C, NULL,
	    "share messages that did not reach their member" },
	{ "share", "received", MK_NUMBER, "gossipd_share_received_total", C, NULL,
	    "share messages received" },
	{ "share", "applied", MK_NUMBER, "gossipd_share_applied_total", C, NULL,
	    "received shares added to the model" },
	{ "share", "clipped", MK_NUMBER, "gossipd_share_clipped_total", C, NULL,
	    "received shares scaled down to the clipping radius" },
	{ "share", "refused", MK_MAP, "gossipd_share_refused_total", C, "reason",
	    "received shares dropped, by reason" },
	/* stats.pull: serving chunks to joiners */
	{ "pull", "chunks_served", MK_NUMBER, "gossipd_pull_chunks_served_total", C, NULL,
	    "model chunks served to joiners" },
	{ "pull", "same_start", MK_NUMBER, "gossipd_pull_same_start_total", C, NULL,
	    "start agreement requests answered that the asker already holds the job's start" },
	{ "pull", "malformed", MK_NUMBER, "gossipd_pull_malformed_total", C, NULL,
	    "pull messages dropped as malformed" },
	{ "pull", "stale", MK_NUMBER, "gossipd_pull_stale_total", C, NULL,
	    "pull answers that arrived too late" },
	{ "pull", "own_nonfinite", MK_NUMBER, "gossipd_pull_own_nonfinite_total", C, NULL,
	    "chunk requests refused because this peer's values were not finite" },
	/* stats.bootstrap: this peer's own join */
	{ "bootstrap", "chunks", MK_NUMBER, "gossipd_bootstrap_chunks", G, NULL,
	    "chunks of the model this joiner pulls" },
	{ "bootstrap", "received", MK_NUMBER, "gossipd_bootstrap_received_chunks", G, NULL,
	    "chunks of the model received so far" },
	{ "bootstrap", "bytes", MK_NUMBER, "gossipd_bootstrap_received_bytes_total", C, NULL,
	    "bytes of model values received from donors in this attempt" },
	{ "bootstrap", "requests", MK_NUMBER, "gossipd_bootstrap_requests_total", C, NULL,
	    "chunk requests sent to donors" },
	{ "bootstrap", "reasked", MK_NUMBER, "gossipd_bootstrap_reasked_total", C, NULL,
	    "chunk requests sent again to another donor" },
	{ "bootstrap", "refused", MK_NUMBER, "gossipd_bootstrap_refused_total", C, NULL,
	    "chunk requests donors refused" },
	{ "bootstrap", "timeouts", MK_NUMBER, "gossipd_bootstrap_timeouts_total", C, NULL,
	    "chunk requests past their deadline" },
	{ "bootstrap", "stale", MK_NUMBER, "gossipd_bootstrap_stale_total", C, NULL,
	    "chunks that arrived too late" },
	{ "bootstrap", "malformed", MK_NUMBER, "gossipd_bootstrap_malformed_total", C, NULL,
	    "chunk messages dropped as malformed" },
	{ "bootstrap", "finished", MK_NUMBER, "gossipd_bootstrap_finished_total", C, NULL,
	    "donors dropped because their training was over while others still trained" },
	{ "bootstrap", "step", MK_NUMBER, "gossipd_bootstrap_step", G, NULL,
	    "donors' step the pulled model starts at" },
	{ "bootstrap", "failed", MK_NUMBER, "gossipd_bootstrap_failed", G, NULL,
	    "1 when the pull from donors failed" },
	{ "bootstrap", "rejected", MK_MAP, "gossipd_bootstrap_rejected_total", C, "reason",
	    "chunks refused, by reason" },
	/* stats.http: the listener serving these metrics */
	{ "http", "requests", MK_MAP, "gossipd_http_requests_total", C, "code",
	    "HTTP requests answered by the metrics listener, by status code" },
	{ "http", "closed_slow", MK_NUMBER, "gossipd_http_closed_slow_total", C, NULL,
	    "HTTP connections closed for not finishing within the deadline" },
	{ "http", "evicted", MK_NUMBER, "gossipd_http_evicted_total", C, NULL,
	    "unfinished HTTP connections closed to make room for a new one" },
	/* peers: one series per member other than this peer */
	{ "peer", "state", MK_STATE, "gossipd_peer_state", G, "state",
	    "1 for each member's state as this peer sees it (alive, suspect, dead, left)" },
	{ "peer", "incarnation", MK_NUMBER, "gossipd_peer_incarnation", G, NULL,
	    "the member's incarnation number" },
	{ "peer", "rtt", MK_NUMBER, "gossipd_peer_rtt_seconds", G, NULL,
	    "round-trip time of the latest membership probes" },
	{ "peer", "bandwidth", MK_NUMBER, "gossipd_peer_bandwidth_bytes_per_second", G, NULL,
	    "bandwidth estimate from finished exchanges" },
	{ "peer", "last_contact", MK_NUMBER, "gossipd_peer_last_contact_seconds", G, NULL,
	    "seconds since the latest message from the member" },
	{ "peer", "since", MK_NUMBER, "gossipd_peer_state_seconds", G, NULL,
	    "seconds the member has been in its state" },
	{ "peer", "exchange_rtt", MK_NUMBER, "gossipd_peer_exchange_rtt_seconds", G, NULL,
	    "duration of the latest exchanges with the member, averaged" },
	{ "peer", "last_exchange", MK_NUMBER, "gossipd_peer_last_exchange_seconds", G, NULL,
	    "seconds since the latest exchange with the member" },
	{ "peer", "selected", MK_NUMBER, "gossipd_peer_selected_total", C, NULL,
	    "times the member was picked as partner" },
	{ "peer", "exchanges", MK_NUMBER, "gossipd_peer_exchanges_total", C, NULL,
	    "exchanges finished with the member" },
	{ "peer", "refused", MK_MAP, "gossipd_peer_refused_total", C, "reason",
	    "model slices from the member refused, by reason" },
	{ "peer", "suspicion", MK_NUMBER, "gossipd_peer_suspicion", G, NULL,
	    "how much this peer suspects the member, 0 to 1 (0.5 and above: shunned)" },
	{ "peer", "distance", MK_NUMBER, "gossipd_peer_distance", G, NULL,
	    "RMS distance of the member's latest slice from this peer's values" },
	{ "peer", "slices", MK_NUMBER, "gossipd_peer_slices_total", C, NULL,
	    "slices of the member judged (received within the far bound)" },
	{ "peer", "clipped", MK_NUMBER, "gossipd_peer_clipped_total", C, NULL,
	    "slices of the member pulled in to the clipping radius" },
	{ "peer", "behind", MK_NUMBER, "gossipd_peer_behind_total", C, NULL,
	    "slices of the member that had not come this peer's way since its start" },
	{ "peer", "self", MK_SKIP, NULL, NULL, NULL, NULL },
};

#undef C
#undef G

/* Strings that describe the peer, as labels of gossipd_info. */
static const struct {
	const char *section, *key, *label;
} info_labels[] = {
	{ "status", "id", "id" }, { "status", "job", "job" },
	{ "status", "trainer", "trainer" }, { "model", "device", "device" },
	{ "gossip", "mode", "mode" }, { "gossip", "values", "values" },
	{ "select", "policy", "select" },
};

/* The sections whose fields are exported, in this order. */
static const char *const sections[] = {
	"status", "attach", "closing", "train", "model", "transport", "membership", "gossip",
	"select", "trust", "share", "pull", "bootstrap", "http", "peer",
};

struct render {
	struct mbuf	b;
	json_t		*status, *stats, *peers;
};

static void
label_value(struct mbuf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			out(b, "\\%c", *s);
		else if (*s == '\n')
			out(b, "\\n");
		else
			out(b, "%c", *s);
	}
}

/* The object a section's fields are in; peers are handled apart. */
static json_t *
metrics_section(struct render *r, const char *section)
{
	if (strcmp(section, "status") == 0)
		return r->status;
	if (strcmp(section, "attach") == 0 || strcmp(section, "closing") == 0)
		return json_object_get(r->status, section);
	return json_object_get(r->stats, section);
}

static int
usable(const struct metric_def *m, json_t *v)
{
	switch (m->kind) {
	case MK_NUMBER:
		return json_is_number(v) || json_is_boolean(v);
	case MK_MAP:
		return json_is_object(v);
	case MK_STATE:
		return json_is_string(v);
	default:
		return 0;
	}
}

static void
number(struct mbuf *b, json_t *v)
{
	if (json_is_integer(v))
		out(b, " %lld\n", (long long)json_integer_value(v));
	else if (json_is_boolean(v))
		out(b, " %d\n", json_is_true(v) ? 1 : 0);
	else
		out(b, " %.17g\n", json_number_value(v));
}

/* NAME or NAME{peer="ID",addr="A",LABEL="VALUE"}, as far as each is given. */
static void
sample_name(struct mbuf *b, const char *name, json_t *peer, const char *label,
    const char *lval)
{
	const char *id = json_string_value(json_object_get(peer, "id"));
	const char *addr = json_string_value(json_object_get(peer, "addr"));

	out(b, "%s", name);
	if (peer == NULL && label == NULL)
		return;
	out(b, "{");
	if (peer != NULL) {
		out(b, "peer=\"");
		label_value(b, id ? id : "");
		out(b, "\",addr=\"");
		label_value(b, addr ? addr : "");
		out(b, "\"%s", label ? "," : "");
	}
	if (label != NULL) {
		out(b, "%s=\"", label);
		label_value(b, lval);
		out(b, "\"");
	}
	out(b, "}");
}

/* The samples of one field of the status, a stats section or a peer. */
static void
samples(struct mbuf *b, const struct metric_def *m, json_t *v, json_t *peer)
{
	const char *key;
	json_t *e;

	switch (m->kind) {
	case MK_NUMBER:
		sample_name(b, m->name, peer, NULL, NULL);
		number(b, v);
		break;
	case MK_STATE:
		sample_name(b, m->name, peer, m->label, json_string_value(v));
		out(b, " 1\n");
		break;
	case MK_MAP:
		json_object_foreach(v, key, e) {
			if (strcmp(key, "total") == 0 || !(json_is_number(e) || json_is_boolean(e)))
				continue;
			sample_name(b, m->name, peer, m->label, key);
			number(b, e);
		}
		break;
	default:
		break;
	}
}

static void
head(struct mbuf *b, const char *name, const char *type, const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int
other_peer(json_t *p)
{
	return json_is_object(p) && !json_is_true(json_object_get(p, "self"));
}

/* One metric family: its head, then its samples from the object(s). */
static void
render_def(struct render *r, const struct metric_def *m)
{
	size_t i;
	json_t *p, *v;
	int any = 0;

	if (m->kind == MK_SKIP)
		return;
	if (strcmp(m->section, "peer") != 0) {
		v = json_object_get(metrics_section(r, m->section), m->key);
		if (!usable(m, v))
			return;
		head(&r->b, m->name, m->type, m->help);
		samples(&r->b, m, v, NULL);
		return;
	}
	json_array_foreach(r->peers, i, p) {
		v = json_object_get(p, m->key);
		if (!other_peer(p) || !usable(m, v))
			continue;
		if (!any++)
			head(&r->b, m->name, m->type, m->help);
		samples(&r->b, m, v, p);
	}
}

static const struct metric_def *
metrics_find(const char *section, const char *key)
{
	for (size_t i = 0; i < GD_ARRAY_SIZE(metric_defs); i++)
		if (strcmp(metric_defs[i].section, section) == 0 &&
		    strcmp(metric_defs[i].key, key) == 0)
			return &metric_defs[i];
	return NULL;
}

static void
sanitize(char *dst, size_t cap, const char *src)
{
	size_t i;

	for (i = 0; src[i] != '\0' && i + 1 < cap; i++)
		dst[i] = isalnum((unsigned char)src[i]) ? src[i] : '_';
	dst[i] = '\0';
}

/* The numbers and maps of numbers of a section that the table does not
 * describe, as gauges named after their path. Peers share one shape: the
 * first other peer's fields name the families. */
static void
render_undocumented(struct render *r, const char *section)
{
	char name[256], s[64], k[128], help[256];
	struct metric_def m = { section, NULL, MK_NUMBER, name, "gauge", "key", help };
	json_t *obj = metrics_section(r, section), *v, *p;
	const char *key;
	size_t i;

	if (strcmp(section, "peer") == 0) {
		obj = NULL;
		json_array_foreach(r->peers, i, p) {
			if (other_peer(p)) {
				obj = p;
				break;
			}
		}
	}
	json_object_foreach(obj, key, v) {
		if (metrics_find(section, key) != NULL)
			continue;
		m.key = key;
		m.kind = json_is_object(v) ? MK_MAP : MK_NUMBER;
		if (!usable(&m, v))
			continue;
		sanitize(s, sizeof(s), section);
		sanitize(k, sizeof(k), key);
		snprintf(name, sizeof(name), "gossipd_%s_%s", s, k);
		snprintf(help, sizeof(help), "undocumented field %s.%s", section, key);
		render_def(r, &m);
	}
}

static void
render_info(struct render *r)
{
	const char *sep = "";
	json_t *v;

	head(&r->b, "gossipd_info", "gauge", "1, with the peer's identity and settings as labels");
	out(&r->b, "gossipd_info{");
	for (size_t i = 0; i < GD_ARRAY_SIZE(info_labels); i++) {
		v = json_object_get(metrics_section(r, info_labels[i].section), info_labels[i].key);
		if (!json_is_string(v))
			continue;
		out(&r->b, "%s%s=\"", sep, info_labels[i].label);
		label_value(&r->b, json_string_value(v));
		out(&r->b, "\"");
		sep = ",";
	}
	out(&r->b, "} 1\n");
}

char *
metrics_render(json_t *status, json_t *stats, json_t *peers)
{
	struct render r = { { NULL, 0, 8192, 0 }, status, stats,
	    json_is_array(peers) ? peers : NULL };

	if ((r.b.s = malloc(r.b.cap)) == NULL)
		return NULL;
	r.b.s[0] = '\0';
	render_info(&r);
	for (size_t i = 0; i < GD_ARRAY_SIZE(metric_defs); i++)
		render_def(&r, &metric_defs[i]);
	for (size_t i = 0; i < GD_ARRAY_SIZE(sections); i++)
		render_undocumented(&r, sections[i]);
	if (r.b.oom) {
		free(r.b.s);
		return NULL;
	}
	return r.b.s;
}
