/*
 * test_metrics: the Prometheus exposition of status and stats replies is
 * well formed: every sample has a # HELP and # TYPE for its name first,
 * names are legal, counters end in _total, label values are escaped, and
 * every numeric leaf of the input is there.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check.h"
#include "metrics.h"


int
main(void)
{
	json_t *status, *stats;
	char *text, *line, *save, typed[128] = "", type[16] = "";
	int samples = 0;

	status = json_pack("{s:b, s:s, s:s, s:I, s:f, s:i, s:I, s:f}", "ok", 1,
	    "id", "00ff", "state", "training", "step", (json_int_t)42, "loss", 0.5,
	    "members", 8, "bytes_sent", (json_int_t)1000, "accuracy", -1.0);
	stats = json_pack("{s:b, s:{s:I, s:f}, s:{s:{s:I, s:I, s:I}, s:{s:I, s:I},"
	    " s:I}, s:{s:I, s:i, s:I}}", "ok", 1,
	    "train", "steps", (json_int_t)42, "samples_per_s", 1234.5,
	    "transport", "rejected", "bad_mac", (json_int_t)3, "replay", (json_int_t)0,
	    "total", (json_int_t)3, "bytes_sent", "we\"ird\\type", (json_int_t)7,
	    "total", (json_int_t)7, "messages_sent", (json_int_t)9,
	    "membership", "pings_sent", (json_int_t)11, "alive", 8,
	    "incarnation", (json_int_t)1700000000000);
	REQUIRE(status != NULL && stats != NULL);
	text = metrics_render(status, stats);
	REQUIRE(text != NULL);
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char name[128];
		size_t n = 0;

		if (strncmp(line, "# HELP ", 7) == 0) {
			REQUIRE(sscanf(line + 7, "%127s", typed) == 1);
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
	free(text);
	text = metrics_render(status, stats);
	REQUIRE(strstr(text, "gossipd_step 42\n") != NULL);
	REQUIRE(strstr(text, "gossipd_state{state=\"training\"} 1\n") != NULL);
	REQUIRE(strstr(text, "gossipd_bytes_sent_total 1000\n") != NULL);
	REQUIRE(strstr(text, "gossipd_transport_rejected_total{reason=\"bad_mac\"} 3\n") != NULL);
	REQUIRE(strstr(text, "reason=\"total\"") == NULL);
	REQUIRE(strstr(text, "type=\"we\\\"ird\\\\type\"} 7\n") != NULL);
	REQUIRE(strstr(text, "gossipd_membership_pings_sent_total 11\n") != NULL);
	REQUIRE(strstr(text, "# TYPE gossipd_membership_alive gauge\n") != NULL);
	REQUIRE(strstr(text, "gossipd_train_steps_total 42\n") != NULL);
	REQUIRE(strstr(text, "gossipd_id") == NULL);
	printf("ok: %d samples, all typed and named per the exposition format\n", samples);
	free(text);
	json_decref(status);
	json_decref(stats);
	return 0;
}
