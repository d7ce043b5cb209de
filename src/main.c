/*
 * main: the gossipd process. It reads the configuration, detaches and
 * opens the log as asked, then hands a peer (server.c) to the libuv loop
 * on this thread until the peer has left. Every way out, from a refused
 * key to a clean leave, ends through the same run-out of the loop and the
 * same free.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "config.h"
#ifdef GOSSIPD_FAULTS
#include "fault.h"
#endif
#include "server.h"
#include "log.h"

/* Detach from the terminal. Done before any thread or libfabric exists
 * (verbs is not fork-safe). Paths were made absolute by the caller. */
static int
main_detach(const struct config *c)
{
	int fd;

	switch (fork()) {
	case -1:
		return -errno;
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return -errno;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (c->log_file == NULL)
		dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
	return 0;
}

static int
main_open_log(const struct config *c)
{
	int fd;

	if (c->log_file == NULL)
		return 0;
	fd = open(c->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "gossipd: log_file: cannot open %s: %s\n", c->log_file,
		    strerror(errno));
		return -errno;
	}
	dup2(fd, STDERR_FILENO);
	close(fd);
	return 0;
}

/* Relative paths would break once a daemon changes directory. */
static void
main_absolute(char **path)
{
	char *abs;

	if (*path == NULL || (*path)[0] == '/')
		return;
	abs = realpath(*path, NULL);
	if (abs == NULL) {
		char cwd[4096];
		size_t n;

		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return;
		n = strlen(cwd) + strlen(*path) + 2;
		abs = xmalloc(n);
		snprintf(abs, n, "%s/%s", cwd, *path);
	}
	free(*path);
	*path = abs;
}

/*
 * libinfinipath, which libfabric's psm provider pulls in, installs handlers
 * from its constructor for SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and
 * SIGTERM that print a backtrace and call exit(1) inside the handler. A
 * crash then looks like a runtime error (exit 1) and leaves no core, and a
 * SIGTERM before the loop's own handler exists runs exit() at an arbitrary
 * point (seen: the peer trained on). SIGTERM and SIGINT are ours: default
 * until the loop handles them. The crash signals get their default action
 * back only where that library holds them, so a sanitizer's stay.
 */
static void
main_reclaim_signals(void)
{
	static const int crash[] = { SIGSEGV, SIGBUS, SIGILL, SIGABRT };
	struct sigaction sa;
	Dl_info info;
	size_t i;

	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	for (i = 0; i < sizeof(crash) / sizeof(crash[0]); i++) {
		if (sigaction(crash[i], NULL, &sa) != 0 ||
		    !(sa.sa_flags & SA_SIGINFO))
			continue;
		if (dladdr((void *)(uintptr_t)sa.sa_sigaction, &info) != 0 &&
		    info.dli_fname != NULL &&
		    strstr(info.dli_fname, "libinfinipath") != NULL)
			signal(crash[i], SIG_DFL);
	}
}

#ifdef GOSSIPD_FAULTS
/* The test build's --fault KIND[:X] (fault.h), taken out of argv before
 * the configuration sees it. */
static int
main_fault(int *argc, char **argv, struct fault **f, struct errbuf *err)
{
	int rc;

	for (int i = 1; i < *argc; i++) {
		if (strcmp(argv[i], "--fault") != 0)
			continue;
		if (i + 1 >= *argc)
			return errbuf_set(err, -EINVAL, "fault: needs KIND[:X]");
		rc = fault_parse(argv[i + 1], f, err);
		/* argv[argc] is NULL, and moves with the rest */
		memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 1) * sizeof(*argv));
		*argc -= 2;
		return rc;
	}
	return 0;
}
#endif

int
main(int argc, char **argv)
{
	struct daemon d;
	struct errbuf err = { "" };
	enum log_level level;
	uv_loop_t *loop;
	int rc, e;
#ifdef GOSSIPD_FAULTS
	struct fault *fault = NULL;
#endif

	main_reclaim_signals();
	memset(&d, 0, sizeof(d));
#ifdef GOSSIPD_FAULTS
	if (main_fault(&argc, argv, &fault, &err) < 0) {
		fprintf(stderr, "gossipd: %s\n", err.msg);
		return DAEMON_EXIT_USAGE;
	}
#endif
	if ((rc = config_load(&d.cfg, argc, argv, &err)) != 0) {
		if (rc < 0)
			fprintf(stderr, "gossipd: %s\n", err.msg);
		rc = rc < 0 ? DAEMON_EXIT_USAGE : 0;	/* 1: --help or --version */
		goto out;
	}
	if (log_level_parse(d.cfg.log_level, &level) == 0)
		log_set_level(level);
	main_absolute(&d.cfg.data_dir);
	main_absolute(&d.cfg.checkpoint_dir);
	main_absolute(&d.cfg.control);
	main_absolute(&d.cfg.log_file);
	main_absolute(&d.cfg.key_file);
	rc = DAEMON_EXIT_USAGE;
	if (main_open_log(&d.cfg) < 0)
		goto out;
	rc = DAEMON_EXIT_RUNTIME;
	if (!d.cfg.foreground && (e = main_detach(&d.cfg)) < 0) {
		log_error("cannot detach: %s", strerror(-e));
		goto out;
	}
	if (sodium_init() < 0) {
		log_error("libsodium failed to initialise");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	loop = uv_default_loop();
	if (server_open(&d, loop, &err) < 0)
		log_error("%s", err.msg);
#ifdef GOSSIPD_FAULTS
	else if (fault != NULL && d.rounds != NULL)
		fault_attach(fault, d.rounds);
#endif
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	rc = d.exit_code;
out:
	server_free(&d);
#ifdef GOSSIPD_FAULTS
	fault_free(fault);
#endif
	return rc;
}
