/* ports.c -- a sandbox's ports as the world reaches them: public marks, port tokens, the
 * access check, what listens in the guest (ports.h; docs/design/ports.md) */
#include "ports.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "runtime.h"
#include "spec.h"
#include "store/store.h"

#define MARK_ALL "public:*"
#define NEVER INT64_MAX

/* The public marks of a sandbox this process holds, once read from the store. */
struct port_set {
	bool loaded;
	bool all;
	uint16_t v[PORT_PUBLIC_MAX];
	size_t n;
	uint64_t gen; /* bumped by every change: a read begun before one is stale */
};

int port_parse(const char *s, size_t n)
{
	int v = 0;

	if (n == 0 || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535 && s[0] != '0' ? v : -1;
}

static void scope_port(char out[16], uint16_t port)
{
	snprintf(out, 16, "port:%u", (unsigned)port);
}

static void scope_mark(char out[16], uint16_t port)
{
	if (port)
		snprintf(out, 16, "public:%u", (unsigned)port);
	else
		snprintf(out, 16, "%s", MARK_ALL);
}

/* A mark's row key: no token hashes to it that the check would take for a port token (its
 * scope is never "port:N"), and it is the same on every process. */
static void mark_key(const char *sb_id, uint16_t port, char out[65])
{
	char in[96];

	snprintf(in, sizeof(in), "space public port %s %u", sb_id, (unsigned)port);
	token_sha256_hex(in, out);
}

/* "public:8000" -> 8000, "public:*" -> 0; -1 if it is not a mark. */
static int mark_port(const char *scope)
{
	if (strcmp(scope, MARK_ALL) == 0)
		return 0;
	if (strncmp(scope, "public:", 7) != 0)
		return -1;
	return port_parse(scope + 7, strlen(scope + 7));
}

static struct port_set *set_of(struct sandbox *sb)
{
	if (!sb->ports)
		sb->ports = calloc(1, sizeof(*sb->ports));
	return sb->ports;
}

void port_traffic(struct spaced *d, const char *sb_id, int delta)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (!sb)
		return;
	sb->port_conns += delta;
	if (sb->port_conns < 0)
		sb->port_conns = 0;
	sb->active_ms = now_ms();
}

void ports_free(struct sandbox *sb)
{
	free(sb->ports);
	sb->ports = NULL;
}

static bool set_has(const struct port_set *s, uint16_t port)
{
	if (s->all)
		return true;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == port)
			return true;
	return false;
}

static void set_put(struct port_set *s, uint16_t port, bool on)
{
	if (port == 0) {
		s->all = on;
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i] != port)
			continue;
		if (!on)
			s->v[i] = s->v[--s->n];
		return;
	}
	if (on && s->n < PORT_PUBLIC_MAX)
		s->v[s->n++] = port;
}

/* ---- the check ---- */

static struct sandbox *visible(struct spaced *d, const char *sb_id, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (!sb || !sandbox_visible(&sb->rec) || sb->rec.role != ROLE_USER) {
		err_set(err, ENOENT, "no sandbox '%.64s'", sb_id);
		return NULL;
	}
	return sb;
}

static int refused(const struct port_check *pc, space_err *err)
{
	if (pc->cred_err.code)
		return err_set(err, EACCES, "%s", pc->cred_err.msg);
	return err_set(err, EACCES,
		       "port %u of sandbox %s is private: send a token from POST /v1/sandboxes/%s/ports/%u/tokens "
		       "(X-Space-Token header, or ?space_token= once in a browser)",
		       (unsigned)pc->port, pc->sb_id, pc->sb_id, (unsigned)pc->port);
}

int port_check_begin(struct spaced *d, const char *sb_id, uint16_t port, const struct port_cred *cred,
		     struct port_check *pc, space_err *err)
{
	struct sandbox *sb = visible(d, sb_id, err);
	struct port_set *s;
	const char *token = cred->token ? cred->token : cred->traffic;
	int rc = -1;

	memset(pc, 0, sizeof(*pc));
	if (!sb)
		return -1;
	if (!(s = set_of(sb)))
		return err_set(err, ENOMEM, "out of memory");
	snprintf(pc->sb_id, sizeof(pc->sb_id), "%s", sb->rec.id);
	pc->port = port;
	pc->gen = s->gen;
	if (s->loaded && set_has(s, port))
		return 0;
	if (token) {
		if (cred->token)
			scope_port(pc->scope, port);
		else
			snprintf(pc->scope, sizeof(pc->scope), "%s", TOKEN_SCOPE_ENVD);
		rc = token_check(d, sb->rec.id, pc->scope, token, &pc->row, &pc->cred_err);
		if (rc == 0)
			return 0;
		pc->need_row = rc == 1;
	}
	pc->need_marks = !s->loaded;
	if (pc->need_row || pc->need_marks)
		return 1;
	return refused(pc, err);
}

static int mark_row(const char *hash, const char *scope, int64_t expires_ms, void *arg)
{
	struct port_check *pc = arg;
	int p = mark_port(scope);

	(void)hash;
	(void)expires_ms;
	if (p == 0)
		pc->all = true;
	else if (p > 0 && pc->nmarks < PORT_PUBLIC_MAX)
		pc->marks[pc->nmarks++] = (uint16_t)p;
	return 0;
}

void port_check_read(struct store *conn, void *arg)
{
	struct port_check *pc = arg;
	space_err err = { 0 };

	if (pc->need_marks) {
		pc->marks_rc = store_tokens_each(conn, pc->sb_id, mark_row, pc, &err);
		if (pc->marks_rc < 0)
			log_warn("ports: reading sandbox %s's public ports: %s", pc->sb_id, err.msg);
	}
	if (pc->need_row)
		token_read(conn, &pc->row);
}

int port_check_verdict(struct spaced *d, struct port_check *pc, space_err *err)
{
	struct sandbox *sb = visible(d, pc->sb_id, err);
	struct port_set *s;

	if (!sb)
		return -1;
	if (!(s = set_of(sb)))
		return err_set(err, ENOMEM, "out of memory");
	if (pc->need_marks && pc->marks_rc == 0 && !s->loaded && s->gen == pc->gen) {
		s->all = pc->all;
		memcpy(s->v, pc->marks, sizeof(pc->marks));
		s->n = pc->nmarks;
		s->loaded = true;
	}
	if ((s->loaded && set_has(s, pc->port)) || pc->all)
		return 0;
	for (size_t i = 0; i < pc->nmarks; i++)
		if (pc->marks[i] == pc->port)
			return 0;
	if (pc->need_row) {
		err_clear(&pc->cred_err);
		if (token_verdict(d, pc->sb_id, pc->scope, &pc->row, &pc->cred_err) == 0)
			return 0;
	}
	if (pc->need_marks && pc->marks_rc < 0)
		return err_set(err, EAGAIN, "the store could not be read; retry");
	return refused(pc, err);
}

int port_ready(struct spaced *d, const char *sb_id, space_err *err)
{
	struct sandbox *sb = visible(d, sb_id, err);
	struct sandbox_rec rec = { 0 };
	struct op_rec op = { 0 };
	int rc;

	if (!sb)
		return -1;
	switch (sb->rec.state) {
	case SB_RUNNING:
		return 0;
	case SB_PAUSED:
	case SB_SUSPENDED:
		/* traffic wakes it, as E2B's auto-resume does; a stopped one stays stopped */
		rc = sandbox_wake(d, sb_id, &rec, &op, err);
		if (rc == 0)
			log_info("sandbox %s: woken by traffic to its ports (operation %s)", sb_id, op.id);
		sandbox_rec_clear(&rec);
		op_rec_clear(&op);
		if (rc < 0 && err->code != EBUSY)
			return -1;
		err_clear(err);
		return 1;
	case SB_CREATING:
	case SB_PAUSING:
	case SB_SUSPENDING:
	case SB_RESTORING:
		return 1; /* on its way to running, or to a state a wake starts from */
	default:
		return err_set(err, EAGAIN, "sandbox %s is %s: its ports answer while it runs", sb_id,
			       sb_state_name(sb->rec.state));
	}
}

bool port_still_open(struct spaced *d, const char *sb_id, uint16_t port, const struct port_cred *cred)
{
	space_err err = { 0 };
	struct sandbox *sb = visible(d, sb_id, &err);
	const char *token = cred->token ? cred->token : cred->traffic;
	struct token_row row;
	char scope[16];

	if (!sb)
		return false;
	if (sb->ports && sb->ports->loaded && set_has(sb->ports, port))
		return true;
	if (!token)
		return false;
	if (cred->token)
		scope_port(scope, port);
	else
		snprintf(scope, sizeof(scope), "%s", TOKEN_SCOPE_ENVD);
	return token_check(d, sb->rec.id, scope, token, &row, &err) == 0;
}

/* ---- changes ---- */

int port_token_issue(struct spaced *d, const char *sb_id, uint16_t port, int ttl_s, char token[65],
		     char id[PORT_TOKEN_ID_LEN + 1], int64_t *expires_ms, space_err *err)
{
	char scope[16], hash[65];

	if (!visible(d, sb_id, err))
		return -1;
	if (ttl_s > SPEC_TOKEN_TTL_MAX)
		return err_set(err, EINVAL, "ttl_s must be at most %d", SPEC_TOKEN_TTL_MAX);
	scope_port(scope, port);
	if (token_issue(d, sb_id, scope, ttl_s > 0 ? ttl_s : d->cfg.token_ttl_s, token, expires_ms, err) < 0)
		return -1;
	token_sha256_hex(token, hash);
	snprintf(id, PORT_TOKEN_ID_LEN + 1, "%.*s", PORT_TOKEN_ID_LEN, hash);
	return 0;
}

struct mark_write {
	char key[65], sb_id[ID_LEN], scope[16];
	bool on;
};

static void write_mark(struct store *conn, void *arg)
{
	struct mark_write *w = arg;
	space_err err = { 0 };

	if (store_token_delete(conn, w->key, &err) < 0 && err.code != ENOENT)
		log_warn("ports: sandbox %s, %s: %s", w->sb_id, w->scope, err.msg);
	err_clear(&err);
	if (w->on && store_token_put(conn, w->key, w->sb_id, w->scope, NEVER, &err) < 0)
		log_warn("ports: sandbox %s, %s: %s (it holds on this process only)", w->sb_id, w->scope, err.msg);
}

static void mark_written(void *arg, bool ran)
{
	(void)ran;
	free(arg);
}

int port_set_public(struct spaced *d, const char *sb_id, uint16_t port, bool public, space_err *err)
{
	struct sandbox *sb = visible(d, sb_id, err);
	struct port_set *s;
	struct mark_write *w;

	if (!sb)
		return -1;
	if (!(s = set_of(sb)) || !(w = calloc(1, sizeof(*w))))
		return err_set(err, ENOMEM, "out of memory");
	if (public && port && s->loaded && !set_has(s, port) && s->n >= PORT_PUBLIC_MAX) {
		free(w);
		return err_set(err, EINVAL, "at most %d ports of one sandbox can be public", PORT_PUBLIC_MAX);
	}
	mark_key(sb->rec.id, port, w->key);
	snprintf(w->sb_id, sizeof(w->sb_id), "%s", sb->rec.id);
	scope_mark(w->scope, port);
	w->on = public;
	if (store_async(d->store, write_mark, mark_written, w, err) < 0) {
		free(w);
		return -1;
	}
	set_put(s, port, public);
	s->gen++;
	return 0;
}

int port_revoke_begin(struct spaced *d, const char *sb_id, uint16_t port, const char *id, struct port_revoke *pr,
		      space_err *err)
{
	size_t n = id ? strlen(id) : 0;

	memset(pr, 0, sizeof(*pr));
	if (!visible(d, sb_id, err))
		return -1;
	if (id && (n != PORT_TOKEN_ID_LEN || strspn(id, "0123456789abcdef") != n))
		return err_set(err, EINVAL, "a token id is %d lowercase hex digits (what creating it answered)",
			       PORT_TOKEN_ID_LEN);
	snprintf(pr->sb_id, sizeof(pr->sb_id), "%s", sb_id);
	scope_port(pr->scope, port);
	snprintf(pr->id, sizeof(pr->id), "%s", id ? id : "");
	return token_forget_where(d, sb_id, pr->scope, n ? id : NULL);
}

struct hashes {
	const struct port_revoke *pr;
	char (*v)[65];
	size_t n, cap;
};

static int revoke_row(const char *hash, const char *scope, int64_t expires_ms, void *arg)
{
	struct hashes *h = arg;

	(void)expires_ms;
	if (strcmp(scope, h->pr->scope) != 0 || (h->pr->id[0] && strncmp(hash, h->pr->id, PORT_TOKEN_ID_LEN) != 0))
		return 0;
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 16;
		void *v = realloc(h->v, cap * sizeof(*h->v));

		if (!v)
			return -1;
		h->v = v;
		h->cap = cap;
	}
	snprintf(h->v[h->n++], 65, "%s", hash);
	return 0;
}

void port_revoke_read(struct store *conn, void *arg)
{
	struct port_revoke *pr = arg;
	struct hashes h = { .pr = pr };

	pr->rc = store_tokens_each(conn, pr->sb_id, revoke_row, &h, &pr->err);
	if (pr->rc > 0)
		pr->rc = err_set(&pr->err, ENOMEM, "out of memory");
	for (size_t i = 0; pr->rc == 0 && i < h.n; i++) {
		if (store_token_delete(conn, h.v[i], &pr->err) == 0)
			pr->deleted++;
		else if (pr->err.code != ENOENT)
			pr->rc = -1;
		else
			err_clear(&pr->err);
	}
	if (h.v)
		OPENSSL_cleanse(h.v, h.cap * sizeof(*h.v));
	free(h.v);
}

/* ---- what is exposed ---- */

static json_t *port_entry(json_t *ports, int port)
{
	char key[8];
	json_t *e;

	snprintf(key, sizeof(key), "%d", port);
	if ((e = json_object_get(ports, key)))
		return e;
	e = json_pack("{s:b,s:i}", "public", 0, "tokens", 0);
	if (!e || json_object_set_new(ports, key, e) < 0)
		return NULL;
	return e;
}

static int exposed_row(const char *hash, const char *scope, int64_t expires_ms, void *arg)
{
	json_t *o = arg, *ports = json_object_get(o, "ports"), *e;
	int p = mark_port(scope);

	(void)hash;
	if (p == 0)
		return json_object_set_new(o, "public_all", json_true()) < 0 ? -1 : 0;
	if (p > 0)
		return (e = port_entry(ports, p)) && json_object_set_new(e, "public", json_true()) == 0 ? 0 : -1;
	if (strncmp(scope, "port:", 5) != 0 || (p = port_parse(scope + 5, strlen(scope + 5))) < 0 ||
	    expires_ms <= now_ms())
		return 0;
	if (!(e = port_entry(ports, p)))
		return -1;
	return json_object_set_new(e, "tokens", json_integer(json_integer_value(json_object_get(e, "tokens")) + 1));
}

void port_exposed_read(struct store *conn, void *arg)
{
	struct port_exposed *x = arg;

	x->out = json_pack("{s:b,s:{}}", "public_all", 0, "ports");
	if (!x->out) {
		x->rc = err_set(&x->err, ENOMEM, "out of memory");
		return;
	}
	x->rc = store_tokens_each(conn, x->sb_id, exposed_row, x->out, &x->err);
	if (x->rc > 0 || x->rc < 0) {
		if (x->rc > 0)
			err_set(&x->err, ENOMEM, "out of memory");
		x->rc = -1;
		json_decref(x->out);
		x->out = NULL;
	}
}

/* ---- what listens ---- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool hex_bytes(const char *s, size_t n, unsigned char *out)
{
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval((unsigned char)s[i]), lo = hexval((unsigned char)s[i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	return true;
}

/* "0100007F:1F40" (IPv4) or 32 hex digits ":PORT" (IPv6), as the kernel prints them: each
 * 32-bit word in the host's (little-endian) order. */
static bool parse_local(const char *f, size_t n, char addr[INET6_ADDRSTRLEN], int *port, bool *reachable)
{
	const char *colon = memchr(f, ':', n);
	unsigned char b[16], w[16];
	size_t an = colon ? (size_t)(colon - f) : 0, pn = colon ? n - an - 1 : 0;
	unsigned v = 0;

	if (!colon || (an != 8 && an != 32) || pn != 4 || !hex_bytes(f, an, b))
		return false;
	for (size_t i = 0; i < 4; i++) {
		int x = hexval((unsigned char)colon[1 + i]);

		if (x < 0)
			return false;
		v = v << 4 | (unsigned)x;
	}
	if (v == 0)
		return false;
	for (size_t i = 0; i < an / 2; i += 4) { /* word byte order */
		w[i] = b[i + 3];
		w[i + 1] = b[i + 2];
		w[i + 2] = b[i + 1];
		w[i + 3] = b[i];
	}
	*port = (int)v;
	if (an == 8) {
		inet_ntop(AF_INET, w, addr, INET6_ADDRSTRLEN);
		*reachable = strcmp(addr, "0.0.0.0") == 0 || strcmp(addr, "169.254.0.21") == 0;
	} else {
		static const unsigned char any[16], v4any[12] = { [10] = 0xff, [11] = 0xff };

		inet_ntop(AF_INET6, w, addr, INET6_ADDRSTRLEN);
		/* "::" takes IPv4 too (bindv6only is 0 in the guest); ::ffff:a.b.c.d is an IPv4 one */
		*reachable = memcmp(w, any, 16) == 0 ||
			     (memcmp(w, v4any, 12) == 0 && ((w[12] == 0 && w[13] == 0 && w[14] == 0 && w[15] == 0) ||
							    (w[12] == 169 && w[13] == 254 && w[14] == 0 && w[15] == 21)));
	}
	return true;
}

static bool seen(json_t *out, int port, bool reachable)
{
	size_t i;
	json_t *e;

	json_array_foreach(out, i, e) {
		if (json_integer_value(json_object_get(e, "port")) != port)
			continue;
		if (reachable) /* a port on loopback and on every address is reachable */
			json_object_set_new(e, "reachable", json_true());
		return true;
	}
	return false;
}

void port_listening_parse(const char *text, size_t len, json_t *out)
{
	size_t pos = 0;

	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos, i = 0, fs[4], fl[4];
		int nf = 0, port;
		char addr[INET6_ADDRSTRLEN];
		bool reachable;

		pos += n + (nl ? 1 : 0);
		/* "  0: LOCAL REMOTE ST ...": the first four whitespace-separated fields */
		while (nf < 4 && i < n) {
			while (i < n && isspace((unsigned char)line[i]))
				i++;
			fs[nf] = i;
			while (i < n && !isspace((unsigned char)line[i]))
				i++;
			fl[nf] = i - fs[nf];
			if (fl[nf])
				nf++;
		}
		if (nf < 4 || fl[0] < 2 || line[fs[0] + fl[0] - 1] != ':' || fl[3] != 2 ||
		    strncasecmp(line + fs[3], "0A", 2) != 0)
			continue; /* the header line, a socket not listening, or junk */
		if (!parse_local(line + fs[1], fl[1], addr, &port, &reachable) || seen(out, port, reachable))
			continue;
		json_array_append_new(out, json_pack("{s:i,s:s,s:b}", "port", port, "address", addr, "reachable",
						     reachable));
	}
}
