/*
 * Unit test of config: precedence of defaults, file and flags; every kind
 * of bad input is refused with a reason that names the key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"


static char tmpdir[] = "/tmp/test_config.XXXXXX";

static const char *
write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(99);
	}
	return path;
}

/* Loads argv (NULL-terminated); returns config_load's code, err filled. */
static int
load(struct config *c, struct errbuf *err, const char *const *args)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = (char *)"gossipd";
	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	memset(err, 0, sizeof(*err));
	return config_load(c, argc, argv, err);
}

/* Expect refusal, with `needle` in the reason. */
static void
expect_bad(const char *needle, const char *const *args)
{
	struct config c;
	struct errbuf err;
	int rc = load(&c, &err, args);

	CHECKF(rc < 0, "accepted bad input (wanted error mentioning '%s')", needle);
	CHECKF(strstr(err.msg, needle) != NULL, "reason '%s' does not mention '%s'", err.msg,
	    needle);
	config_free(&c);
}

/* An argv that must be refused, and what the reason must mention. Rows
 * give at most 7 args, so the zeroed rest ends them as load wants. */
struct bad_args {
	const char *needle;
	const char *args[8];
};

static void
expect_bad_rows(const struct bad_args *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		expect_bad(rows[i].needle, rows[i].args);
}

static void
test_config(void)
{
	struct config c;
	struct errbuf err;
	const char *file;
	char arg[300];
	int rc;

	/* Defaults. */
	rc = load(&c, &err, (const char *[]){ NULL });
	CHECKF(rc == 0, "defaults refused: %s", err.msg);
	CHECKF(c.batch_size == 64 && c.epochs == 15 && c.threads == 1, "bad defaults");
	CHECKF(strcmp(c.device, "cpu") == 0 && c.shard_count == 1, "bad defaults");
	CHECKF(c.model.nlayers == 3 && c.model.sizes[1] == 256, "default model");
	CHECKF(c.close_budget == 8 && c.close_distance == 0.01 && c.close_density == 0.5 &&
	    c.close_timeout == 60, "closing phase defaults");
	CHECKF(c.lr == 0.1 && c.momentum == 0.8 && c.density == 0.04 && c.density_start == 0 &&
	    c.logit_adjust == 1, "optimiser and density defaults");
	CHECKF(c.control != NULL && strstr(c.control, "default.sock") != NULL,
	    "default control path %s", c.control ? c.control : "(null)");
	config_free(&c);

	/* A call that stops inside clustered short options must not leave
	 * getopt reading that argv in the next call (glibc keeps its scan
	 * pointer unless optind is set to 0). The cluster's memory is reused
	 * in between, as a freed argv would be. */
	{
		char cluster[] = "-fZf";

		rc = load(&c, &err, (const char *[]){ cluster, NULL });
		CHECKF(rc < 0 && strstr(err.msg, "unknown option") != NULL,
		    "-fZf accepted: %s", err.msg);
		config_free(&c);
		memcpy(cluster, "-fQQ", 4);
		rc = load(&c, &err, (const char *[]){ "--foreground", NULL });
		CHECKF(rc == 0 && c.foreground, "a clean argv after a broken cluster: %s", err.msg);
		config_free(&c);
	}

	/* File, then flags override it. */
	file = write_file("good.conf",
	    "# a comment\n"
	    "job = fm\n"
	    "batch_size = 128\n"
	    "lr = 0.07\n"
	    "[gossipd]\n"
	    "shard = 1/4\n"
	    "partition = dirichlet:0.5\n"
	    "model = 784-64-10\n"
	    "max_message_size = 2M\n"
	    "resume = no\n");
	snprintf(arg, sizeof(arg), "%s", file);
	rc = load(&c, &err, (const char *[]){ "--batch-size", "32", "-c", arg, NULL });
	CHECKF(rc == 0, "good file refused: %s", err.msg);
	CHECKF(c.batch_size == 32, "flag did not override the file: %d", c.batch_size);
	CHECKF(c.lr == 0.07, "lr from file: %g", c.lr);
	CHECKF(c.shard_index == 1 && c.shard_count == 4, "shard");
	CHECKF(c.partition.kind == DATA_DIRICHLET && c.partition.alpha == 0.5, "partition");
	CHECKF(c.model.nlayers == 2 && c.model.sizes[1] == 64, "model");
	CHECKF(c.max_message_size == 2u << 20, "size suffix: %zu", c.max_message_size);
	CHECKF(strcmp(c.job, "fm") == 0 && strstr(c.control, "fm.sock") != NULL, "job/control");
	config_free(&c);

	rc = load(&c, &err, (const char *[]){ "--trainer", "external", "--mode", "share",
	    "--optimizer", "adaptive", NULL });
	CHECKF(rc == 0 && c.optimizer == OPTIMIZER_ADAPTIVE, "optimizer adaptive: %s", err.msg);
	config_free(&c);
	rc = load(&c, &err, (const char *[]){ "--mode", "share", "--values", "int2", NULL });
	CHECKF(rc == 0 && c.values == GOSSIP_INT2, "values int2: %s", err.msg);
	config_free(&c);

	rc = load(&c, &err, (const char *[]){ "--help", NULL });
	CHECKF(rc == 1, "--help should return 1, got %d", rc);
	config_free(&c);

	/* Bad flags and values: each names the key. */
	static const struct bad_args bad_flags[] = {
		{ "--bogus", { "--bogus" } },
		{ "batch_size", { "--batch-size", "0" } },
		{ "batch_size", { "--batch-size", "12x" } },
		{ "lr", { "--lr", "-1" } },
		{ "lr", { "--lr", "nan" } },
		{ "momentum", { "--momentum", "1.5" } },
		{ "close_budget", { "--close-budget", "-1" } },
		{ "close_budget", { "--close-budget", "2e6" } },
		{ "close_budget", { "--close-budget", "lots" } },
		{ "close_distance", { "--close-distance", "-0.01" } },
		{ "density_start", { "--density-start", "-0.01" } },
		{ "density_start", { "--density-start", "1.5" } },
		{ "logit_adjust", { "--logit-adjust", "-0.5" } },
		{ "logit_adjust", { "--logit-adjust", "11" } },
		{ "close_density", { "--close-density", "0" } },
		{ "close_density", { "--close-density", "1.5" } },
		{ "close_timeout", { "--close-timeout", "0" } },
		{ "close_timeout", { "--close-timeout", "1e9" } },
		{ "shard", { "--shard", "4/4" } },
		{ "shard", { "--shard", "1" } },
		{ "partition", { "--partition", "dirichlet:-2" } },
		{ "model", { "--model", "784-x-10" } },
		{ "model", { "--model", "100-10" } },
		{ "device", { "--device", "tpu" } },
		{ "provider", { "--provider", "udp" } },
		{ "listen", { "--listen", "localhost" } },
		{ "listen", { "--listen", "127.0.0.1:70000" } },
		{ "key_file", { "--listen", "127.0.0.1:7000" } },
		/* One HOST:PORT rule (addr_split) for listen, join and peers. */
		{ "listen", { "--listen", "127.0.0.1:0" } },
		{ "listen", { "--listen", ":7000" } },
		{ "listen", { "--listen", "h:+7000" } },
		{ "listen", { "--listen", "::1:7000" } },
		{ "listen", { "--listen", "[]:7000" } },
		{ "join", { "--join", "h:" } },
		{ "resume", { "--resume" } },
		{ "lr_schedule", { "--lr-schedule", "linear" } },
		{ "log_level", { "--log-level", "loud" } },
		{ "max_message_size", { "--max-message-size", "1" } },
		{ "max_message_size", { "--max-message-size", "9G" } },
		{ "needs a value", { "--epochs" } },
		{ "unexpected argument", { "stray" } },
		{ "job", { "--job", "a/b" } },
		/* Cross-key rules refuse at load, naming the key. */
		{ "probe_timeout", { "--probe-timeout", "500" } },
		{ "probe_timeout", { "--probe-interval", "100" } },
		{ "density 0.9 and mask_block", { "--density", "0.9", "--mask-block", "117574" } },
		{ "density_start: density 0.6 and mask_block", { "--density", "1",
		    "--density-start", "0.6", "--mask-block", "117574" } },
		{ "close_density: density 0.9 and mask_block", { "--close-density", "0.9",
		    "--mask-block", "117574" } },
		{ "mask_block", { "--model", "784-10", "--density", "0.9", "--mask-block",
		    "4000" } },
		{ "outer_lr, outer_momentum: the outer step needs device cpu", { "--device",
		    "cuda", "--outer-momentum", "0.9" } },
		{ "mode: share needs device cpu", { "--device", "cuda", "--mode", "share" } },
		{ "outer_momentum: mode share takes outer_lr alone", { "--mode", "share",
		    "--outer-momentum", "0.9" } },
		{ "outer_momentum", { "--outer-momentum", "1" } },
		{ "optimizer: adaptive is for an attached process", { "--mode", "share",
		    "--optimizer", "adaptive" } },
		{ "optimizer: adaptive weighs mode share's shares", { "--trainer", "external",
		    "--optimizer", "adaptive" } },
		{ "optimizer", { "--optimizer", "adam" } },
		{ "values: int2 rounds a share's moves", { "--values", "int2" } },
		{ "values", { "--values", "int4" } },
		{ "residual_decay", { "--residual-decay", "1.5" } },
		{ "start", { "--start", "first" } },
		/* peers: parsed at load, each address by the same rule. */
		{ "peers: 'h:0'", { "--listen", "127.0.0.1:7000", "--key-file", "k", "--peers",
		    "127.0.0.1:7001,h:0" } },
		{ "peers: no address", { "--listen", "127.0.0.1:7000", "--key-file", "k",
		    "--peers", "," } },
		{ "peers: cannot open", { "--listen", "127.0.0.1:7000", "--key-file", "k",
		    "--peers", "@/nonexistent/peers" } },
		{ "peers: needs listen", { "--peers", "127.0.0.1:7001" } },
	};
	expect_bad_rows(bad_flags, GD_ARRAY_SIZE(bad_flags));
	/* Without a closing phase its density is not checked against the mask. */
	rc = load(&c, &err, (const char *[]){ "--close-budget", "0", "--close-density", "0.9",
	    "--mask-block", "117574", NULL });
	CHECKF(rc == 0 && c.close_budget == 0, "close_budget 0: %s", err.msg);
	config_free(&c);
	rc = load(&c, &err, (const char *[]){ "--listen", "[::1]:7000", "--key-file", "k",
	    "--join", "localhost:7001", NULL });
	CHECKF(rc == 0, "IPv6 listen refused: %s", err.msg);
	config_free(&c);

	/* peers: parsed at load into peer_list. */
	rc = load(&c, &err, (const char *[]){ "--listen", "127.0.0.1:7000", "--key-file", "k",
	    "--peers", "127.0.0.1:7001,,[::1]:7002", NULL });
	CHECKF(rc == 0 && c.npeers == 2 && strcmp(c.peer_list[0], "127.0.0.1:7001") == 0 &&
	    strcmp(c.peer_list[1], "[::1]:7002") == 0, "peers list: %s", err.msg);
	config_free(&c);
	file = write_file("peers.txt", "# the job\n127.0.0.1:7001  # first\n\n  h:7002\t h:7003\n");
	snprintf(arg, sizeof(arg), "@%s", file);
	rc = load(&c, &err, (const char *[]){ "--listen", "127.0.0.1:7000", "--key-file", "k",
	    "--peers", arg, NULL });
	CHECKF(rc == 0 && c.npeers == 3 && strcmp(c.peer_list[2], "h:7003") == 0,
	    "peers file: %s", err.msg);
	config_free(&c);
	{
		/* A comment longer than any line buffer is cut whole: the
		 * address at its end is not a peer. */
		char text[2048];

		snprintf(text, sizeof(text), "127.0.0.1:7001 # %01500d h:7009\nh:7002\n", 0);
		file = write_file("longpeers.txt", text);
	}
	snprintf(arg, sizeof(arg), "@%s", file);
	rc = load(&c, &err, (const char *[]){ "--listen", "127.0.0.1:7000", "--key-file", "k",
	    "--peers", arg, NULL });
	CHECKF(rc == 0 && c.npeers == 2 && strcmp(c.peer_list[1], "h:7002") == 0,
	    "a long comment in a peers file: %s, %zu peers", err.msg, c.npeers);
	config_free(&c);
	file = write_file("badpeers.txt", "127.0.0.1:7001\nnoport\n");
	snprintf(arg, sizeof(arg), "@%s", file);
	expect_bad("'noport'", (const char *[]){ "--listen", "127.0.0.1:7000", "--key-file", "k",
	    "--peers", arg, NULL });

	/* Bad files: written, then loaded with -c. */
	expect_bad("cannot open", (const char *[]){ "-c", "/nonexistent/x.conf", NULL });
	static const struct { const char *name, *text, *needle; } bad_files[] = {
		{ "unknown.conf", "batch_size = 8\nfrobnicate = 3\n", "unknown key 'frobnicate'" },
		{ "unknown.conf", "batch_size = 8\nfrobnicate = 3\n", ":2:" },
		{ "range.conf", "epochs = 0\n", "epochs" },
		{ "section.conf", "[other]\nepochs = 3\n", "unknown section" },
		{ "syntax.conf", "epochs 3\n", "syntax" },
	};
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad_files); i++) {
		file = write_file(bad_files[i].name, bad_files[i].text);
		expect_bad(bad_files[i].needle, (const char *[]){ "-c", file, NULL });
	}

	/* Runtime changes. */
	rc = load(&c, &err, (const char *[]){ NULL });
	CHECKF(rc == 0, "defaults");
	CHECKF(config_set(&c, "log_level", "debug", &err) == 0 &&
	    strcmp(c.log_level, "debug") == 0, "set log_level: %s", err.msg);
	CHECKF(config_set(&c, "log_level", "shout", &err) == -EINVAL, "bad log_level set");
	CHECKF(config_set(&c, "batch_size", "8", &err) == -EPERM, "batch_size is not runtime");
	CHECKF(config_set(&c, "nope", "8", &err) == -EINVAL, "unknown key set");
	CHECKF(config_set(&c, "probe_interval", "1000", &err) == 0 &&
	    config_set(&c, "probe_timeout", "900", &err) == 0 && c.probe_timeout == 900,
	    "probe timing set: %s", err.msg);
	config_free(&c);

	/* A set that breaks a cross-key rule is refused and leaves every field
	 * as it was, strings included (same pointers). */
	rc = load(&c, &err, (const char *[]){ NULL });
	CHECKF(rc == 0, "defaults");
	{
		/* key, value, 1 if it must be accepted; the default model has
		 * 235146 parameters. */
		static const struct { const char *key, *value; int ok; } steps[] = {
			{ "density", "0.9", 1 },
			{ "probe_timeout", "500", 0 }, { "probe_interval", "200", 0 },
			{ "mask_block", "117574", 0 }, { "log_level", "shout", 0 },
			{ "interval", "0", 0 },
			{ "density", "0.5", 1 }, { "mask_block", "60000", 1 },
			{ "density", "0.8", 0 },
		};
		struct config before;

		for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			memcpy(&before, &c, sizeof(c));
			memset(&err, 0, sizeof(err));
			rc = config_set(&c, steps[i].key, steps[i].value, &err);
			if (steps[i].ok) {
				CHECKF(rc == 0, "set %s %s: %s", steps[i].key, steps[i].value,
				    err.msg);
				continue;
			}
			CHECKF(rc < 0, "set %s %s accepted", steps[i].key, steps[i].value);
			CHECKF(strstr(err.msg, steps[i].key) != NULL,
			    "reason '%s' does not name %s", err.msg, steps[i].key);
			CHECKF(memcmp(&before, &c, sizeof(c)) == 0, "set %s %s changed the config",
			    steps[i].key, steps[i].value);
		}
	}
	config_free(&c);
}

static const struct check_case cases[] = {
	{ "config_load_and_set", test_config },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	char rm[64];
	int rc;

	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}
	rc = check_main(argc, argv, cases, "test_config");
	snprintf(rm, sizeof(rm), "rm -rf %s", tmpdir);
	if (system(rm) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	return rc;
}
