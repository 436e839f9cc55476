/* cmd_port_forward.c -- `spacectl port-forward`: local TCP connections (or stdin and stdout) to a
 * sandbox's port, each over a WebSocket tunnel on the data plane opened by the port's token */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "wsc.h"

#define TOKEN_TTL_S 3600

struct tunnel_creds {
	char token[80];
	char url[512];
	time_t renew_at;
};

/* A token for the port, and the tunnel's URL, from the control plane. */
static int creds_get(const struct ctl *c, const char *sb, long port, struct tunnel_creds *cr, space_err *e)
{
	char sub[48];
	json_t *out = NULL, *body = json_pack("{s:i}", "ttl_s", TOKEN_TTL_S);
	int rc = -1;

	snprintf(sub, sizeof(sub), "/ports/%ld/tokens", port);
	_cleanup_free_ char *path = ctl_sandbox_path(sb, sub);
	if (!path || !body) {
		json_decref(body);
		return err_set(e, ENOMEM, "out of memory");
	}
	if (ctl_call(c, "POST", path, body, &out, e) == 0) {
		const char *t = ctl_jstr(out, "token", NULL), *u = ctl_jstr(out, "tunnel_url", NULL);

		if (!t || !u || strlen(t) >= sizeof(cr->token) || strlen(u) >= sizeof(cr->url)) {
			err_set(e, EPROTO, "the control plane's answer has no token and tunnel_url");
		} else {
			snprintf(cr->token, sizeof(cr->token), "%s", t);
			snprintf(cr->url, sizeof(cr->url), "%s", u);
			cr->renew_at = time(NULL) + TOKEN_TTL_S - 120;
			rc = 0;
		}
	}
	json_decref(body);
	json_decref(out);
	return rc;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Bytes both ways until the sandbox's side closes (after the end of our input, it gets an end
 * of file and its answer still comes back): 0,
 * -1 with e set. */
static int bridge(int in, int out, struct wsc *w, space_err *e)
{
	uint8_t buf[65536];
	bool in_open = true;

	for (;;) {
		/* after the end of our input, only the sandbox's side is read, until it closes */
		struct pollfd p[2] = { { .fd = in_open ? in : -1, .events = POLLIN }, { .fd = wsc_fd(w), .events = POLLIN } };
		const uint8_t *msg;
		size_t len;
		int r;

		while ((r = wsc_recv(w, &msg, &len, e)) == 1)
			if (write_all(out, msg, len) < 0)
				return err_sys(e, errno, "writing the sandbox's bytes");
		if (r == -2)
			return 0;
		if (r < 0)
			return -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return err_sys(e, errno, "poll");
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(in, buf, sizeof(buf));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false; /* an empty message: the guest reads an end of file */
				if (wsc_send(w, buf, 0, e) < 0)
					return -1;
				continue;
			}
			if (wsc_send(w, buf, (size_t)n, e) < 0)
				return -1;
		}
	}
}

struct conn_job {
	int fd;
	struct tunnel_creds cr;
	char what[96];
};

static void *conn_main(void *arg)
{
	struct conn_job *j = arg;
	space_err e = { 0 };
	struct wsc *w = wsc_open(j->cr.url, j->cr.token, &e);

	if (!w || bridge(j->fd, j->fd, w, &e) < 0)
		fprintf(stderr, "spacectl port-forward: %s: %s\n", j->what, e.msg);
	wsc_free(w);
	close(j->fd);
	explicit_bzero(j, sizeof(*j));
	free(j);
	return NULL;
}

/* "8080:80" or "80" (the same port here); 0 here: any free one. */
static int parse_ports(const char *s, long *local, long *remote)
{
	const char *colon = strchr(s, ':');
	char l[8];

	if (!colon)
		return ctl_parse_long(s, 1, 65535, remote) < 0 ? -1 : (*local = *remote, 0);
	if ((size_t)(colon - s) >= sizeof(l))
		return -1;
	snprintf(l, sizeof(l), "%.*s", (int)(colon - s), s);
	if (ctl_parse_long(l, 0, 65535, local) < 0 || ctl_parse_long(colon + 1, 1, 65535, remote) < 0)
		return -1;
	return 0;
}

static int listen_on(const char *addr, long port, struct sockaddr_in *sa, space_err *e)
{
	socklen_t sl = sizeof(*sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1) {
		if (fd >= 0)
			close(fd);
		return err_set(e, EINVAL, "--address: not an IPv4 address: %s", addr);
	}
	if (fd < 0)
		return err_sys(e, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)sa, &sl) < 0) {
		int err = errno;

		close(fd);
		return err_sys(e, err, "listening on %s:%ld", addr, port);
	}
	return fd;
}

static int serve(const struct ctl *c, const char *sb, const char *addr, long local, long remote)
{
	struct tunnel_creds cr;
	struct sockaddr_in sa;
	space_err e = { 0 };
	int lfd;

	if (creds_get(c, sb, remote, &cr, &e) < 0) {
		err_wrap(&e, "%s", sb);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	if ((lfd = listen_on(addr, local, &sa, &e)) < 0)
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	printf("Forwarding from %s:%u -> %s:%ld\n", addr, (unsigned)ntohs(sa.sin_port), sb, remote);
	fflush(stdout);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		struct conn_job *j;
		pthread_t th;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			err_sys(&e, errno, "accept");
			break;
		}
		if (time(NULL) >= cr.renew_at && creds_get(c, sb, remote, &cr, &e) < 0) {
			fprintf(stderr, "spacectl port-forward: a new token for %s: %s\n", sb, e.msg);
			err_clear(&e);
			close(fd);
			continue;
		}
		if (!(j = calloc(1, sizeof(*j)))) {
			close(fd);
			continue;
		}
		j->fd = fd;
		j->cr = cr;
		snprintf(j->what, sizeof(j->what), "%s:%ld", sb, remote);
		if (pthread_create(&th, NULL, conn_main, j) != 0) {
			close(fd);
			free(j);
			continue;
		}
		pthread_detach(th);
	}
	close(lfd);
	explicit_bzero(&cr, sizeof(cr));
	return ctl_fail(c, &e, CTL_EXIT_FAIL);
}

static int stdio(const struct ctl *c, const char *sb, long port)
{
	struct tunnel_creds cr;
	space_err e = { 0 };
	struct wsc *w;
	int rc;

	if (creds_get(c, sb, port, &cr, &e) < 0) {
		err_wrap(&e, "%s", sb);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	w = wsc_open(cr.url, cr.token, &e);
	explicit_bzero(&cr, sizeof(cr));
	if (!w) {
		err_wrap(&e, "%s:%ld", sb, port);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	rc = bridge(0, 1, w, &e);
	wsc_free(w);
	if (rc < 0) {
		err_wrap(&e, "%s:%ld", sb, port);
		return ctl_fail(c, &e, CTL_EXIT_FAIL);
	}
	return CTL_EXIT_OK;
}

static int run(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "stdio", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct ctl_verb *v = &ctl_verb_port_forward;
	const char *addr = "127.0.0.1";
	bool use_stdio = false;
	long local = 0, remote = 0;
	int opt, st;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'a')
			addr = optarg;
		else if (opt == 's')
			use_stdio = true;
		else if ((st = ctl_common_opt(c, v, opt)) >= 0)
			return st;
	}
	if (argc - optind != 2)
		return ctl_usage_error(v, "want a sandbox id and [LOCAL:]REMOTE");
	if (use_stdio) {
		if (ctl_parse_long(argv[optind + 1], 1, 65535, &remote) < 0)
			return ctl_usage_error(v, "--stdio: not a port (1..65535): '%s'", argv[optind + 1]);
		signal(SIGPIPE, SIG_IGN);
		return stdio(c, argv[optind], remote);
	}
	if (parse_ports(argv[optind + 1], &local, &remote) < 0)
		return ctl_usage_error(v, "want [LOCAL:]REMOTE ports (1..65535; LOCAL 0: any free one), not '%s'",
				       argv[optind + 1]);
	signal(SIGPIPE, SIG_IGN);
	return serve(c, argv[optind], addr, local, remote);
}

const struct ctl_verb ctl_verb_port_forward = {
	.name = "port-forward",
	.usage = "[--address ADDR] ID [LOCAL:]REMOTE | --stdio ID PORT",
	.summary = "forward local TCP connections (or stdin/stdout) to a sandbox's port",
	.help = "Listens on ADDR:LOCAL (default 127.0.0.1; LOCAL 0: any free port, printed) and carries each\n"
		"connection to REMOTE in the sandbox over a WebSocket tunnel on the data plane, opened by a\n"
		"token for that port (renewed every hour). Runs until interrupted.\n"
		"--stdio carries one connection on stdin and stdout, for ssh:\n"
		"  ssh -o ProxyCommand='spacectl port-forward --stdio SB 22' user@sandbox\n",
	.run = run,
};
