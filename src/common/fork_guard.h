/* fork_guard.h -- fork() in a process with threads that allocate (fork_guard.c)
 *
 * A child that fork() makes has only the thread that called it; a lock another thread held at
 * that moment (the allocator's, a library's) stays held in the child for ever, and a child
 * that takes it before exec hangs. Threads that allocate mark each stretch of work as a step;
 * a fork (pthread_atfork's prepare) waits until every registered thread is between steps and
 * keeps it there until fork() returns. The threads wait on their own mutex between steps, so
 * they hold no other lock then. posix_spawn (clone, no atfork) does not wait. */
#ifndef SPACE_FORK_GUARD_H
#define SPACE_FORK_GUARD_H

#include <pthread.h>
#include <stdbool.h>

struct fork_guard {
	pthread_mutex_t *mu;   /* the thread's own mutex, held by it between steps */
	pthread_cond_t between; /* signalled when a step ends */
	pthread_cond_t resume; /* signalled when a fork is done */
	bool busy;             /* in a step (under *mu) */
	bool forking;          /* a fork waits: no new step begins */
	struct fork_guard *next;
};

/* Registers a thread's guard (mu: its mutex). 0, or an errno value. */
int fork_guard_add(struct fork_guard *g, pthread_mutex_t *mu);
void fork_guard_remove(struct fork_guard *g);
/* Under *g->mu: a step begins (waiting first while a fork is under way; then the thread may
 * unlock mu and work), or ends. */
void fork_guard_step(struct fork_guard *g);
void fork_guard_rest(struct fork_guard *g);

#endif
