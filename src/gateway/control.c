/* control.c -- the daemon's socket (egress.md "--control-fd"): a listening unix socket the
 * daemon made; peers must be uid 0. One JSON object per line each way: "policy" swaps the
 * policy (and the CA) atomically for what arrives after the reply, "stats" reports. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw.h"
#include "log.h"

struct gw_control_client {
	struct gw *g;
	struct gw_control_client *prev, *next;
	struct bufferevent *bev;
};

static void client_free(struct gw_control_client *cl)
{
	struct gw *g = cl->g;

	if (cl->prev)
		cl->prev->next = cl->next;
	else
		g->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	g->nclients--;
	bufferevent_free(cl->bev);
	free(cl);
}

static void reply(struct gw_control_client *cl, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s) {
		evbuffer_add_printf(bufferevent_get_output(cl->bev), "%s\n", s);
		free(s);
	}
	json_decref(o);
}

static json_t *fail(const char *msg)
{
	return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

static json_t *op_policy(struct gw *g, json_t *req)
{
	json_t *gen = json_object_get(req, "generation"), *ca = json_object_get(req, "ca");
	const char *cert = json_string_value(json_object_get(ca, "cert"));
	const char *key = json_string_value(json_object_get(ca, "key"));
	struct egress_policy *p = NULL;
	space_err err = { 0 };

	if (!json_is_integer(gen))
		return fail("generation: not an integer");
	if (ca && !json_is_null(ca) && (!cert || !key))
		return fail("ca: needs cert and key (PEM strings)");
	if (egress_policy_parse(json_object_get(req, "policy"), true, &p, &err) < 0)
		return fail(err.msg);
	if (cert && gw_tls_set_ca(g->tls, cert, key, &err) < 0) {
		egress_policy_free(p);
		return fail(err.msg);
	}
	egress_policy_free(g->policy);
	g->policy = p;
	g->generation = json_integer_value(gen);
	log_info("policy generation %lld: %d allow, %d deny, %d inject%s", g->generation, p->nallow,
		 p->ndeny, p->ninject, cert ? ", CA set" : "");
	return json_pack("{s:b, s:I}", "ok", 1, "generation", (json_int_t)g->generation);
}

static json_t *handle(struct gw *g, char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, 0, &jerr), *res;
	const char *op = json_string_value(json_object_get(req, "op"));

	explicit_bzero(line, len); /* may hold secret values and the CA key */
	if (!json_is_object(req))
		res = fail("not a JSON object");
	else if (op && strcmp(op, "policy") == 0)
		res = op_policy(g, req);
	else if (op && strcmp(op, "stats") == 0)
		res = json_pack("{s:b, s:i, s:i, s:I}", "ok", 1, "conns", g->nconns, "dns_names",
				gw_handout_count(g), "generation", (json_int_t)g->generation);
	else
		res = fail("unknown op (policy, stats)");
	json_decref(req);
	return res;
}

static void read_cb(struct bufferevent *b, void *arg)
{
	struct gw_control_client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(b);
	size_t len;
	char *line;

	while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF))) {
		reply(cl, handle(cl->g, line, len));
		free(line);
	}
	if (evbuffer_get_length(in) > GW_CONTROL_LINE_MAX) {
		log_warn("control: line longer than %d bytes, closing", GW_CONTROL_LINE_MAX);
		client_free(cl);
	}
}

static void event_cb(struct bufferevent *b, short what, void *arg)
{
	(void)b;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		client_free(arg);
}

static bool peer_is_root(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == 0;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		      void *arg)
{
	struct gw *g = arg;
	struct gw_control_client *cl;

	(void)l, (void)sa, (void)salen;
	if (!peer_is_root(fd) || g->nclients >= GW_CONTROL_CLIENTS_MAX || !(cl = calloc(1, sizeof(*cl)))) {
		log_warn("control: connection refused (not uid 0, or too many)");
		close(fd);
		return;
	}
	cl->g = g;
	cl->bev = bufferevent_socket_new(g->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!cl->bev) {
		close(fd);
		free(cl);
		return;
	}
	cl->next = g->clients;
	if (g->clients)
		g->clients->prev = cl;
	g->clients = cl;
	g->nclients++;
	/* reading stops just past the line limit, so the check in read_cb always sees it */
	bufferevent_setwatermark(cl->bev, EV_READ, 0, GW_CONTROL_LINE_MAX + 1);
	bufferevent_setcb(cl->bev, read_cb, NULL, event_cb, cl);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

int gw_control_start(struct gw *g, int fd, space_err *err)
{
	/* the listener accepts until EAGAIN: a blocking socket from the daemon would hang it */
	if (evutil_make_socket_nonblocking(fd) < 0 || evutil_make_socket_closeonexec(fd) < 0)
		return err_sys(err, errno, "control fd %d", fd);
	g->control = evconnlistener_new(g->base, accept_cb, g, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
					-1, fd);
	if (!g->control)
		return err_sys(err, errno, "control fd %d", fd);
	return 0;
}

void gw_control_stop(struct gw *g)
{
	while (g->clients)
		client_free(g->clients);
	if (g->control)
		evconnlistener_free(g->control);
	g->control = NULL;
}
