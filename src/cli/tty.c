/* tty.c -- the local terminal for `spacectl exec -t` (see tty.h) */
#include "tty.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* Written once, before raw mode is first entered; read by the restorer,
 * which may run in a signal handler. */
static struct termios saved;
static int saved_fd = -1;
static volatile sig_atomic_t raw_on;

static const int fatal_signals[] = { SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
				     SIGILL,  SIGSYS,  SIGXCPU, SIGXFSZ };

int tty_winsize(int fd, unsigned *rows, unsigned *cols)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
		return -1;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return 0;
}

void tty_restore(void)
{
	int saved_errno = errno;

	if (raw_on && saved_fd >= 0) {
		/* Retried: a signal may interrupt it.  TCSADRAIN lets the
		 * remote program's last bytes out under the raw settings. */
		while (tcsetattr(saved_fd, TCSADRAIN, &saved) < 0 && errno == EINTR)
			;
		raw_on = 0;
	}
	errno = saved_errno;
}

int tty_is_raw(void)
{
	return raw_on != 0;
}

const char *tty_eol(void)
{
	return raw_on ? "\r\n" : "\n";
}

static void on_fatal(int sig)
{
	tty_restore();
	/* Die of it as we would have: the default action, raised again
	 * (delivered when this handler returns, the signal being blocked
	 * meanwhile; a fault simply recurs). */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void restore_at_exit(void)
{
	tty_restore();
}

static int arm(space_err *e)
{
	struct sigaction sa;
	size_t i;

	if (atexit(restore_at_exit) != 0)
		return err_set(e, ENOMEM, "registering the terminal's restore at exit");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		struct sigaction old;

		/* Leave alone a signal someone chose to ignore. */
		if (sigaction(fatal_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		if (sigaction(fatal_signals[i], &sa, NULL) < 0)
			return err_sys(e, errno, "installing a handler for signal %d",
				       fatal_signals[i]);
	}
	return 0;
}

int tty_raw(int fd, space_err *e)
{
	struct termios raw;

	if (saved_fd < 0) {
		if (tcgetattr(fd, &saved) < 0)
			return err_sys(e, errno, "reading the terminal's settings");
		/* Everything that restores is in place before the terminal
		 * changes. */
		if (arm(e) < 0)
			return -1;
		saved_fd = fd;
	} else if (fd != saved_fd) {
		return err_set(e, EINVAL, "raw mode is already on another terminal");
	}
	raw = saved;
	cfmakeraw(&raw);
	/* Set before the change: a signal arriving in between restores
	 * settings that are still the saved ones, which is harmless. */
	raw_on = 1;
	while (tcsetattr(fd, TCSADRAIN, &raw) < 0) {
		if (errno == EINTR)
			continue;
		raw_on = 0;
		return err_sys(e, errno, "putting the terminal in raw mode");
	}
	return 0;
}
