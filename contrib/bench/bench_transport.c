/*
 * bench_transport: the transport's full stack (libfabric tcp;ofi_rxm, AEAD
 * on, acknowledged) against a plain TCP socket pair on loopback, measured
 * side by side in one run, each side a separate process (one core each).
 *
 *   throughput: COUNT messages of SIZE bytes, WINDOW in flight, timed from
 *               the first send to the last acknowledgement (ours) or to the
 *               receiver's one-byte "got everything" (TCP)
 *   CPU time:   user and system seconds per GB of payload of each side
 *               (getrusage of its whole process, all threads) over the
 *               throughput run; ours brackets it with two MARK messages
 *               so that the receiver knows when it starts and ends
 *   round trip: 64-byte echo, timed per round trip after a warm-up
 *
 * Prints "name value" lines; contrib/bench/bench_transport.sh adds
 * fi_pingpong, repeats, writes the CSV and the table of ratios.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "log.h"
#include "transport.h"
#include "util.h"
#include "workers.h"

#define T_BULK	64
#define T_ECHO	65
#define T_QUIT	66
#define T_MARK	67

static struct {
	size_t		size;
	int		count, window, rtt_iters;
	int		port;
	uint8_t		key[32];
	int		threads;	/* transport_params.threads */
} opt = { 4u << 20, 200, 4, 2000, 23400, { 0 }, 0 };

static struct {
	uv_loop_t	*loop;
	struct transport *t;
	char		self[64], peer[64];
	int		acked, failed, quit, echoes, marks;
	struct rusage	mark;
	int		closed;
} b;

static void
on_send(void *arg, int status)
{
	(void)arg;
	if (status == 0)
		b.acked++;
	else
		b.failed++;
}

static const char *const bench_type_names[] = { "bulk", "echo", "quit", "mark" };
static const struct proto bench_proto = { "bench", T_BULK, T_MARK, bench_type_names };

static double
tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* Print "NAME_user_s_per_GB" and "NAME_sys_s_per_GB" for the CPU used
 * since *from while opt.count messages went through. */
static void
print_cpu(const char *name, const struct rusage *from)
{
	struct rusage now;
	double gb = (double)opt.size * opt.count / 1e9;

	getrusage(RUSAGE_SELF, &now);
	printf("%s_user_s_per_GB %.4f\n%s_sys_s_per_GB %.4f\n", name,
	    (tv_s(now.ru_utime) - tv_s(from->ru_utime)) / gb, name,
	    (tv_s(now.ru_stime) - tv_s(from->ru_stime)) / gb);
	fflush(stdout);
}

static void
on_recv(void *arg, uint64_t sender, const char *addr, uint8_t type,
    const uint8_t *p, size_t len)
{
	(void)arg;
	(void)sender;
	if (type == T_ECHO && strcmp(addr, b.peer) != 0)
		transport_send(b.t, addr, T_ECHO, p, len, NULL, NULL);
	else if (type == T_ECHO)
		b.echoes++;
	else if (type == T_QUIT)
		b.quit = 1;
	else if (type == T_MARK && b.marks++ == 0)
		getrusage(RUSAGE_SELF, &b.mark);
	else if (type == T_MARK)
		print_cpu("cpu_ours_rx", &b.mark);
}

static void
on_closed(void *arg)
{
	(void)arg;
	b.closed = 1;
}

static int
open_transport(int port, const char *peer_port)
{
	struct transport_params tp;
	struct errbuf err;

	b.loop = uv_default_loop();
	snprintf(b.self, sizeof(b.self), "127.0.0.1:%d", port);
	snprintf(b.peer, sizeof(b.peer), "127.0.0.1:%s", peer_port);
	memset(&tp, 0, sizeof(tp));
	tp.listen = b.self;
	tp.key = opt.key;
	tp.job = "bench";
	tp.self_id = (uint64_t)port;
	tp.op_timeout_ms = 20000;
	tp.threads = opt.threads;
	/* The default leaves room for 128 bodies of 4 MiB in flight. */
	if (opt.size >= TRANSPORT_DEFAULT_MAX_MESSAGE)
		tp.max_message_size = opt.size + 1;
	if (transport_open(b.loop, &tp, NULL, NULL, &b.t, &err) != 0 ||
	    transport_register(b.t, &bench_proto, on_recv, NULL, &err) != 0) {
		fprintf(stderr, "bench_transport: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static void
close_transport(void)
{
	transport_close(b.t, on_closed, NULL);
	while (!b.closed)
		uv_run(b.loop, UV_RUN_ONCE);
	uv_loop_close(b.loop);
}

static int
run_until(const int *v, int target, double limit)
{
	double t0 = util_now();

	while (*v < target && b.failed == 0) {
		uv_run(b.loop, UV_RUN_ONCE);
		if (util_now() - t0 > limit)
			return -1;
	}
	return b.failed ? -1 : 0;
}

/* The far side of our stack: sinks bulk, echoes small messages. */
static int
ours_server(void)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", opt.port);
	if (open_transport(opt.port + 1, port) != 0)
		return 1;
	/* Echo replies go to whoever asked; b.peer is nobody here. */
	strcpy(b.peer, "-");
	while (!b.quit)
		uv_run(b.loop, UV_RUN_ONCE);
	close_transport();
	return 0;
}

static int
ours_client(double *mbps, double *rtt_us)
{
	char port[16];
	uint8_t *buf = malloc(opt.size), small[64];
	double t0, *rtt;
	int sent, i;

	snprintf(port, sizeof(port), "%d", opt.port + 1);
	rtt = calloc((size_t)opt.rtt_iters, sizeof(*rtt));
	if (buf == NULL || rtt == NULL || open_transport(opt.port, port) != 0)
		return -1;
	randombytes_buf(buf, opt.size);
	/* Warm-up: handshake both ways and first-touch of the buffers. */
	for (i = 0; i < 3; i++)
		transport_send(b.t, b.peer, T_BULK, buf, opt.size, on_send, NULL);
	transport_send(b.t, b.peer, T_MARK, NULL, 0, on_send, NULL);
	if (run_until(&b.acked, 4, 30) != 0)
		return -1;
	b.acked = 0;
	getrusage(RUSAGE_SELF, &b.mark);
	t0 = util_now();
	for (sent = 0; sent < opt.count; ) {
		while (sent < opt.count && sent - b.acked < opt.window) {
			transport_send(b.t, b.peer, T_BULK, buf, opt.size,
			    on_send, NULL);
			sent++;
		}
		uv_run(b.loop, UV_RUN_ONCE);
		if (b.failed)
			return -1;
	}
	if (run_until(&b.acked, opt.count, 60) != 0)
		return -1;
	*mbps = (double)opt.size * opt.count / (util_now() - t0) / 1e6;
	print_cpu("cpu_ours_tx", &b.mark);
	transport_send(b.t, b.peer, T_MARK, NULL, 0, on_send, NULL);
	if (run_until(&b.acked, opt.count + 1, 10) != 0)
		return -1;

	memset(small, 0x5a, sizeof(small));
	for (i = -100; i < opt.rtt_iters; i++) {
		int want = b.echoes + 1;

		t0 = util_now();
		transport_send(b.t, b.peer, T_ECHO, small, sizeof(small), NULL,
		    NULL);
		if (run_until(&b.echoes, want, 10) != 0)
			return -1;
		if (i >= 0)
			rtt[i] = (util_now() - t0) * 1e6;
	}
	*rtt_us = 0;
	for (i = 0; i < opt.rtt_iters; i++)
		*rtt_us += rtt[i] / opt.rtt_iters;
	transport_send(b.t, b.peer, T_QUIT, NULL, 0, on_send, NULL);
	run_until(&b.acked, opt.count + 2, 10);
	close_transport();
	free(rtt);
	free(buf);
	return 0;
}

/* --- plain TCP ----------------------------------------------------------- */

static int
full_io(int fd, void *p, size_t n, int wr)
{
	uint8_t *q = p;
	ssize_t k;

	while (n > 0) {
		k = wr ? write(fd, q, n) : read(fd, q, n);
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return -1;
		}
		q += k;
		n -= (size_t)k;
	}
	return 0;
}

static int
tcp_listen(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 1) != 0)
		return -1;
	return fd;
}

static int
tcp_server(int lfd)
{
	uint8_t *buf = malloc(opt.size), small[64], ok = 1;
	int fd = accept(lfd, NULL, NULL), one = 1, i;
	struct rusage ru;

	close(lfd);
	if (fd < 0 || buf == NULL)
		return 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (i = 0; i < opt.count + 3; i++) {
		if (i == 3)
			getrusage(RUSAGE_SELF, &ru);
		if (full_io(fd, buf, opt.size, 0) != 0)
			return 1;
	}
	print_cpu("cpu_tcp_rx", &ru);
	if (full_io(fd, &ok, 1, 1) != 0)
		return 1;
	while (full_io(fd, small, sizeof(small), 0) == 0)
		if (full_io(fd, small, sizeof(small), 1) != 0)
			break;
	close(fd);
	free(buf);
	return 0;
}

static int
tcp_client(int port, double *mbps, double *rtt_us)
{
	struct sockaddr_in sa;
	uint8_t *buf = malloc(opt.size), small[64], ok;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, i;
	double t0, sum = 0, t;
	struct rusage ru;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (buf == NULL || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	randombytes_buf(buf, opt.size);
	for (i = 0; i < 3; i++)
		if (full_io(fd, buf, opt.size, 1) != 0)
			return -1;
	getrusage(RUSAGE_SELF, &ru);
	t0 = util_now();
	for (i = 0; i < opt.count; i++)
		if (full_io(fd, buf, opt.size, 1) != 0)
			return -1;
	if (full_io(fd, &ok, 1, 0) != 0)
		return -1;
	*mbps = (double)opt.size * opt.count / (util_now() - t0) / 1e6;
	print_cpu("cpu_tcp_tx", &ru);
	memset(small, 0x5a, sizeof(small));
	for (i = -100; i < opt.rtt_iters; i++) {
		t = util_now();
		if (full_io(fd, small, sizeof(small), 1) != 0 ||
		    full_io(fd, small, sizeof(small), 0) != 0)
			return -1;
		if (i >= 0)
			sum += (util_now() - t) * 1e6;
	}
	*rtt_us = sum / opt.rtt_iters;
	close(fd);
	free(buf);
	return 0;
}

static int
reap(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "window", required_argument, NULL, 'w' },
		{ "rtt-iters", required_argument, NULL, 'r' },
		{ "port", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	double ours_mbps, ours_rtt, tcp_mbps, tcp_rtt;
	long v;
	pid_t pid;
	int c, lfd;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (optarg == NULL || util_parse_long(optarg, c == 't' ? -1 : 1,
		    c == 't' ? WORKERS_MAX : 1L << 30, &v)) {
			fprintf(stderr, "usage: bench_transport [--size N] "
			    "[--count N] [--window N] [--rtt-iters N] "
			    "[--port P] [--threads N]\n");
			return 2;
		}
		switch (c) {
		case 's': opt.size = (size_t)v; break;
		case 'n': opt.count = (int)v; break;
		case 'w': opt.window = (int)v; break;
		case 'r': opt.rtt_iters = (int)v; break;
		case 'p': opt.port = (int)v; break;
		case 't': opt.threads = (int)v; break;
		default: return 2;
		}
	}
	log_set_level(LOG_WARN);
	if (sodium_init() < 0)
		return 1;
	randombytes_buf(opt.key, sizeof(opt.key));
	signal(SIGPIPE, SIG_IGN);

	/* Plain TCP first (fork before libfabric is initialised here). */
	if ((lfd = tcp_listen(opt.port + 2)) < 0) {
		perror("bench_transport: tcp listen");
		return 1;
	}
	if ((pid = fork()) == 0)
		_exit(tcp_server(lfd));
	close(lfd);
	if (tcp_client(opt.port + 2, &tcp_mbps, &tcp_rtt) != 0 || reap(pid)) {
		fprintf(stderr, "bench_transport: plain TCP run failed\n");
		return 1;
	}
	if ((pid = fork()) == 0)
		_exit(ours_server());
	usleep(200000);
	if (ours_client(&ours_mbps, &ours_rtt) != 0 || reap(pid)) {
		fprintf(stderr, "bench_transport: transport run failed\n");
		kill(pid, SIGKILL);
		return 1;
	}
	printf("size %zu\ncount %d\nwindow %d\n", opt.size, opt.count,
	    opt.window);
	printf("tput_ours_MBps %.1f\ntput_tcp_MBps %.1f\n", ours_mbps, tcp_mbps);
	printf("rtt_ours_us %.2f\nrtt_tcp_us %.2f\n", ours_rtt, tcp_rtt);
	return 0;
}
