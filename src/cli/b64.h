/* b64.h -- base64 decoding of event-stream payloads */
#ifndef SPACE_CLI_B64_H
#define SPACE_CLI_B64_H

#include <stddef.h>
#include <sys/types.h>

/* Bytes needed to decode n characters of base64 (an upper bound). */
#define CTL_B64_DECODED_MAX(n) (((n) / 4 + 1) * 3)

/* Decode standard base64 (RFC 4648, '=' padding optional, whitespace
 * ignored) into out, which has room for CTL_B64_DECODED_MAX(n) bytes.
 * Returns the number of bytes written, or -1 on a character outside the
 * alphabet, misplaced padding or a dangling single character. */
ssize_t ctl_b64_decode(const char *in, size_t n, unsigned char *out);

#endif
