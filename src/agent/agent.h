/* agent.h -- space-agent's shared state: the host channel, process channels, the event loop */
#ifndef SPACE_AGENT_H
#define SPACE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "outbuf.h"
#include "proto.h"

/* Limits.  Every buffer the agent holds is bounded by one of these. */
#define AGENT_MAX_CHANS 1024
/* Bytes of output held over all channels (each also <= PROTO_OUT_WINDOW): keeps a guest
 * with many chatty processes and a slow host from spending its memory on the agent. */
#define AGENT_OUT_BUDGET (16u << 20)
/* Outgoing control frames (A_HELLO, A_PONG, A_LOG, errors) queued at most; above it the
 * agent stops reading the port until the host reads (A_LOG is dropped instead). */
#define AGENT_CTLQ_MAX (256u << 10)
/* Bytes assembled for the port at once. */
#define AGENT_WBUF_SIZE (PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD) * 2
/* How often a disconnected or missing port is looked at again. */
#define AGENT_RETRY_MS 100
/* After the main process exits, how long descendants may keep its pipes open (see proc.c). */
#define AGENT_EXIT_GRACE_MS 1000
#define AGENT_EXIT_DRAIN_MAX (1u << 20)
/* H_SHUTDOWN clean: how long processes get between SIGTERM and SIGKILL. */
#define AGENT_SHUTDOWN_GRACE_MS 3000

/* What an epoll event refers to (epoll_event.data.ptr points at one of these). */
enum agent_watch_kind { W_PORT, W_SIGNAL, W_STATUS, W_STDOUT, W_STDERR, W_STDIN };

struct agent_proc;
struct agent_watch {
	enum agent_watch_kind kind;
	struct agent_proc *proc; /* NULL for port/signal */
	int fd;
	uint32_t events; /* currently registered interest, 0 = not in epoll */
};

enum agent_proc_state {
	P_STARTING, /* forked, waiting for the exec status pipe */
	P_RUNNING,  /* exec succeeded (A_STARTED due or sent) */
	P_DONE,     /* exited, pipes closed: A_EXIT due or sent, kept until H_RELEASE */
	P_FREED,    /* released or failed: freed before the loop sleeps */
};

/* One process channel. */
struct agent_proc {
	uint32_t id;
	enum agent_proc_state state;
	pid_t pid;
	bool reaped;
	int status; /* waitpid status, valid when reaped */
	int64_t exited_at_ms, grace_until_ms; /* monotonic; grace 0 = not in grace */
	bool grace_over;
	uint64_t drained_after_grace[2];
	char argv0[64];

	struct agent_watch w_status, w_out, w_err, w_in;
	struct agent_obuf out;
	struct agent_ibuf in;
	bool has_stdin;       /* the process was given a stdin pipe */
	bool stdin_close;     /* H_STDIN_CLOSE received: close after the buffer drains */
	/* A pseudo-terminal channel: w_out is the master (all output is stdout), w_in a dup()
	 * of it (epoll takes an fd once); H_STDIN_CLOSE writes the terminal's EOF character
	 * instead of closing, and H_RESIZE applies. */
	bool pty;
	bool eof_sent;        /* pty: that EOF character has been written */

	/* What the host must still be told (regenerated after a reconnect). */
	bool started_sent, exit_sent;
	uint64_t stdin_ack_sent;
	bool stdin_ack_forced;

	struct agent_proc *next, *prev;           /* all channels */
	struct agent_proc *pnext, *pprev;         /* channels with frames to send */
	bool pending;
};

struct agent_ctl {
	struct agent_ctl *next;
	size_t len;
	uint8_t data[]; /* a whole frame */
};

enum agent_port_kind { PORT_NONE, PORT_DEV, PORT_SOCK };

/* The connection to the host: the virtio-serial port, or a unix socket in tests. */
struct agent_port {
	enum agent_port_kind kind;
	char path[256];      /* device or socket path; empty: discover the virtio port */
	struct agent_watch w;
	bool up;             /* the host is connected (as far as we can tell) */
	bool hello;          /* H_HELLO received on this connection: channel frames may flow */
	bool desync;         /* framing lost: discard input until an H_HELLO header */
	int64_t retry_at_ms; /* when down: next look */
	bool missing_logged;

	uint8_t inbuf[PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD];
	size_t inlen;

	uint8_t wbuf[AGENT_WBUF_SIZE];
	size_t wlen, woff; /* [woff, wlen) still to write */

	struct agent_ctl *ctl_head, *ctl_tail;
	size_t ctl_bytes;
};

struct agent {
	bool pid1;
	bool net_ca; /* the sandbox's CA is in the trust store: children get AGENT_CA_ENV */
	/* The CA of the last H_IDENTITY, to install before the next frame is read
	 * (agent_net_finish; "" takes it out; NULL: nothing pending). */
	char *ca_pending;
	/* The link, route and resolver this agent last set in full (every step succeeded):
	 * a clone, fork or restore of that guest has them already, and skips those steps. */
	bool net_set;
	uint32_t net_addr, net_prefix, net_gateway, net_dns;
	bool set_clock;
	bool quit;
	int epfd;
	struct agent_watch w_sig;
	struct agent_port port;

	struct agent_proc *procs;
	unsigned nprocs;
	struct agent_proc *pend_head, *pend_tail;
	struct agent_proc *dead; /* released, freed before the loop sleeps */
	size_t out_held;      /* sum of channels' held output */
	bool budget_blocked;  /* some channel stopped reading for lack of AGENT_OUT_BUDGET */
	unsigned in_grace;    /* channels whose grace timer runs */
	struct rlimit nofile; /* the limit children get back (the agent raises its own) */

	/* Log rate limiting (the console may be a slow serial port). */
	int64_t log_window_ms;
	unsigned log_count, log_dropped;

	uint8_t scratch[PROTO_HDR_SIZE + PROTO_MAX_PAYLOAD];
};

/* loop.c */
int64_t agent_now_ms(void);
int agent_watch_set(struct agent *a, struct agent_watch *w, uint32_t events);
void agent_watch_close(struct agent *a, struct agent_watch *w);
int agent_loop_init(struct agent *a);
int agent_run(struct agent *a);

/* log (loop.c): console line, plus an A_LOG to the host when `to_host`. */
void agent_log(struct agent *a, bool to_host, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* chan.c: the host channel */
void agent_port_init(struct agent *a, const char *path);
void agent_port_poll_retry(struct agent *a);
void agent_port_event(struct agent *a, uint32_t events);
void agent_port_flush(struct agent *a);
/* Queue a control frame; drop_if_full: drop (rather than exceed AGENT_CTLQ_MAX). */
int agent_ctl_send(struct agent *a, uint16_t type, uint32_t chan, const void *payload,
		   size_t len, bool drop_if_full);
void agent_send_error(struct agent *a, uint32_t chan, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Framing of the incoming stream, separate from I/O for tests: consume whole frames from
 * buf[0..*len), calling fn for each; handles desync (see agent-protocol.md).  Returns
 * the number of frames delivered. */
typedef void (*agent_frame_fn)(void *ctx, const struct proto_hdr *h, const uint8_t *payload);
typedef void (*agent_badframe_fn)(void *ctx, enum proto_rc rc);
unsigned agent_deframe(uint8_t *buf, size_t *len, bool *desync, agent_frame_fn fn,
		       agent_badframe_fn bad, void *ctx);

/* msg.c: host messages */
void agent_handle_frame(void *ctx, const struct proto_hdr *h, const uint8_t *payload);
void agent_handle_badframe(void *ctx, enum proto_rc rc);
/* Emit one frame of p's pending output into out (at most cap bytes); returns its length,
 * 0 when p has nothing more to send. */
size_t agent_proc_next_frame(struct agent *a, struct agent_proc *p, uint8_t *out, size_t cap);

/* kinds.c: the channel kinds (docs/design/channels.md).  The only place that knows them:
 * each kind decodes its H_OPEN payload and describes its child (struct agent_spawn). */
struct agent_kind {
	uint32_t kind; /* enum proto_kind */
	const char *name;
	/* Decode the kind's payload and start channel id; on failure A_ERROR(id, errno) has
	 * been sent and the channel does not exist.  0 or -1. */
	int (*start)(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);
};
/* The table entry of a kind; NULL if unknown. */
const struct agent_kind *agent_kind_find(uint32_t kind);
/* Open channel id of that kind (H_OPEN, and H_EXEC = kind PROTO_KIND_PROC): an unknown kind
 * or a malformed payload is A_ERROR(id, EINVAL).  0 or -1. */
int agent_chan_open(struct agent *a, uint32_t id, uint32_t kind, const uint8_t *payload,
		    size_t len);
/* Pure payload parsers (pointers into p).  H_OPEN: u32 kind, then the rest (any length).
 * H_RESIZE: exactly u16 rows, u16 cols, each 1..PROTO_PTY_MAX_DIM.  PTY payload: the same
 * two u16 then an H_EXEC payload (the rest). */
enum proto_rc agent_open_parse(const uint8_t *p, size_t n, uint32_t *kind, const uint8_t **rest,
			       size_t *rest_len);
enum proto_rc agent_resize_parse(const uint8_t *p, size_t n, uint16_t *rows, uint16_t *cols);
enum proto_rc agent_pty_parse(const uint8_t *p, size_t n, uint16_t *rows, uint16_t *cols,
			      const uint8_t **rest, size_t *rest_len);

/* TERM a PTY child gets when its env has none. */
#define AGENT_PTY_TERM "xterm-256color"

/* How a channel's child is started (filled in by its kind, kinds.c). */
struct agent_spawn {
	const struct proto_exec *x;
	const char *kind;  /* name, for logs */
	bool stdin_pipe;   /* a stdin pipe, else /dev/null (a PTY always takes input) */
	bool pty;          /* on a new pseudo-terminal of rows x cols, else pipes */
	uint16_t rows, cols;
	/* NULL: exec x->argv.  Else the child calls it with x->argv (after the user switch and
	 * chdir, with the status pipe closed = "started") and _exit()s with its result. */
	int (*body)(int argc, char *const argv[]);
};

/* proc.c: process channels */
struct agent_proc *agent_proc_find(struct agent *a, uint32_t id);
/* Fork the child of channel id; on failure A_ERROR(id) is sent.  0 or -1. */
int agent_proc_spawn(struct agent *a, uint32_t id, const struct agent_spawn *s);
/* H_RESIZE: TIOCSWINSZ on a PTY channel's master; -1 (errno EINVAL: not a PTY, or no
 * terminal any more) otherwise. */
int agent_proc_resize(struct agent *a, struct agent_proc *p, uint16_t rows, uint16_t cols);
void agent_proc_event(struct agent *a, struct agent_watch *w, uint32_t events);
void agent_proc_reap(struct agent *a);
void agent_proc_ack(struct agent *a, struct agent_proc *p, uint64_t off);
void agent_proc_stdin(struct agent *a, struct agent_proc *p, uint64_t off, const uint8_t *d,
		      size_t n);
void agent_proc_stdin_close(struct agent *a, struct agent_proc *p);
int agent_proc_signal(struct agent *a, struct agent_proc *p, int signo);
void agent_proc_release(struct agent *a, struct agent_proc *p);
void agent_proc_rewind_all(struct agent *a);
void agent_proc_timers(struct agent *a, int64_t now, int64_t *next);
void agent_proc_mark_pending(struct agent *a, struct agent_proc *p);
void agent_proc_free_dead(struct agent *a);
/* Signal the process group of every channel whose process has not been reaped. */
void agent_proc_signal_all(struct agent *a, int signo);
void agent_proc_rearm_budget(struct agent *a);

/* spawn.c: the child side of a channel */
struct proto_exec;
struct agent_user;
/* Build the environment: envp, plus HOME/USER/LOGNAME from u and a default PATH when
 * absent, with net_ca the CA variables (SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
 * CURL_CA_BUNDLE = AGENT_CA_BUNDLE, NODE_EXTRA_CA_CERTS = AGENT_CA_FILE) the session does not
 * set, and TERM=term when term is not NULL and envp has no TERM.  Returns a malloc'ed
 * NULL-terminated array (strings point into envp or are malloc'ed), NULL on allocation
 * failure. */
char **agent_build_env(const char *const *envp, const struct agent_user *u, bool net_ca,
		       const char *term);
/* execvp semantics with PATH taken from env (not the agent's own); returns errno. */
int agent_execvpe(const char *file, char *const argv[], char *const env[]);
/* What the forked child gets. */
struct agent_child {
	const struct proto_exec *x;
	int in, out, err; /* pipes: stdin read end (-1: /dev/null), stdout and stderr write ends */
	int tty;          /* a PTY's slave (then in/out/err are unused), or -1 */
	int status;       /* status pipe: i32 errno + message on failure, closed on success */
	int (*body)(int argc, char *const argv[]); /* NULL: exec (struct agent_spawn) */
};
/* In the forked child: session, stdio, user, cwd, then exec or body; never returns. */
void agent_child_start(const struct agent *a, const struct agent_child *c)
	__attribute__((noreturn));

/* init.c: PID-1 duties */
void agent_init_system(struct agent *a);
/* Letters, digits, '-' and '.', 1..63 bytes, not starting with '-' or '.'. */
bool agent_valid_hostname(const char *h);
bool agent_cmdline_get(const char *cmdline, const char *key, char *out, size_t outlen);
int agent_set_clock(struct agent *a, uint64_t realtime_ns);

/* shutdown.c: the end of the VM, or of a host test run.  mode: PROTO_SHUTDOWN_NOW, or
 * PROTO_SHUTDOWN_CLEAN (SIGTERM and a grace period first, / read-only before the reset). */
void agent_poweroff(struct agent *a, uint32_t mode) __attribute__((noreturn));


/* net.c: the H_IDENTITY net payload (docs/design/egress.md) */
#define AGENT_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define AGENT_CA_FILE "/usr/local/share/ca-certificates/space-egress.crt"
/* PID 1 only: lo and eth0 up, eth0's address, default route, IPv6 off, /etc/resolv.conf (all
 * skipped when this guest set the same ones already: a->net_set); the CA (installed, or taken
 * out when ca_pem is "") is left pending for agent_net_finish (installed here only when no copy
 * of it could be kept). Every step is tried; -1 with errno of the first that failed. */
int agent_net_apply(struct agent *a, const struct proto_net *n);
/* The CA agent_net_apply left pending, installed (sets a->net_ca; a failure is logged to the
 * host): from the loop after its answer went out, before anything else is read. */
void agent_net_finish(struct agent *a);
/* SIOCGIFFLAGS then SIOCSIFFLAGS with IFF_UP on an AF_INET socket. */
int agent_net_link_up(int fd, const char *ifname);
/* The pure and path-parameterized parts (root "" in the guest, a scratch dir in tests):
 * bundle without any "# space-egress-ca begin".."end" block, then the block for ca_pem
 * appended unless ca_pem is "" or NULL (bundle NULL: none); malloc'ed. */
char *agent_net_bundle_replace(const char *bundle, const char *ca_pem);
/* tmp file beside path, then rename(); errno on -1. */
int agent_net_write_atomic(const char *path, const char *data, size_t len, mode_t mode);
/* root + AGENT_CA_FILE (mkdir -p) and the block in root + AGENT_CA_BUNDLE (created if
 * absent); "" removes both (no bundle is then left alone). in_place: files that exist are
 * overwritten where they are (same inode, from the first byte that changes) instead of
 * replaced by a renamed copy: only while nobody can be reading them. */
int agent_net_install_ca(const char *root, const char *ca_pem, bool in_place);
/* root/etc/resolv.conf = "nameserver <dns>\noptions timeout:2 attempts:2\n". */
int agent_net_write_resolv(const char *root, uint32_t dns);

/* identity.c: H_IDENTITY */
/* Decode and check a payload (pure; pointers into p): exact length, entropy_len at most
 * PROTO_IDENTITY_MAX_ENTROPY, hostname empty or agent_valid_hostname(). */
enum proto_rc agent_identity_parse(const uint8_t *p, size_t n, struct proto_identity *id);
/* Apply a payload and answer A_IDENTITY; a malformed one is logged and dropped. */
void agent_identity_handle(struct agent *a, const uint8_t *payload, size_t len);

#endif
