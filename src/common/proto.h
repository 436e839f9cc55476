/* proto.h -- the host<->agent channel: frames, message types, bounded readers.
 * The wire format is specified in docs/design/agent-protocol.md. */
#ifndef SPACE_PROTO_H
#define SPACE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_HDR_SIZE 12
#define PROTO_MAX_PAYLOAD (64 * 1024)
/* Bytes of output the agent may send beyond the host's last ACK. */
#define PROTO_OUT_WINDOW (256 * 1024)
/* Bytes of stdin the host may send beyond the agent's last STDIN_ACK. */
#define PROTO_IN_WINDOW (256 * 1024)
/* Largest data chunk inside one DATA / STDIN frame. */
#define PROTO_MAX_CHUNK (PROTO_MAX_PAYLOAD - 16)
/* Name of the virtio-serial port the agent looks for. */
#define PROTO_PORT_NAME "space.agent"

/* Header: all integers little-endian.
 *   u32 len   payload bytes that follow (<= PROTO_MAX_PAYLOAD)
 *   u16 type  enum proto_type
 *   u16 flags reserved, 0
 *   u32 chan  0 for the control channel, else a process channel id
 */
struct proto_hdr {
	uint32_t len;
	uint16_t type;
	uint16_t flags;
	uint32_t chan;
};

enum proto_type {
	/* host -> agent */
	H_HELLO = 1,       /* u32 version, u64 realtime_ns */
	H_EXEC = 2,        /* see struct proto_exec */
	H_STDIN = 3,       /* u64 offset, bytes */
	H_STDIN_CLOSE = 4, /* (empty) */
	H_SIGNAL = 5,      /* u32 signo */
	H_ACK = 6,         /* u64 offset: host holds output [0, offset) */
	H_RELEASE = 7,     /* (empty): host recorded the exit; forget chan */
	H_SETTIME = 8,     /* u64 realtime_ns */
	H_SHUTDOWN = 9,    /* u32 mode (PROTO_SHUTDOWN_*) */
	H_PING = 10,       /* u64 cookie */
	H_IDENTITY = 11,   /* see struct proto_identity */
	H_OPEN = 12,       /* u32 kind (enum proto_kind), then that kind's payload: opens a channel */
	H_RESIZE = 13,     /* u16 rows, u16 cols: a PTY channel's window size */

	/* agent -> host */
	A_HELLO = 101,     /* u32 version, u32 nchan, nchan x (u32 chan, u32 state, u64 stdin_offset) */
	A_STARTED = 102,   /* u32 pid */
	A_DATA = 103,      /* u8 stream, u8 pad[7], u64 offset, bytes */
	A_EXIT = 104,      /* u64 final_offset, i32 exit_code (-1 if signalled), i32 signo */
	A_ERROR = 105,     /* i32 errno, string message */
	A_STDIN_ACK = 106, /* u64 offset: agent consumed stdin [0, offset) */
	A_PONG = 107,      /* u64 cookie */
	A_LOG = 108,       /* string */
	A_IDENTITY = 109,  /* u32 applied (PROTO_IDENTITY_* bits), i32 errno of the first failed step */
};

enum proto_stream { PROTO_STDOUT = 1, PROTO_STDERR = 2 };

/* Channel kinds (H_OPEN). Every kind is a child of the agent with the offset/ACK windows of a
 * process channel: output is A_DATA, input H_STDIN, the end A_EXIT (docs/design/channels.md).
 *   PROC:  payload = an H_EXEC payload (H_EXEC is H_OPEN of this kind).
 *   PTY:   u16 rows, u16 cols, then an H_EXEC payload; the process runs on a pseudo-terminal,
 *          whose output is stream 1 (stdout).
 *   FILE:  an H_EXEC payload whose argv is a file operation (argv[0] = "read", "write", "list",
 *          "stat", "mkdir", "remove", "rename", "tar-out", "tar-in"), run by the agent itself
 *          as the requested user; env is ignored.
 *   WATCH: an H_EXEC payload whose argv is "watch PATH [-r]": filesystem events as JSON lines. */
enum proto_kind { PROTO_KIND_PROC = 1, PROTO_KIND_PTY = 2, PROTO_KIND_FILE = 3, PROTO_KIND_WATCH = 4 };
#define PROTO_KIND_MAX 4
/* Channel ids with this bit are the daemon's own (file operations, watches): never stored, so a
 * daemon that finds one without an owner (after a restart, in a fork child or a clone) kills it
 * rather than leave it running detached like a user's process. */
#define PROTO_CHAN_DAEMON 0x80000000u
#define PROTO_PTY_MAX_DIM 1000 /* rows and cols are 1..this */

/* Channel states in A_HELLO. */
enum proto_chan_state { PROTO_CHAN_RUNNING = 1, PROTO_CHAN_EXITED = 2 };

/* H_EXEC flags */
#define PROTO_EXEC_STDIN 0x1 /* give the process a stdin pipe (else /dev/null) */

/* H_EXEC payload:
 *   u32 flags, u32 uid, u32 gid, u32 argc (>=1), u32 envc,
 *   then NUL-terminated strings: user, cwd, argv[0..argc), env[0..envc) ("K=V").
 * A non-empty user is resolved by name in the guest's /etc/passwd and sets
 * uid, gid, HOME, USER, LOGNAME; otherwise uid/gid are used as given.
 * An empty cwd means the user's home (or "/"). */
#define PROTO_EXEC_MAX_ARGS 4096

struct proto_exec {
	uint32_t flags, uid, gid;
	const char *user, *cwd;
	uint32_t argc, envc;
	const char *argv[PROTO_EXEC_MAX_ARGS + 1]; /* NULL-terminated */
	const char *envp[PROTO_EXEC_MAX_ARGS + 1]; /* NULL-terminated */
};

/* H_SHUTDOWN modes. */
#define PROTO_SHUTDOWN_NOW 0   /* SIGKILL everything, reboot (= end the VM) */
#define PROTO_SHUTDOWN_CLEAN 1 /* SIGTERM, grace, SIGKILL, sync, remount / read-only, reboot */

/* H_IDENTITY payload: what a guest cloned, restored or forked from a memory snapshot must not
 * share with its siblings.
 *   u64 realtime_ns (0: leave the clock), u32 entropy_len (0..PROTO_IDENTITY_MAX_ENTROPY),
 *   entropy_len bytes of host randomness, NUL-terminated hostname ("": leave it),
 *   u32 net_len, net_len bytes (reserved for the network configuration; 0 for now).
 * The payload is exactly that long: no trailing bytes. */
#define PROTO_IDENTITY_MAX_ENTROPY 512

struct proto_identity {
	uint64_t realtime_ns;
	uint32_t entropy_len;
	const uint8_t *entropy;
	const char *hostname;
	uint32_t net_len;
	const uint8_t *net;
};

/* A_IDENTITY `applied` bits: the steps the agent actually carried out. */
#define PROTO_IDENTITY_CLOCK 0x1
#define PROTO_IDENTITY_ENTROPY 0x2
#define PROTO_IDENTITY_HOSTNAME 0x4
#define PROTO_IDENTITY_NET 0x8


/* Result of parsing; proto_strerror() turns it into text. */
enum proto_rc {
	PROTO_OK = 0,
	PROTO_NEED_MORE = 1,
	PROTO_E_TOO_BIG = -1,
	PROTO_E_TRUNCATED = -2,
	PROTO_E_NOT_TERMINATED = -3,
	PROTO_E_TOO_MANY = -4,
	PROTO_E_BAD_VALUE = -5,
	PROTO_E_TRAILING = -6,
};
const char *proto_strerror(enum proto_rc rc);

/* Parse a header from buf (n bytes available). PROTO_NEED_MORE if n < 12;
 * PROTO_E_TOO_BIG if hdr->len > PROTO_MAX_PAYLOAD. */
enum proto_rc proto_parse_hdr(const uint8_t *buf, size_t n, struct proto_hdr *hdr);
void proto_put_hdr(uint8_t out[PROTO_HDR_SIZE], uint32_t len, uint16_t type, uint32_t chan);

/* Bounded little-endian reader over a payload. Any read past the end sets
 * `bad` and returns zero/NULL; check `bad` once at the end. */
struct proto_rd {
	const uint8_t *p;
	size_t n;
	bool bad;
};
void proto_rd_init(struct proto_rd *r, const void *p, size_t n);
uint8_t proto_rd_u8(struct proto_rd *r);
uint32_t proto_rd_u32(struct proto_rd *r);
uint64_t proto_rd_u64(struct proto_rd *r);
/* A NUL-terminated string inside the payload (returned pointer into it). */
const char *proto_rd_str(struct proto_rd *r);
/* The next n bytes (pointer into the payload); NULL and `bad` if fewer are left. */
const uint8_t *proto_rd_bytes(struct proto_rd *r, size_t n);
/* The remaining bytes. */
const uint8_t *proto_rd_rest(struct proto_rd *r, size_t *len);

/* Growable writer for building payloads. */
struct proto_wr {
	uint8_t *buf;
	size_t len, cap;
	bool bad; /* allocation failed or payload over PROTO_MAX_PAYLOAD */
};
void proto_wr_init(struct proto_wr *w);
void proto_wr_free(struct proto_wr *w);
void proto_wr_u8(struct proto_wr *w, uint8_t v);
void proto_wr_u32(struct proto_wr *w, uint32_t v);
void proto_wr_u64(struct proto_wr *w, uint64_t v);
void proto_wr_str(struct proto_wr *w, const char *s);
void proto_wr_bytes(struct proto_wr *w, const void *p, size_t n);

/* H_EXEC: encode from a struct / decode into one (pointers into payload). */
int proto_exec_encode(struct proto_wr *w, const struct proto_exec *x);
enum proto_rc proto_exec_decode(const uint8_t *p, size_t n, struct proto_exec *x);

/* H_IDENTITY: encode (-1 if entropy_len is over the maximum or the writer failed).  The
 * agent decodes it (src/agent/identity.c), where the hostname rules live. */
int proto_identity_encode(struct proto_wr *w, const struct proto_identity *id);

/* H_IDENTITY net payload (docs/design/egress.md): u32 version (PROTO_NET_VERSION), u32 addr,
 * u32 prefix_len (1..32), u32 gateway, u32 dns (IPv4, as numbers: 169.254.0.21 = 0xa9fe0015),
 * NUL-terminated ca_pem ("" = none, at most PROTO_NET_MAX_CA bytes). Exactly that long. */
#define PROTO_NET_VERSION 1
#define PROTO_NET_MAX_CA 16384
struct proto_net {
	uint32_t addr, prefix_len, gateway, dns;
	const char *ca_pem;
};
/* -1 if the CA is too long or the writer failed. */
int proto_net_encode(struct proto_wr *w, const struct proto_net *n);
/* PROTO_OK, or why not (pointers into p). */
enum proto_rc proto_net_parse(const uint8_t *p, size_t n, struct proto_net *out);

#endif
