/* cleanup.h -- __attribute__((cleanup)) helpers and ownership hand-off */
#ifndef SPACE_CLEANUP_H
#define SPACE_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void cleanup_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void cleanup_closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(cleanup_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(cleanup_closedirp)))

/* Hand ownership out of a cleanup-managed variable. */
#define steal_pointer(pp)                                                      \
	({                                                                     \
		__typeof__(*(pp)) _v = *(pp);                                  \
		*(pp) = NULL;                                                  \
		_v;                                                            \
	})

static inline int steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

#endif
