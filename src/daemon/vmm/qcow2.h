/* qcow2.h -- reading the backing chain of a qcow2 layer from its header */
#ifndef SPACE_QCOW2_H
#define SPACE_QCOW2_H

#include <limits.h>
#include <stddef.h>

#include "err.h"

/* The backing file named in a qcow2 header ("" if none); pure, for tests.
 * -1 if hdr is not a qcow2 header or the name does not fit. */
int qcow2_backing_file(const unsigned char *hdr, size_t len, char *out, size_t outlen);

/* The backing file of the qcow2 at path into out ("" if it has none or is
 * not a qcow2, e.g. a raw template image; also "" if path is gone). A
 * relative name is resolved against path's directory. -1 when the header
 * cannot be read: the chain below is unknown. */
int qcow2_backing_of(const char *path, char out[PATH_MAX]);

/* The daemon's own record of a layer's backing file: "<layer>.backing",
 * written when the daemon makes the layer (a freeze, a copy of a seed). A
 * header is written by the QEMU that used the layer, so a compromised one
 * can name any file there; the record it cannot touch (the disk
 * directories are root's). */
#define QCOW2_BACKING_SUFFIX ".backing"
int qcow2_backing_record(const char *layer, const char *backing, space_err *err);
/* 1 and out filled if layer has a record, 0 if it has none, -1 if it
 * cannot be read. */
int qcow2_backing_recorded(const char *layer, char out[PATH_MAX]);
/* Copies from's record (if any) to to's. */
int qcow2_backing_copy_record(const char *from, const char *to, space_err *err);
/* Removes layer's record (gone already is fine). */
void qcow2_backing_forget(const char *layer);

#endif
