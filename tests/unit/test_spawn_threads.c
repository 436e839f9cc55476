/* test_spawn_threads.c -- proc_spawn from a process whose other threads allocate without pause
 * (the daemon's store writer and cluster worker do): the forked child makes system calls only
 * (its environment and seccomp program are made before fork, vmm/proc.c), so every spawn
 * reaches exec whatever lock another thread held at the instant of fork. The child gets the
 * environment asked for (env_add in place of the daemon's variable of that name; none with
 * clear_env) and the seccomp filter (a denied call fails with EPERM in the new program). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/vmm/proc.h"
#include "harness.h"

#define SPAWNS 150

static volatile bool stop;
static unsigned long rounds;
static void *volatile keep; /* so the compiler cannot drop the allocations */

/* Small blocks and large ones (served apart, under a lock of their own), all the time. */
static void *churn(void *arg)
{
	(void)arg;
	while (!stop) {
		for (int i = 0; i < 64; i++) {
			char *p = malloc(i % 8 ? 16 + (size_t)i * 97 : (size_t)(1 << 20) + (size_t)i);

			if (p)
				memset(p, i, 16);
			keep = p;
			free(p);
		}
		__atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Runs sh -c script under the options; its exit status (-1: did not end in 10 s). */
static int run(const char *script, bool clear_env, bool seccomp)
{
	char *argv[] = { clear_env ? "/bin/sh" : "sh", "-c", (char *)script, NULL };
	char *env_add[] = { "SPACE_SPAWN_T=given", NULL };
	struct spawn_opts o = { .argv = argv, .env_add = env_add, .stdout_fd = -1, .stderr_fd = -1,
				.new_session = true, .seccomp = seccomp, .clear_env = clear_env };
	space_err err = { 0 };
	int pidfd = -1, status = 0;
	pid_t pid;

	if (proc_spawn(&o, &pid, &pidfd, &err) < 0) {
		NOTE("spawn: %s", err.msg);
		return -2;
	}
	if (proc_wait_child(pid, pidfd, 10000, &status) < 0) {
		proc_kill_reap(pid, pidfd);
		close(pidfd);
		return -1;
	}
	close(pidfd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void)
{
	pthread_t thr[2];
	unsigned long before;
	int ok = 0, hung = 0, other = 0;

	setenv("SPACE_SPAWN_T", "daemon's", 1);
	setenv("SPACE_SPAWN_KEPT", "kept", 1);
	CHECK(run("test \"$SPACE_SPAWN_T\" = given && test \"$SPACE_SPAWN_KEPT\" = kept", false, false) == 0,
	      "env_add replaces the daemon's variable of its name; the others are inherited");
	CHECK(run("test -z \"$SPACE_SPAWN_T$SPACE_SPAWN_KEPT$HOME\"", true, false) == 0,
	      "clear_env: the program starts with an empty environment");
	/* unshare(2) is on the denylist; sh's own start-up makes none of those calls. */
	CHECK(run("exec unshare -n true 2>/dev/null; exit 3", false, true) != 0 &&
		      run("true", false, true) == 0,
	      "the seccomp program made before fork is in force in the child's program");
	for (int i = 0; i < 2; i++)
		pthread_create(&thr[i], NULL, churn, NULL);
	before = __atomic_load_n(&rounds, __ATOMIC_RELAXED);
	for (int i = 0; i < SPAWNS; i++) {
		int rc = run("test \"$SPACE_SPAWN_T\" = given", false, i % 2 == 0);

		ok += rc == 0;
		hung += rc == -1;
		other += rc != 0 && rc != -1;
	}
	stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(thr[i], NULL);
	CHECK(ok == SPAWNS, "%d spawns while two threads allocate: %d exec'd and exited 0, %d hung, %d other",
	      SPAWNS, ok, hung, other);
	CHECK(__atomic_load_n(&rounds, __ATOMIC_RELAXED) > before, "the allocating threads went on meanwhile");
	return DONE();
}
