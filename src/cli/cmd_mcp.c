/* cmd_mcp.c -- `spacectl mcp`: MCP's stdio transport for a local agent, relayed to the
 * daemon's Streamable HTTP transport at /mcp. Each line on stdin is one JSON-RPC message (or
 * batch), POSTed as it is; what comes back goes to stdout one message per line: a JSON reply
 * as one line, an event stream's messages (progress notifications, then the response) each as a
 * line as they arrive. The session id initialize answers is sent with every later message;
 * at the end of stdin the session is ended (DELETE /mcp) once every reply is out. Each message
 * is relayed on a thread of its own, so that a ping or a second tool call is answered while a
 * long command runs (replies may come in any order, as JSON-RPC allows); initialize is relayed
 * alone, before anything else is read, since the session id comes with its reply. Lines on
 * stdout are written whole under a lock. Nothing but protocol messages goes to stdout;
 * diagnostics go to stderr. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "cli.h"
#include "sse.h"

/* One stdin line (one message or batch) at most; the daemon's own body limit is lower. */
#define MCP_LINE_MAX (16u << 20)
/* A JSON reply's body at most. */
#define MCP_REPLY_MAX (64u << 20)

/* Relayed messages in flight at once at most (a further line waits for one to end). */
#define MCP_INFLIGHT_MAX 16

/* What the relays share: the session, the count of threads in flight, stdout. */
struct shared {
	const struct ctl *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int inflight;
	char sid[128];          /* Mcp-Session-Id, "" before initialize */
	char version[32];       /* the negotiated protocol version, "" before */
};

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* One message relayed (and its thread's own state). */
struct relay {
	struct shared *sh;
	char *line;             /* the message, owned */
	size_t n;
	char sid[128];          /* the session as it was sent, and as the reply names it */
	bool sse;               /* this reply is text/event-stream */
	long status;
	char *body;             /* a JSON reply, gathered */
	size_t len;
	bool too_long;
	struct sse_parser parser;
};

/* One message out: compact JSON on one line (a message from the daemon is re-encoded so that
 * no newline inside it can split it). */
static void emit(const json_t *m)
{
	char *s = json_dumps(m, JSON_COMPACT);

	if (s) {
		pthread_mutex_lock(&out_mu);
		fputs(s, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		pthread_mutex_unlock(&out_mu);
	}
	free(s);
}

static void emit_text(const char *p, size_t n)
{
	json_t *m = json_loadb(p, n, 0, NULL);

	if (m)
		emit(m);
	else
		fprintf(stderr, "spacectl mcp: the daemon sent a message that is not JSON (%zu bytes)\n", n);
	json_decref(m);
}

static int on_event(const struct sse_event *ev, void *arg)
{
	(void)arg;
	if (strcmp(ev->type, "message") == 0 && ev->data_len)
		emit_text(ev->data, ev->data_len);
	return 0;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct relay *r = arg;
	size_t n = size * nmemb, k;
	char line[256];

	if (n >= sizeof(line))
		return n;
	memcpy(line, p, n);
	line[n] = '\0';
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		line[--n] = '\0';
	if (strncasecmp(line, "HTTP/", 5) == 0) {
		r->sse = false;
		return size * nmemb;
	}
	if (strncasecmp(line, "Mcp-Session-Id:", 15) == 0) {
		const char *v = line + 15 + strspn(line + 15, " \t");

		k = strcspn(v, " \t");
		if (k && k < sizeof(r->sid)) {
			memcpy(r->sid, v, k);
			r->sid[k] = '\0';
		}
	} else if (strncasecmp(line, "Content-Type:", 13) == 0) {
		r->sse = strstr(line + 13, "text/event-stream") != NULL;
	}
	return size * nmemb;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct relay *r = arg;
	size_t n = size * nmemb;
	char *nb;

	if (r->sse) {
		if (sse_parser_feed(&r->parser, p, n) >= SSE_ETOOLONG)
			return 0;
		return n;
	}
	if (r->len + n > MCP_REPLY_MAX) {
		r->too_long = true;
		return 0;
	}
	if (!(nb = realloc(r->body, r->len + n + 1)))
		return 0;
	r->body = nb;
	memcpy(r->body + r->len, p, n);
	r->len += n;
	r->body[r->len] = '\0';
	return n;
}

/* A JSON-RPC error for the request in line (when it is one: notifications get no answer). */
static void emit_error(const char *line, size_t n, int code, const char *msg)
{
	json_t *m = json_loadb(line, n, 0, NULL);
	json_t *id = json_is_object(m) ? json_object_get(m, "id") : NULL;

	if (id || !json_is_object(m)) {
		json_t *e = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
				      "code", code, "message", msg);

		if (e)
			emit(e);
		json_decref(e);
	}
	json_decref(m);
}

/* One request to /mcp; body NULL: DELETE. -1 when no answer came (the message is in err). */
static int send_one(struct relay *r, const char *method, const char *body, size_t len, char *err, size_t errlen)
{
	_cleanup_free_ char *url = NULL, *auth = NULL, *sidh = NULL, *verh = NULL;
	struct curl_slist *h = NULL;
	CURL *curl = curl_easy_init();
	CURLcode rc;

	const struct ctl *c = r->sh->c;
	char version[32];

	pthread_mutex_lock(&r->sh->mu);
	snprintf(r->sid, sizeof(r->sid), "%s", r->sh->sid);
	snprintf(version, sizeof(version), "%s", r->sh->version);
	pthread_mutex_unlock(&r->sh->mu);
	if (!curl || asprintf(&url, "%s/mcp", c->url) < 0) {
		if (curl)
			curl_easy_cleanup(curl);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (c->api_key && asprintf(&auth, "Authorization: Bearer %s", c->api_key) >= 0)
		h = curl_slist_append(h, auth);
	if (r->sid[0] && asprintf(&sidh, "Mcp-Session-Id: %s", r->sid) >= 0)
		h = curl_slist_append(h, sidh);
	if (version[0] && asprintf(&verh, "MCP-Protocol-Version: %s", version) >= 0)
		h = curl_slist_append(h, verh);
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Accept: application/json, text/event-stream");
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	r->sse = false;
	r->len = 0;
	r->too_long = false;
	sse_parser_init(&r->parser, SSE_DEFAULT_MAX, on_event, r);
	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
	sse_parser_free(&r->parser);
	if (r->sid[0]) {
		/* initialize's answer names the session (later ones repeat it) */
		pthread_mutex_lock(&r->sh->mu);
		snprintf(r->sh->sid, sizeof(r->sh->sid), "%s", r->sid);
		pthread_mutex_unlock(&r->sh->mu);
	}
	curl_slist_free_all(h);
	curl_easy_cleanup(curl);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s %s: %s", method, url, r->too_long ? "the reply is too long" : curl_easy_strerror(rc));
		return -1;
	}
	return 0;
}

/* The negotiated version, from an initialize reply, for the MCP-Protocol-Version header. */
static void note_version(struct relay *r, const json_t *reply)
{
	const char *v = json_string_value(json_object_get(json_object_get(reply, "result"), "protocolVersion"));

	if (v && strlen(v) < sizeof(r->sh->version)) {
		pthread_mutex_lock(&r->sh->mu);
		snprintf(r->sh->version, sizeof(r->sh->version), "%s", v);
		pthread_mutex_unlock(&r->sh->mu);
	}
}

static void relay_line(struct relay *r, const char *line, size_t n)
{
	char err[512], msg[600];

	if (send_one(r, "POST", line, n, err, sizeof(err)) < 0) {
		fprintf(stderr, "spacectl mcp: %s\n", err);
		snprintf(msg, sizeof(msg), "the SPACE daemon did not answer: %s", err);
		emit_error(line, n, -32603, msg);
		return;
	}
	if (r->sse || r->status == 202 || r->len == 0) {
		if (r->status / 100 != 2) {
			snprintf(msg, sizeof(msg), "HTTP %ld from the daemon's /mcp", r->status);
			emit_error(line, n, r->status == 401 ? -32001 : -32603, msg);
		}
		return;
	}
	json_t *reply = json_loadb(r->body, r->len, 0, NULL);
	const json_t *id = json_object_get(reply, "id");

	if (json_is_array(reply) || (json_is_object(reply) && (r->status / 100 == 2 || (id && !json_is_null(id))))) {
		note_version(r, reply);
		emit(reply);
	} else {
		/* an error of the transport's (401, 404 session, 400 no id): answered for the request */
		const json_t *e = json_object_get(reply, "error");
		const char *m = json_string_value(json_object_get(e, "message"));
		json_t *code = json_object_get(e, "code");

		snprintf(msg, sizeof(msg), "HTTP %ld: %s", r->status, m ? m : "the daemon refused the message");
		emit_error(line, n, r->status == 401 ? -32001 : json_is_integer(code) ? (int)json_integer_value(code) : -32600,
			   msg);
	}
	json_decref(reply);
}

static void relay_free(struct relay *r)
{
	free(r->body);
	free(r->line);
	free(r);
}

static void *relay_thread(void *arg)
{
	struct relay *r = arg;
	struct shared *sh = r->sh;

	relay_line(r, r->line, r->n);
	relay_free(r);
	pthread_mutex_lock(&sh->mu);
	sh->inflight--;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
	return NULL;
}

static bool is_initialize(const char *line, size_t n)
{
	json_t *m = json_loadb(line, n, 0, NULL);
	const char *method = json_string_value(json_object_get(m, "method"));
	bool yes = method && strcmp(method, "initialize") == 0;

	json_decref(m);
	return yes;
}

/* Relays line (taken) on a thread of its own; initialize (or when no thread can start) here. */
static void relay_start(struct shared *sh, char *line, size_t n)
{
	struct relay *r = calloc(1, sizeof(*r));
	pthread_attr_t attr;
	pthread_t t;
	bool inline_ = is_initialize(line, n);

	if (!r) {
		emit_error(line, n, -32603, "spacectl mcp: out of memory");
		free(line);
		return;
	}
	r->sh = sh;
	r->line = line;
	r->n = n;
	pthread_mutex_lock(&sh->mu);
	while (sh->inflight >= MCP_INFLIGHT_MAX)
		pthread_cond_wait(&sh->cv, &sh->mu);
	sh->inflight++;
	pthread_mutex_unlock(&sh->mu);
	if (!inline_ && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &attr, relay_thread, r);

		pthread_attr_destroy(&attr);
		if (rc == 0)
			return;
	}
	relay_thread(r);
}

static int run(struct ctl *c, int argc, char **argv)
{
	struct shared sh = { .c = c };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = ctl_parse_json_only(c, &ctl_verb_mcp, argc, argv);

	if (rc >= 0)
		return rc;
	if (!c->api_key)
		fprintf(stderr, "spacectl mcp: no API key (SPACE_API_KEY, SPACE_API_KEY_FILE or --api-key): /mcp will refuse\n");
	pthread_mutex_init(&sh.mu, NULL);
	pthread_cond_init(&sh.cv, NULL);
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		if ((size_t)n > MCP_LINE_MAX) {
			emit_error("", 0, -32600, "message longer than 16 MiB");
			continue;
		}
		relay_start(&sh, line, (size_t)n);
		line = NULL; /* the relay owns it */
		cap = 0;
	}
	free(line);
	pthread_mutex_lock(&sh.mu);
	while (sh.inflight > 0)
		pthread_cond_wait(&sh.cv, &sh.mu);
	pthread_mutex_unlock(&sh.mu);
	if (sh.sid[0]) {
		struct relay r = { .sh = &sh };
		char err[512];

		if (send_one(&r, "DELETE", NULL, 0, err, sizeof(err)) < 0)
			fprintf(stderr, "spacectl mcp: ending the session: %s\n", err);
		free(r.body);
	}
	pthread_cond_destroy(&sh.cv);
	pthread_mutex_destroy(&sh.mu);
	return CTL_EXIT_OK;
}

const struct ctl_verb ctl_verb_mcp = {
	.name = "mcp",
	.usage = "",
	.summary = "serve MCP on stdin/stdout (newline-delimited JSON-RPC), relayed to the daemon's /mcp",
	.help = "For a local agent (Claude Desktop and the like): start `spacectl mcp` as its MCP server.\n"
		"Each stdin line is one JSON-RPC message, each stdout line one message back. The daemon is\n"
		"SPACE_URL (or --url), its key SPACE_API_KEY / SPACE_API_KEY_FILE (or --api-key).\n"
		"See docs/guides/mcp.md.\n",
	.run = run,
};
