/* qcow2.h -- reading the backing chain of a qcow2 layer from its header */
#ifndef SPACE_QCOW2_H
#define SPACE_QCOW2_H

#include <limits.h>
#include <stddef.h>

/* The backing file named in a qcow2 header ("" if none); pure, for tests.
 * -1 if hdr is not a qcow2 header or the name does not fit. */
int qcow2_backing_file(const unsigned char *hdr, size_t len, char *out, size_t outlen);

/* The backing file of the qcow2 at path into out ("" if it has none or is
 * not a qcow2, e.g. a raw template image; also "" if path is gone). A
 * relative name is resolved against path's directory. -1 when the header
 * cannot be read: the chain below is unknown. */
int qcow2_backing_of(const char *path, char out[PATH_MAX]);

#endif
