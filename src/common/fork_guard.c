/* fork_guard.c -- fork() waits for the threads that allocate to be between steps (fork_guard.h) */
#include "fork_guard.h"

#include <errno.h>

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fork_guard *guards;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_rc;

/* Before fork(): every guarded thread between steps, held there by its own mutex. */
static void prepare(void)
{
	pthread_mutex_lock(&list_mu);
	for (struct fork_guard *g = guards; g; g = g->next) {
		pthread_mutex_lock(g->mu);
		g->forking = true;
		while (g->busy)
			pthread_cond_wait(&g->between, g->mu);
	}
}

/* After fork(), in the parent and in the child alike (the child's copies are its own). */
static void release(void)
{
	for (struct fork_guard *g = guards; g; g = g->next) {
		g->forking = false;
		pthread_cond_broadcast(&g->resume);
		pthread_mutex_unlock(g->mu);
	}
	pthread_mutex_unlock(&list_mu);
}

static void install(void)
{
	once_rc = pthread_atfork(prepare, release, release);
}

int fork_guard_add(struct fork_guard *g, pthread_mutex_t *mu)
{
	int rc;

	if ((rc = pthread_once(&once, install)) != 0 || (rc = once_rc) != 0)
		return rc;
	if ((rc = pthread_cond_init(&g->between, NULL)) != 0)
		return rc;
	if ((rc = pthread_cond_init(&g->resume, NULL)) != 0) {
		pthread_cond_destroy(&g->between);
		return rc;
	}
	g->mu = mu;
	g->busy = g->forking = false;
	pthread_mutex_lock(&list_mu);
	g->next = guards;
	guards = g;
	pthread_mutex_unlock(&list_mu);
	return 0;
}

void fork_guard_remove(struct fork_guard *g)
{
	struct fork_guard **pp;

	pthread_mutex_lock(&list_mu);
	for (pp = &guards; *pp; pp = &(*pp)->next) {
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	}
	pthread_mutex_unlock(&list_mu);
	pthread_cond_destroy(&g->between);
	pthread_cond_destroy(&g->resume);
}

void fork_guard_step(struct fork_guard *g)
{
	while (g->forking)
		pthread_cond_wait(&g->resume, g->mu);
	g->busy = true;
}

void fork_guard_rest(struct fork_guard *g)
{
	g->busy = false;
	pthread_cond_broadcast(&g->between);
}
