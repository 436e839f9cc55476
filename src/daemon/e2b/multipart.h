/* multipart.h -- a streaming multipart/form-data parser (RFC 7578 / RFC 2046), pure: no I/O, no
 * allocation, bounded state. The caller keeps the unconsumed bytes and offers them again with
 * more appended; the parser never needs more than MP_HEADER_MAX + the delimiter's length of
 * them at once to make progress. Unit-tested (tests/unit/test_multipart.c) and fuzzed
 * (tests/fuzz/fuzz_multipart.c). */
#ifndef SPACE_E2B_MULTIPART_H
#define SPACE_E2B_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RFC 2046: a boundary is 1..70 characters. */
#define MP_BOUNDARY_MAX 70
/* One part's header block (all lines, up to the empty line): larger is refused. */
#define MP_HEADER_MAX 8192
/* A part's name or filename: longer is refused. */
#define MP_NAME_MAX 4096

enum mp_event {
	MP_NEED_MORE, /* offer the bytes not consumed again, with more appended (or eof) */
	MP_PART,      /* a part's headers were read: name, filename (has_filename) are set */
	MP_DATA,      /* data[0..dlen) of the current part; the caller may consume any prefix */
	MP_PART_END,  /* the current part ended */
	MP_DONE,      /* the close delimiter was read; whatever follows is epilogue (consumed) */
	MP_ERROR,     /* malformed: error says why; the parser stays in error */
};

struct mp {
	char delim[4 + MP_BOUNDARY_MAX + 1]; /* "\r\n--" boundary */
	size_t dlen;
	int state;
	bool at_start;   /* nothing consumed yet: the first delimiter may lack its CRLF */
	size_t pad;      /* transport padding skipped after a delimiter */
	char name[MP_NAME_MAX + 1];
	char filename[MP_NAME_MAX + 1];
	bool has_filename;
	const char *error;
};

/* The boundary parameter of a Content-Type "multipart/form-data; boundary=..." (quoted or
 * not): 0 with out set, -1 when the type is not multipart/form-data or has no valid boundary. */
int mp_boundary(const char *content_type, char out[MP_BOUNDARY_MAX + 1]);
/* Starts a parser for a boundary (1..MP_BOUNDARY_MAX characters): 0, or -1 if it is invalid. */
int mp_init(struct mp *m, const char *boundary);
/* Parses buf[0..len) (eof: no more bytes will come). Returns the event; *used: bytes of buf
 * consumed (for MP_DATA, *used == dlen and the caller may consume fewer). data points into buf. */
enum mp_event mp_next(struct mp *m, const uint8_t *buf, size_t len, bool eof, size_t *used, const uint8_t **data,
		      size_t *dlen);
/* Content-Disposition's parameters (pure; exposed for tests): "form-data; name=...;
 * filename=..." -> name, filename (has_filename). 0, or -1 when malformed or too long. */
int mp_disposition(const char *v, size_t len, char *name, char *filename, bool *has_filename);

#endif
