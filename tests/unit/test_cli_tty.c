/* test_cli_tty.c -- `spacectl exec -t`'s terminal handling on a pseudo-terminal:
 * window size, raw mode, and the terminal put back by tty_restore(), at exit()
 * and on a fatal signal */
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli/tty.h"
#include "harness.h"

static int master = -1, slave = -1;

static bool canonical(void)
{
	struct termios t;

	if (tcgetattr(slave, &t) < 0)
		return false;
	return (t.c_lflag & ICANON) && (t.c_lflag & ECHO) && (t.c_lflag & ISIG) &&
	       (t.c_oflag & OPOST);
}

static bool raw(void)
{
	struct termios t;

	if (tcgetattr(slave, &t) < 0)
		return false;
	return !(t.c_lflag & (ICANON | ECHO | ISIG)) && !(t.c_oflag & OPOST) &&
	       t.c_cc[VMIN] == 1 && t.c_cc[VTIME] == 0;
}

static void test_winsize(void)
{
	struct winsize ws = { .ws_row = 33, .ws_col = 77 };
	unsigned rows = 0, cols = 0;
	int p[2];

	ioctl(master, TIOCSWINSZ, &ws);
	CHECK(tty_winsize(slave, &rows, &cols) == 0 && rows == 33 && cols == 77,
	      "the window size (%ux%u)", rows, cols);
	ws.ws_row = 0;
	ioctl(master, TIOCSWINSZ, &ws);
	CHECK(tty_winsize(slave, &rows, &cols) < 0, "an unknown (0) size is no size");
	if (pipe(p) < 0)
		abort();
	CHECK(tty_winsize(p[0], &rows, &cols) < 0, "a pipe has no size");
	close(p[0]);
	close(p[1]);
}

/* In a child: raw mode, then die as `how` says; the parent checks the
 * terminal afterwards.  Returns the child's wait status. */
static int child_dies(int how)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		space_err e = { 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		if (tty_raw(slave, &e) < 0 || !raw())
			_exit(99);
		switch (how) {
		case 0:
			exit(7); /* atexit */
		case 1:
			abort();
		case 2:
			raise(SIGQUIT);
			break;
		case 3:
			tty_restore();
			_exit(canonical() ? 8 : 98);
		}
		_exit(97);
	}
	waitpid(pid, &status, 0);
	return status;
}

static void test_raw_and_restore(void)
{
	space_err e = { 0 };
	int st;

	CHECK(canonical() && !tty_is_raw() && strcmp(tty_eol(), "\n") == 0,
	      "a fresh pseudo-terminal is canonical");
	CHECK(tty_raw(slave, &e) == 0 && raw() && tty_is_raw() && strcmp(tty_eol(), "\r\n") == 0,
	      "raw mode: no ICANON, ECHO, ISIG, OPOST; VMIN 1; messages end in CRLF");
	tty_restore();
	CHECK(canonical() && !tty_is_raw(), "restored");
	tty_restore();
	CHECK(canonical(), "a second restore changes nothing");
	CHECK(tty_raw(slave, &e) == 0 && raw(), "raw again (after SIGCONT)");
	tty_restore();
	CHECK(canonical(), "restored again");

	st = child_dies(0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7 && canonical(),
	      "exit() puts the terminal back (status %#x)", st);
	st = child_dies(1);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && canonical(),
	      "abort() puts it back and still dies of SIGABRT (status %#x)", st);
	st = child_dies(2);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGQUIT && canonical(),
	      "SIGQUIT puts it back and still dies of it (status %#x)", st);
	st = child_dies(3);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 8, "tty_restore() before _exit() (status %#x)", st);
}

int main(void)
{
	sigset_t none;

	/* As from an interactive shell: a run from a background one (CI, nohup) inherits SIGINT
	 * and SIGQUIT ignored, which spacectl rightly leaves ignored, and the cases send those. */
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (openpty(&master, &slave, NULL, NULL, NULL) < 0)
		SKIP_ALL("no pseudo-terminal (openpty failed)");
	RUN(test_winsize);
	RUN(test_raw_and_restore);
	close(slave);
	close(master);
	return DONE();
}
