/* memimg.h -- snapshot memory images as sealed memfds, so a jailed QEMU can map them private
 * but never write them */
#ifndef SPACE_MEMIMG_H
#define SPACE_MEMIMG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* A sealed copy of the memory image at path (write, grow, shrink and the
 * seals themselves sealed), made once and cached while the file at path is
 * the same (device, inode, size, mtime). The descriptor belongs to the
 * cache: dup or pass it, never close it. */
int memimg_fd(const char *path, space_err *err);

/* Drops the cached copy of path, if any (its snapshot is being removed).
 * Running VMs keep their mapping. */
void memimg_forget(const char *path);

/* Drops every cached copy (shutdown). */
void memimg_forget_all(void);

/* Bytes the cached copies hold (their allocated pages). */
int64_t memimg_cached_bytes(void);

#endif
