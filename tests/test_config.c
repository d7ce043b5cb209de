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
load(struct config *c, struct errbuf *err, const char **args)
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
expect_bad(const char *needle, const char **args)
{
	struct config c;
	struct errbuf err;
	int rc = load(&c, &err, args);

	CHECKF(rc < 0, "accepted bad input (wanted error mentioning '%s')", needle);
	CHECKF(strstr(err.msg, needle) != NULL, "reason '%s' does not mention '%s'", err.msg,
	    needle);
	config_free(&c);
}

int
main(void)
{
	struct config c;
	struct errbuf err;
	const char *file;
	char arg[300];
	int rc;

	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}

	/* Defaults. */
	rc = load(&c, &err, (const char *[]){ NULL });
	CHECKF(rc == 0, "defaults refused: %s", err.msg);
	CHECKF(c.batch_size == 64 && c.epochs == 15 && c.threads == 1, "bad defaults");
	CHECKF(strcmp(c.device, "cpu") == 0 && c.shard_count == 1, "bad defaults");
	CHECKF(c.model.nlayers == 3 && c.model.sizes[1] == 256, "default model");
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
	    "lr = 0.1\n"
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
	CHECKF(c.lr == 0.1, "lr from file: %g", c.lr);
	CHECKF(c.shard_index == 1 && c.shard_count == 4, "shard");
	CHECKF(c.partition.kind == DATA_DIRICHLET && c.partition.alpha == 0.5, "partition");
	CHECKF(c.model.nlayers == 2 && c.model.sizes[1] == 64, "model");
	CHECKF(c.max_message_size == 2u << 20, "size suffix: %zu", c.max_message_size);
	CHECKF(strcmp(c.job, "fm") == 0 && strstr(c.control, "fm.sock") != NULL, "job/control");
	config_free(&c);

	rc = load(&c, &err, (const char *[]){ "--help", NULL });
	CHECKF(rc == 1, "--help should return 1, got %d", rc);
	config_free(&c);

	/* Bad flags and values: each names the key. */
	expect_bad("--bogus", (const char *[]){ "--bogus", NULL });
	expect_bad("batch_size", (const char *[]){ "--batch-size", "0", NULL });
	expect_bad("batch_size", (const char *[]){ "--batch-size", "12x", NULL });
	expect_bad("lr", (const char *[]){ "--lr", "-1", NULL });
	expect_bad("lr", (const char *[]){ "--lr", "nan", NULL });
	expect_bad("momentum", (const char *[]){ "--momentum", "1.5", NULL });
	expect_bad("shard", (const char *[]){ "--shard", "4/4", NULL });
	expect_bad("shard", (const char *[]){ "--shard", "1", NULL });
	expect_bad("partition", (const char *[]){ "--partition", "dirichlet:-2", NULL });
	expect_bad("model", (const char *[]){ "--model", "784-x-10", NULL });
	expect_bad("model", (const char *[]){ "--model", "100-10", NULL });
	expect_bad("device", (const char *[]){ "--device", "tpu", NULL });
	expect_bad("provider", (const char *[]){ "--provider", "udp", NULL });
	expect_bad("listen", (const char *[]){ "--listen", "localhost", NULL });
	expect_bad("listen", (const char *[]){ "--listen", "127.0.0.1:70000", NULL });
	expect_bad("key_file", (const char *[]){ "--listen", "127.0.0.1:7000", NULL });
	expect_bad("resume", (const char *[]){ "--resume", NULL });
	expect_bad("lr_schedule", (const char *[]){ "--lr-schedule", "linear", NULL });
	expect_bad("log_level", (const char *[]){ "--log-level", "loud", NULL });
	expect_bad("max_message_size", (const char *[]){ "--max-message-size", "1", NULL });
	expect_bad("max_message_size", (const char *[]){ "--max-message-size", "9G", NULL });
	expect_bad("needs a value", (const char *[]){ "--epochs", NULL });
	expect_bad("unexpected argument", (const char *[]){ "stray", NULL });
	expect_bad("job", (const char *[]){ "--job", "a/b", NULL });

	/* Bad files. */
	expect_bad("cannot open", (const char *[]){ "-c", "/nonexistent/x.conf", NULL });
	file = write_file("unknown.conf", "batch_size = 8\nfrobnicate = 3\n");
	snprintf(arg, sizeof(arg), "%s", file);
	expect_bad("unknown key 'frobnicate'", (const char *[]){ "-c", arg, NULL });
	expect_bad(":2:", (const char *[]){ "-c", arg, NULL });
	file = write_file("range.conf", "epochs = 0\n");
	snprintf(arg, sizeof(arg), "%s", file);
	expect_bad("epochs", (const char *[]){ "-c", arg, NULL });
	file = write_file("section.conf", "[other]\nepochs = 3\n");
	snprintf(arg, sizeof(arg), "%s", file);
	expect_bad("unknown section", (const char *[]){ "-c", arg, NULL });
	file = write_file("syntax.conf", "epochs 3\n");
	snprintf(arg, sizeof(arg), "%s", file);
	expect_bad("syntax", (const char *[]){ "-c", arg, NULL });

	/* Runtime changes. */
	rc = load(&c, &err, (const char *[]){ NULL });
	CHECKF(rc == 0, "defaults");
	CHECKF(config_set(&c, "log_level", "debug", &err) == 0 &&
	    strcmp(c.log_level, "debug") == 0, "set log_level: %s", err.msg);
	CHECKF(config_set(&c, "log_level", "shout", &err) == -EINVAL, "bad log_level set");
	CHECKF(config_set(&c, "batch_size", "8", &err) == -EPERM, "batch_size is not runtime");
	CHECKF(config_set(&c, "nope", "8", &err) == -EINVAL, "unknown key set");
	config_free(&c);

	snprintf(arg, sizeof(arg), "rm -rf %s", tmpdir);
	if (system(arg) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	return check_exit("test_config");
}
