/* kinds.c -- the kinds of session channel (docs/design/channels.md): which agent kind each is
 * and the frame that opens it. The one place the daemon tells kinds apart when starting one. */
#include "proto.h"
#include "runtime.h"

struct sess_kind_def {
	uint32_t proto_kind;
	/* What comes between the u32 kind and the H_EXEC payload. */
	void (*prefix)(const struct session *s, struct proto_wr *w);
};

static void pty_prefix(const struct session *s, struct proto_wr *w)
{
	uint16_t rows = s->rec.pty_rows, cols = s->rec.pty_cols;

	proto_wr_bytes(w, (uint8_t[]){ rows & 0xff, rows >> 8, cols & 0xff, cols >> 8 }, 4);
}

static const struct sess_kind_def kinds[SESS_KIND__COUNT] = {
	[SESS_KIND_PROCESS] = { PROTO_KIND_PROC, NULL },
	[SESS_KIND_PTY] = { PROTO_KIND_PTY, pty_prefix },
	[SESS_KIND_FILE] = { PROTO_KIND_FILE, NULL },
	[SESS_KIND_WATCH] = { PROTO_KIND_WATCH, NULL },
};

int session_open_encode(const struct session *s, struct proto_wr *w, uint16_t *type)
{
	const struct sess_kind_def *k;

	if ((unsigned)s->rec.kind >= SESS_KIND__COUNT)
		return -1;
	k = &kinds[s->rec.kind];
	if (type)
		*type = k->proto_kind == PROTO_KIND_PROC ? H_EXEC : H_OPEN;
	if (k->proto_kind != PROTO_KIND_PROC) {
		proto_wr_u32(w, k->proto_kind);
		if (k->prefix)
			k->prefix(s, w);
	}
	if (session_exec_encode(s, w) < 0)
		return -1;
	return w->bad ? -1 : 0;
}
