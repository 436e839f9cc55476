/* test_fork_guard.c -- fork() while another thread allocates and sets the environment without
 * pause, its work marked as steps (fork_guard.h): every fork goes through (prepare never waits
 * for ever), every child allocates, sets its environment and exits, and the thread goes on
 * between forks (it is not starved). The hang the guard prevents (a child stuck before exec on
 * a lock the daemon's store thread held) showed in the end-to-end suite, as a snapshot whose
 * operation never ended, in 1 run of 2 without it; this harness does not reproduce it. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fork_guard.h"
#include "harness.h"

#define FORKS 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fork_guard guard;
static volatile bool stop;
static unsigned long rounds;
static void *volatile keep; /* so the compiler cannot drop the allocations */

/* Allocates and frees in steps, all the time: the allocator's locks are taken over and over. */
static void *churn(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!stop) {
		fork_guard_step(&guard);
		pthread_mutex_unlock(&mu);
		for (int i = 0; i < 64; i++) {
			/* small blocks, and large ones (an allocator serves those apart, under a lock of
			 * their own) */
			char *p = malloc(i % 8 ? 16 + (size_t)i * 97 : (size_t)(1 << 20) + (size_t)i);

			if (p)
				memset(p, i, 16);
			keep = p;
			free(keep);
		}
		/* the environment's lock too (a library reading its settings, a jail's putenv) */
		setenv("SPACE_FORK_GUARD_TEST", rounds & 1 ? "a" : "bb", 1);
		pthread_mutex_lock(&mu);
		fork_guard_rest(&guard);
		rounds++;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* The child allocates (as a jail's setup does before exec) and exits; a child still there
 * after 5 s is stuck on a lock: killed, and counted. */
static int stuck_children(void)
{
	int stuck = 0;

	for (int i = 0; i < FORKS; i++) {
		pid_t pid = fork();
		int status, waited = 0;

		if (pid == 0) {
			char *p = malloc(1 << 20);
			static char env[] = "SPACE_FORK_GUARD_CHILD=1";

			_exit(p && putenv(env) == 0 && setenv("SPACE_FORK_GUARD_TEST", "c", 1) == 0 ? 0 : 1);
		}
		if (pid < 0)
			return -1;
		while (waitpid(pid, &status, WNOHANG) == 0) {
			if (++waited > 500) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				stuck++;
				break;
			}
			usleep(10000);
		}
	}
	return stuck;
}

int main(void)
{
	pthread_t t;
	int stuck;

	if (!CHECK(fork_guard_add(&guard, &mu) == 0, "a guard registered"))
		return DONE();
	if (!CHECK(pthread_create(&t, NULL, churn, NULL) == 0, "a thread that allocates all the time"))
		return DONE();
	stuck = stuck_children();
	stop = true;
	pthread_join(t, NULL);
	CHECK(stuck == 0, "%d forks while it allocated: every child allocated and exited (%d stuck)", FORKS, stuck);
	CHECK(rounds > 0, "the thread went on between forks (%lu steps)", rounds);
	fork_guard_remove(&guard);
	return DONE();
}
