/* exec.h -- `spacectl exec`'s data-plane side: the session's credentials
 * (shared by the output stream, the stdin forwarder and the signal
 * forwarder), token refresh, and the two helper threads */
#ifndef SPACE_CLI_EXEC_H
#define SPACE_CLI_EXEC_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "client.h"

/* Largest stdin chunk per request (the data plane takes up to 4 MiB). */
#define EXEC_STDIN_CHUNK (1024 * 1024)

struct exec_session {
	const struct ctl *c;
	char *sandbox_id;
	char *session_id;
	pthread_mutex_t lock; /* guards dp_url, token, gen */
	char *dp_url;         /* data plane base URL, no trailing '/' */
	char *token;
	unsigned gen; /* bumped by every refresh */
	/* -t: a PTY session; its window follows ours (SIGWINCH -> resize), and
	 * a hangup (SIGHUP) hangs it up.  Set before the threads start. */
	bool tty;
	/* -it on a terminal: ours is in raw mode, so SIGINT and SIGTERM can only
	 * come from kill(1): they end spacectl, hanging up the command. */
	bool raw;
	unsigned rows, cols; /* the size the session was last given */
};

/* Credentials as one thread saw them: a refresh compares gen so that
 * threads that hit 401 together refresh only once. */
struct exec_creds {
	char *dp_url;
	char *token;
	unsigned gen;
};

/* Take sandbox/session ids and the first {"url","token"} from the create
 * answer's data_plane object. */
int exec_session_init(struct exec_session *s, const struct ctl *c, const char *sandbox_id,
		      const char *session_id, const json_t *data_plane, space_err *e);
void exec_session_free(struct exec_session *s);

int exec_creds_get(struct exec_session *s, struct exec_creds *cr, space_err *e);
void exec_creds_free(struct exec_creds *cr);
/* Get a fresh token from the control plane, unless another thread already
 * replaced the one of generation `seen_gen`. */
int exec_refresh_token(struct exec_session *s, unsigned seen_gen, space_err *e);

/* URL of "<data plane>/v1/sessions/<sid><suffix>" for these credentials. */
char *exec_dp_url(const struct exec_session *s, const struct exec_creds *cr,
		  const char *suffix);

/* POST to the session on the data plane, refreshing the token once on 401;
 * on conn (NULL: a fresh connection), within timeout_s (0: no limit).
 * Same return contract as http_do(). */
int exec_dp_post(struct exec_session *s, struct http_conn *conn, const char *suffix,
		 const void *body, size_t len, const char *content_type, long timeout_s,
		 struct http_resp *rs, space_err *e);

/* Forward a signal number to the remote process (conn may be NULL).
 * Returns 0 or -1 (e set). */
int exec_send_signal(struct exec_session *s, struct http_conn *conn, int signo, space_err *e);

/* Give the PTY session this window size (POST .../resize); a session that
 * has ended (409) is not an error.  Returns 0 or -1 (e set). */
int exec_send_resize(struct exec_session *s, struct http_conn *conn, unsigned rows,
		     unsigned cols, space_err *e);

/* Our terminal's size (stdin's, else stdout's); -1 when neither is one. */
int exec_term_size(unsigned *rows, unsigned *cols);

/* Start the thread that copies our stdin to the session's stdin, closing it
 * at EOF.  Problems are reported on stderr; the output stream goes on. */
int exec_start_stdin(struct exec_session *s, space_err *e);

/* Block SIGINT and SIGTERM in this thread (so in every thread created
 * after) and start the thread that forwards the first one to the remote
 * process and exits on the second.  With s->tty it also handles SIGWINCH
 * (resize) and SIGHUP (hang up the command, leave); with s->raw, SIGINT and
 * SIGTERM hang up too, and SIGTSTP / SIGCONT leave and re-enter raw mode.
 * Call before any other thread starts. */
int exec_start_signals(struct exec_session *s, space_err *e);

#endif
