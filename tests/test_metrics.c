/*
 * test_metrics: the Prometheus exposition of status, stats and peers
 * replies is well formed: every sample has a # HELP and # TYPE for its name
 * first, each family's samples are together, names are legal, counters end
 * in _total, label values are escaped; the table's names, types and labels
 * are used, this peer is not among the per-peer series, and a field the
 * table does not know is still there, marked undocumented.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "metrics.h"

/* Every line of text checked against the format; returns the samples. */
static int
check_format(char *text)
{
	char *line, *save, typed[128] = "", type[16] = "", seen[64][128];
	int samples = 0, nseen = 0;

	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		size_t n = 0;

		if (strncmp(line, "# HELP ", 7) == 0) {
			REQUIRE(sscanf(line + 7, "%127s", typed) == 1);
			for (int i = 0; i < nseen; i++)
				REQUIRE(strcmp(seen[i], typed) != 0);	/* one block each */
			REQUIRE(nseen < 64);
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", typed);
			REQUIRE(strlen(line) > 8 + strlen(typed));	/* a HELP text */
			type[0] = '\0';
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			REQUIRE(sscanf(line + 7, "%127s %15s", name, type) == 2);
			REQUIRE(strcmp(name, typed) == 0);
			REQUIRE(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0);
			continue;
		}
		REQUIRE(line[0] != '#');
		while (isalnum((unsigned char)line[n]) || line[n] == '_')
			n++;
		REQUIRE(n > 0 && n < sizeof(name) && !isdigit((unsigned char)line[0]));
		memcpy(name, line, n);
		name[n] = '\0';
		REQUIRE(strcmp(name, typed) == 0 && type[0] != '\0');
		if (strcmp(type, "counter") == 0)
			REQUIRE(n > 6 && strcmp(name + n - 6, "_total") == 0);
		REQUIRE(line[n] == ' ' || line[n] == '{');
		REQUIRE(strrchr(line, ' ') != NULL && strrchr(line, ' ')[1] != '\0');
		samples++;
	}
	return samples;
}

static void
test_render(void)
{
	json_t *status, *stats, *peers;
	char *text;
	int samples;

	status = json_pack("{s:b, s:s, s:s, s:s, s:s, s:I, s:f, s:i, s:I, s:f, s:f, s:f,"
	    " s:I, s:n, s:{s:s, s:i, s:I}}", "ok", 1,
	    "id", "00ff", "job", "j\"1", "state", "training", "trainer", "external",
	    "step", (json_int_t)42, "loss", 0.5, "members", 8, "bytes_sent", (json_int_t)1000,
	    "accuracy", -1.0, "samples_per_s", 99.5, "lag_wait_s", 1.5,
	    "new_thing", (json_int_t)3, "consensus_distance",
	    "attach", "state", "attached", "pid", 77, "params", (json_int_t)10);
	stats = json_pack("{s:b, s:{s:I, s:f}, s:{s:{s:I, s:I, s:I}, s:{s:I, s:I},"
	    " s:I}, s:{s:I, s:i, s:I}, s:{s:s, s:I, s:I}}", "ok", 1,
	    "train", "steps", (json_int_t)42, "samples_per_s", 1234.5,
	    "transport", "rejected", "bad_mac", (json_int_t)3, "replay", (json_int_t)0,
	    "total", (json_int_t)3, "bytes_sent", "we\"ird\\type", (json_int_t)7,
	    "total", (json_int_t)7, "messages_sent", (json_int_t)9,
	    "membership", "pings_sent", (json_int_t)11, "alive", 8,
	    "incarnation", (json_int_t)1700000000000,
	    "gossip", "mode", "saps", "initiated", (json_int_t)5, "bad_mask", (json_int_t)1);
	peers = json_pack("[{s:s, s:s, s:s, s:b, s:f, s:I}, {s:s, s:s, s:s, s:b, s:f, s:n,"
	    " s:I, s:{s:I, s:I}, s:i}, {s:s, s:s, s:s, s:b, s:f, s:f, s:I, s:{s:I, s:I},"
	    " s:i}]",
	    "id", "self0", "addr", "127.0.0.1:1", "state", "alive", "self", 1, "rtt", 0.0,
	    "exchanges", (json_int_t)0,
	    "id", "aa", "addr", "127.0.0.1:2", "state", "alive", "self", 0, "rtt", 0.002,
	    "bandwidth", "exchanges", (json_int_t)4, "refused", "far", (json_int_t)1,
	    "nonfinite", (json_int_t)0, "odd", 5,
	    "id", "bb", "addr", "[::1]:3", "state", "suspect", "self", 0, "rtt", 0.5,
	    "bandwidth", 1e6, "exchanges", (json_int_t)2, "refused", "far", (json_int_t)0,
	    "nonfinite", (json_int_t)2, "odd", 6);
	REQUIRE(status != NULL && stats != NULL && peers != NULL);
	text = metrics_render(status, stats, peers);
	REQUIRE(text != NULL);
	samples = check_format(text);
	free(text);

	text = metrics_render(status, stats, peers);
	REQUIRE(strstr(text, "gossipd_step 42\n") != NULL);
	REQUIRE(strstr(text, "gossipd_state{state=\"training\"} 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_info{id=\"00ff\",job=\"j\\\"1\",trainer=\"external\","
	    "mode=\"saps\"} 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_bytes_sent_total 1000\n") != NULL);
	REQUIRE(strstr(text, "gossipd_samples_per_second 99.5\n") != NULL);
	REQUIRE(strstr(text, "gossipd_lag_wait_seconds_total 1.5\n") != NULL);
	REQUIRE(strstr(text, "gossipd_consensus_distance") == NULL);	/* null: unknown */
	REQUIRE(strstr(text, "gossipd_attach_state{state=\"attached\"} 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_attach_pid 77\n") != NULL);
	REQUIRE(strstr(text, "gossipd_transport_rejected_total{reason=\"bad_mac\"} 3\n") != NULL);
	REQUIRE(strstr(text, "reason=\"total\"") == NULL);
	REQUIRE(strstr(text, "gossipd_transport_bytes_sent_total{type=\"we\\\"ird\\\\type\"} 7\n")
	    != NULL);
	REQUIRE(strstr(text, "gossipd_membership_pings_sent_total 11\n") != NULL);
	REQUIRE(strstr(text, "# TYPE gossipd_membership_alive gauge\n") != NULL);
	REQUIRE(strstr(text, "gossipd_train_steps_total 42\n") != NULL);
	REQUIRE(strstr(text, "gossipd_gossip_initiated_total 5\n") != NULL);
	REQUIRE(strstr(text, "gossipd_gossip_bad_mask_total 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_train_samples_per") == NULL);	/* said once */
	REQUIRE(strstr(text, "gossipd_id") == NULL && strstr(text, "gossipd_ok") == NULL);
	/* per peer, this one left out, null figures absent */
	REQUIRE(strstr(text, "self0") == NULL);
	REQUIRE(strstr(text, "gossipd_peer_rtt_seconds{peer=\"aa\",addr=\"127.0.0.1:2\"} "
	    "0.002") != NULL);
	REQUIRE(strstr(text, "gossipd_peer_bandwidth_bytes_per_second{peer=\"aa\"") == NULL);
	REQUIRE(strstr(text, "gossipd_peer_bandwidth_bytes_per_second{peer=\"bb\","
	    "addr=\"[::1]:3\"} 1000000\n") != NULL);
	REQUIRE(strstr(text, "gossipd_peer_state{peer=\"bb\",addr=\"[::1]:3\",state=\"suspect\"}"
	    " 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_peer_refused_total{peer=\"bb\",addr=\"[::1]:3\","
	    "reason=\"nonfinite\"} 2\n") != NULL);
	REQUIRE(strstr(text, "gossipd_peer_exchanges_total{peer=\"aa\",addr=\"127.0.0.1:2\"} 4\n")
	    != NULL);
	/* fields the table does not describe: exported, and marked */
	REQUIRE(strstr(text, "# HELP gossipd_status_new_thing undocumented field "
	    "status.new_thing\n") != NULL);
	REQUIRE(strstr(text, "gossipd_status_new_thing 3\n") != NULL);
	REQUIRE(strstr(text, "gossipd_peer_odd{peer=\"bb\",addr=\"[::1]:3\"} 6\n") != NULL);
	printf("ok: %d samples, all typed and named per the exposition format\n", samples);
	free(text);
	json_decref(status);
	json_decref(stats);
	json_decref(peers);
}

static const struct check_case cases[] = {
	{ "metrics_render", test_render },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return check_main(argc, argv, cases, "test_metrics");
}
