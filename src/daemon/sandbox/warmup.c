/* warmup.c -- a first command the daemon runs itself in a VM no client has yet: a warm-pool VM
 * (so that a client's first command does not pay for QEMU translating the guest's exec path
 * for the first time), and the VM a ready snapshot is taken from (so that every clone starts
 * with the shell and `echo` already in its page cache).
 *
 * The command runs on a channel no session owns: the agent channel treats its frames as an
 * orphan's (output acknowledged and dropped, exit released). An H_PING after the exit tells
 * when the agent has processed the release, so a snapshot taken then holds no trace of it. */
#include <string.h>

#include "log.h"
#include "runtime.h"

#define WARMUP_TIMEOUT_S 20

static void finish(struct sandbox *sb, const char *why)
{
	void (*done)(struct sandbox *) = sb->warm_done;

	if (sb->act_timer) {
		event_free(sb->act_timer);
		sb->act_timer = NULL;
	}
	sb->warm_chan = 0;
	sb->warm_done = NULL;
	if (why)
		log_warn("sandbox %s: warm-up: %s; going on without it", sb->rec.id, why);
	if (done)
		done(sb);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	finish(arg, "no answer in time");
}

int sandbox_warm_up(struct sandbox *sb, void (*done)(struct sandbox *sb), space_err *err)
{
	/* What a client's first command goes through: the shell, then an
	 * external program found on PATH (exec skips the shell's builtin). */
	static const char *const argv[] = { "sh", "-c", "echo warm >/dev/null; exec echo warm", NULL };
	static const char *const envp[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
					    NULL };
	static struct proto_exec x; /* large: off the stack; single-threaded */
	struct timeval tv = { WARMUP_TIMEOUT_S, 0 };
	struct proto_wr w;
	int rc;

	memset(&x, 0, sizeof(x));
	x.user = "root";
	x.cwd = "/";
	x.argc = 3;
	x.envc = 1;
	memcpy(x.argv, argv, sizeof(argv));
	memcpy(x.envp, envp, sizeof(envp));
	proto_wr_init(&w);
	sb->warm_chan = sb->rec.next_chan++;
	sandbox_persist(sb);
	rc = proto_exec_encode(&w, &x) < 0 || w.bad ||
	     agent_send(sb->agent, H_EXEC, sb->warm_chan, w.buf, w.len) < 0;
	proto_wr_free(&w);
	if (rc) {
		sb->warm_chan = 0;
		return err_set(err, EIO, "sandbox %s: could not send its warm-up command", sb->rec.id);
	}
	sb->warm_done = done;
	sb->act_timer = evtimer_new(sb->d->base, on_timeout, sb);
	if (sb->act_timer)
		evtimer_add(sb->act_timer, &tv);
	return 0;
}

void sandbox_warm_exit(struct sandbox *sb, uint32_t chan)
{
	uint8_t cookie[8] = { 0 };

	if (!sb->warm_chan || chan != sb->warm_chan)
		return;
	/* The release went out before this ping: its answer means it was
	 * processed. */
	memcpy(cookie, &chan, sizeof(chan));
	if (agent_send(sb->agent, H_PING, 0, cookie, sizeof(cookie)) < 0)
		finish(sb, "could not send a ping");
}

void sandbox_pong(struct sandbox *sb, uint64_t cookie)
{
	if (sb->warm_chan && cookie == sb->warm_chan)
		finish(sb, NULL);
}

bool sandbox_warm(const struct sandbox *sb)
{
	return !sb->warm_chan && !sb->warm_done;
}
