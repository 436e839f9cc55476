/* runtime.h -- in-memory objects behind live sandboxes and sessions (sandbox.c, session.c, agent.c) */
#ifndef SPACE_RUNTIME_H
#define SPACE_RUNTIME_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>

#include "daemon.h"
#include "model/model.h"
#include "proto.h"
#include "spool.h"
#include "vmm/vm.h"

struct agent;

struct sandbox {
	struct spaced *d;
	struct sandbox_rec rec;
	struct template_rec tmpl;
	struct vm *vm;
	struct agent *agent;       /* host end of the agent channel; NULL until it answers */
	struct session *sessions;  /* every session of this sandbox, newest first */
	struct op_rec op;          /* the operation in flight (op.id[0] == 0: none) */
	struct event *timer;       /* boot deadline (creating) */
	struct sandbox *next;
};

struct session {
	struct spaced *d;
	struct sandbox *sb;
	struct session_rec rec;
	struct spool *spool;       /* opened on first use */
	uint64_t acked;            /* output offset last acknowledged to the agent */
	uint64_t ack_base;         /* output held when the agent (re)connected: its ACK is at most this */
	uint64_t delivered;        /* furthest offset any reader has taken */
	struct session_watch *watches;
	bool exec_sent;            /* H_EXEC is on its way (or done) for this agent connection */
	bool start_wanted;         /* attached while the agent was not connected */
	struct evbuffer *stdin_q;  /* stdin accepted from clients, not yet sent */
	uint64_t stdin_sent, stdin_acked;
	bool stdin_close_req, stdin_close_sent;
	bool released;             /* agent was told to forget the channel */
	struct session *next;
};

/* Output bytes a reader may lag behind before the process is paced. */
#define SESSION_MAX_LAG (8u << 20)
/* Stdin bytes the daemon queues for one session. */
#define SESSION_MAX_STDIN_QUEUE (16u << 20)

/* sandbox.c */
void sandbox_persist(struct sandbox *sb);
/* The agent answered its first HELLO on this connection. */
void sandbox_agent_ready(struct sandbox *sb);
/* The agent connection dropped while QEMU lives on (reconnect later). */
void sandbox_agent_lost(struct sandbox *sb, const char *why);

/* session.c */
void session_persist(struct session *s);
/* A runtime session for rec (copied), linked into sb, its spool opened. */
struct session *session_alloc(struct sandbox *sb, const struct session_rec *rec, space_err *err);
/* session_create.c: H_EXEC for this session; -1 if it would not fit one frame. */
int session_exec_encode(const struct session *s, struct proto_wr *w);
int sessions_load(struct sandbox *sb, space_err *err);
void sessions_free(struct sandbox *sb);
/* The sandbox failed or is going away: finish sessions still running. */
void sessions_abort(struct sandbox *sb, const char *why);
/* The agent (re)connected: its live channels, then resume every session. */
void sessions_agent_hello(struct sandbox *sb, const uint32_t *chans, const uint32_t *states,
			  const uint64_t *stdin_offs, uint32_t n);
struct session *session_by_chan(struct sandbox *sb, uint32_t chan);
void session_on_started(struct session *s, uint32_t pid);
void session_on_data(struct session *s, int stream, uint64_t off, const uint8_t *p, size_t n);
void session_on_exit(struct session *s, uint64_t final_off, int code, int sig);
void session_on_error(struct session *s, int errnum, const char *msg);
void session_on_stdin_ack(struct session *s, uint64_t off);

/* agent.c: host end of the framed channel to space-agent */
struct agent *agent_new(struct sandbox *sb, const char *sock_path);
void agent_free(struct agent *a);
bool agent_ready(const struct agent *a);
int agent_send(struct agent *a, uint16_t type, uint32_t chan, const void *payload, size_t len);
/* Drop and re-open the channel (after a second): the agent then resends
 * everything not yet acknowledged. Safe inside the channel's callbacks. */
void agent_resync(struct agent *a, const char *why);
/* Bytes queued toward QEMU not yet written (for pacing stdin). */
size_t agent_queued(const struct agent *a);

#endif
