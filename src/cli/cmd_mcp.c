/* cmd_mcp.c -- `spacectl mcp`: MCP's stdio transport for a local agent, relayed to the
 * daemon's Streamable HTTP transport at /mcp. Each line on stdin is one JSON-RPC message (or
 * batch), POSTed as it is; what comes back goes to stdout one message per line: a JSON reply
 * as one line, an event stream's messages (progress notifications, then the response) each as a
 * line as they arrive. The session id initialize answers is sent with every later message;
 * at the end of stdin the session is ended (DELETE /mcp). Messages are relayed one at a time,
 * in order. Nothing but protocol messages goes to stdout; diagnostics go to stderr. */
#include <curl/curl.h>
#include <errno.h>
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

struct relay {
	const struct ctl *c;
	char sid[128];          /* Mcp-Session-Id, "" before initialize */
	char version[32];       /* the negotiated protocol version, "" before */
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
		fputs(s, stdout);
		fputc('\n', stdout);
		fflush(stdout);
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

	if (!curl || asprintf(&url, "%s/mcp", r->c->url) < 0) {
		if (curl)
			curl_easy_cleanup(curl);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (r->c->api_key && asprintf(&auth, "Authorization: Bearer %s", r->c->api_key) >= 0)
		h = curl_slist_append(h, auth);
	if (r->sid[0] && asprintf(&sidh, "Mcp-Session-Id: %s", r->sid) >= 0)
		h = curl_slist_append(h, sidh);
	if (r->version[0] && asprintf(&verh, "MCP-Protocol-Version: %s", r->version) >= 0)
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

	if (v && strlen(v) < sizeof(r->version))
		snprintf(r->version, sizeof(r->version), "%s", v);
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
		const char *m = json_string_value(json_object_get(json_object_get(reply, "error"), "message"));

		snprintf(msg, sizeof(msg), "HTTP %ld: %s", r->status, m ? m : "the daemon refused the message");
		emit_error(line, n, r->status == 401 ? -32001 : -32600, msg);
	}
	json_decref(reply);
}

static int run(struct ctl *c, int argc, char **argv)
{
	struct relay r = { .c = c };
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = ctl_parse_json_only(c, &ctl_verb_mcp, argc, argv);

	if (rc >= 0)
		return rc;
	if (!c->api_key)
		fprintf(stderr, "spacectl mcp: no API key (SPACE_API_KEY, SPACE_API_KEY_FILE or --api-key): /mcp will refuse\n");
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		if ((size_t)n > MCP_LINE_MAX) {
			emit_error("", 0, -32600, "message longer than 16 MiB");
			continue;
		}
		relay_line(&r, line, (size_t)n);
	}
	if (r.sid[0]) {
		char err[512];

		if (send_one(&r, "DELETE", NULL, 0, err, sizeof(err)) < 0)
			fprintf(stderr, "spacectl mcp: ending the session: %s\n", err);
	}
	free(r.body);
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
