/* kinds.c -- the channel kinds (docs/design/channels.md): the one table that knows them.
 *
 * Every kind is a child of the agent with the machinery of a process channel (proc.c:
 * offsets, windows, exit, release); a kind only decodes its H_OPEN payload and says how its
 * child is started (struct agent_spawn): exec on pipes (process), exec on a pseudo-terminal
 * (pty), or the agent's own file operations as the requested user (file, watch).  msg.c
 * dispatches H_OPEN (and H_EXEC, = kind process) here; nothing else switches on kinds. */
#include <errno.h>
#include <stdlib.h>

#include "agent.h"
#include "fsops.h"

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

enum proto_rc agent_open_parse(const uint8_t *p, size_t n, uint32_t *kind, const uint8_t **rest,
			       size_t *rest_len)
{
	struct proto_rd r;

	proto_rd_init(&r, p, n);
	*kind = proto_rd_u32(&r);
	if (r.bad)
		return PROTO_E_TRUNCATED;
	*rest = proto_rd_rest(&r, rest_len);
	return PROTO_OK;
}

static enum proto_rc size_parse(const uint8_t *p, size_t n, uint16_t *rows, uint16_t *cols)
{
	if (n < 4)
		return PROTO_E_TRUNCATED;
	*rows = get_u16(p);
	*cols = get_u16(p + 2);
	if (*rows < 1 || *rows > PROTO_PTY_MAX_DIM || *cols < 1 || *cols > PROTO_PTY_MAX_DIM)
		return PROTO_E_BAD_VALUE;
	return PROTO_OK;
}

enum proto_rc agent_resize_parse(const uint8_t *p, size_t n, uint16_t *rows, uint16_t *cols)
{
	enum proto_rc rc = size_parse(p, n, rows, cols);

	if (rc == PROTO_OK && n != 4)
		return PROTO_E_TRAILING;
	return rc;
}

enum proto_rc agent_pty_parse(const uint8_t *p, size_t n, uint16_t *rows, uint16_t *cols,
			      const uint8_t **rest, size_t *rest_len)
{
	enum proto_rc rc = size_parse(p, n, rows, cols);

	if (rc != PROTO_OK)
		return rc;
	*rest = p + 4;
	*rest_len = n - 4;
	return PROTO_OK;
}

/* Decode an H_EXEC payload (the tail of every kind's) into a heap struct (it is 64 KiB);
 * NULL after A_ERROR(id, EINVAL or ENOMEM). */
static struct proto_exec *decode_exec(struct agent *a, uint32_t id, const char *kind,
				      const uint8_t *p, size_t n)
{
	struct proto_exec *x = malloc(sizeof(*x));
	enum proto_rc rc;

	if (!x) {
		agent_send_error(a, id, ENOMEM, "%s: out of memory", kind);
		return NULL;
	}
	rc = proto_exec_decode(p, n, x);
	if (rc != PROTO_OK) {
		agent_send_error(a, id, EINVAL, "%s: bad exec payload: %s", kind,
				 proto_strerror(rc));
		free(x);
		return NULL;
	}
	return x;
}

static int spawn(struct agent *a, uint32_t id, struct agent_spawn *s, struct proto_exec *x)
{
	int rc;

	s->x = x;
	rc = agent_proc_spawn(a, id, s);
	free(x);
	return rc;
}

/* process: an H_EXEC payload; exec on pipes, stdin as the flags say. */
static int start_proc(struct agent *a, uint32_t id, const uint8_t *p, size_t n)
{
	struct proto_exec *x = decode_exec(a, id, "exec", p, n);
	struct agent_spawn s = { .kind = "process" };

	if (!x)
		return -1;
	s.stdin_pipe = (x->flags & PROTO_EXEC_STDIN) != 0;
	return spawn(a, id, &s, x);
}

/* pty: u16 rows, u16 cols, then an H_EXEC payload; exec on a new terminal of that size. */
static int start_pty(struct agent *a, uint32_t id, const uint8_t *p, size_t n)
{
	struct agent_spawn s = { .kind = "pty", .pty = true };
	struct proto_exec *x;
	const uint8_t *rest;
	size_t rest_len;
	enum proto_rc rc = agent_pty_parse(p, n, &s.rows, &s.cols, &rest, &rest_len);

	if (rc != PROTO_OK) {
		agent_send_error(a, id, EINVAL, "pty: bad size (rows and cols 1..%u): %s",
				 PROTO_PTY_MAX_DIM, proto_strerror(rc));
		return -1;
	}
	x = decode_exec(a, id, "pty", rest, rest_len);
	if (!x)
		return -1;
	return spawn(a, id, &s, x);
}

/* file, watch: an H_EXEC payload whose argv is the operation, run by fsop_main in the child
 * as the requested user; stdin is always a pipe (write and tar-in read it). */
static int start_fsop(struct agent *a, uint32_t id, const char *kind, const uint8_t *p,
		      size_t n)
{
	struct proto_exec *x = decode_exec(a, id, kind, p, n);
	struct agent_spawn s = { .kind = kind, .stdin_pipe = true, .body = fsop_main };

	if (!x)
		return -1;
	return spawn(a, id, &s, x);
}

static int start_file(struct agent *a, uint32_t id, const uint8_t *p, size_t n)
{
	return start_fsop(a, id, "file", p, n);
}

static int start_watch(struct agent *a, uint32_t id, const uint8_t *p, size_t n)
{
	return start_fsop(a, id, "watch", p, n);
}

static const struct agent_kind kinds[] = {
	{ PROTO_KIND_PROC, "process", start_proc },
	{ PROTO_KIND_PTY, "pty", start_pty },
	{ PROTO_KIND_FILE, "file", start_file },
	{ PROTO_KIND_WATCH, "watch", start_watch },
};

const struct agent_kind *agent_kind_find(uint32_t kind)
{
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].kind == kind)
			return &kinds[i];
	return NULL;
}

int agent_chan_open(struct agent *a, uint32_t id, uint32_t kind, const uint8_t *payload,
		    size_t len)
{
	const struct agent_kind *k = agent_kind_find(kind);

	if (!k) {
		agent_send_error(a, id, EINVAL, "open: unknown channel kind %u", kind);
		return -1;
	}
	return k->start(a, id, payload, len);
}
