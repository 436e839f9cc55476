/* fuzz_tar.c -- libFuzzer target: the tar reader behind `tar-in` (src/agent/fs/tar_read.c), which
 * parses what a client uploads, and the entry-name check that keeps extraction inside the
 * target directory (tar_name_clean).
 *
 * Byte 0 chooses the size of the reads the stream is delivered in (0: as much as asked, as a
 * file; else that many bytes, as a pipe's short reads); the rest is the tar stream.  Every
 * entry's data is read to its end.  Beyond the sanitizers the harness checks:
 *   - an entry's name and link target are at most TAR_NAME_MAX bytes; a file's data is
 *     exactly its size; errors are EINVAL (malformed) or ENOMEM;
 *   - a name tar_name_clean accepts is relative, has no empty, "." or ".." component;
 *   - the writer round-trips the entry: its header(s) read back give the same name, link
 *     target, size, mode, ids, mtime seconds, user and group names. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fs/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_tar: %s:%d: %s\n", __FILE__, __LINE__, #c); abort(); } } while (0)
#define MAX_ENTRIES 64

struct src {
	const uint8_t *p;
	size_t n, pos, chunk;
};

static ssize_t src_read(void *ctx, void *buf, size_t n)
{
	struct src *s = ctx;

	if (s->chunk && n > s->chunk)
		n = s->chunk;
	if (n > s->n - s->pos)
		n = s->n - s->pos;
	memcpy(buf, s->p + s->pos, n);
	s->pos += n;
	return (ssize_t)n;
}

static void check_clean(const char *name)
{
	static char out[TAR_NAME_MAX + 1];
	space_err err;
	const char *p;

	if (tar_name_clean(name, out, &err) < 0) {
		MUST(err.code == EINVAL || err.code == ENAMETOOLONG);
		return;
	}
	MUST(strlen(out) <= TAR_NAME_MAX);
	if (!out[0])
		return;
	MUST(out[0] != '/' && out[strlen(out) - 1] != '/');
	for (p = out;;) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);

		MUST(n > 0);
		MUST(!(n == 1 && p[0] == '.'));
		MUST(!(n == 2 && p[0] == '.' && p[1] == '.'));
		if (!s)
			break;
		p = s + 1;
	}
}

/* Write e's header into memory and read it back. */
static void round_trip(const struct tar_entry *e)
{
	struct fs_out o = { .fd = -1, .len = 0, .cap = 64 * 1024 };
	struct tar_writer w;
	struct tar_reader r;
	struct tar_entry got;
	struct src s;
	space_err err;
	static char buf[64 * 1024];
	size_t len;

	o.buf = buf;
	tar_writer_init(&w, &o);
	MUST(tar_write_header(&w, e) == 0);
	tar_writer_free(&w);
	len = o.len; /* never flushed: the headers are far below the buffer's size */
	MUST(len % TAR_BLOCK == 0 && len >= TAR_BLOCK);
	s = (struct src){ (const uint8_t *)buf, len, 0, 0 };
	MUST(tar_reader_init(&r, src_read, &s, 4096) == 0);
	MUST(tar_next(&r, &got, &err) == 1);
	MUST(strcmp(got.name, e->name) == 0);
	MUST(strcmp(got.linkname, e->linkname) == 0);
	MUST(got.size == e->size);
	MUST(got.mode == e->mode);
	MUST(got.uid == e->uid && got.gid == e->gid);
	MUST(got.mtime == e->mtime);
	MUST(strcmp(got.uname, e->uname) == 0 && strcmp(got.gname, e->gname) == 0);
	tar_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tar_reader r;
	struct src s;
	static char buf[8192];
	int i;

	if (size < 1)
		return 0;
	s = (struct src){ data + 1, size - 1, 0, data[0] };
	if (tar_reader_init(&r, src_read, &s, 2048) < 0)
		return 0;
	for (i = 0; i < MAX_ENTRIES; i++) {
		struct tar_entry e;
		space_err err;
		uint64_t got = 0;
		ssize_t n;
		int rc = tar_next(&r, &e, &err);

		if (rc < 0) {
			MUST(err.code == EINVAL || err.code == ENOMEM);
			break;
		}
		if (rc == 0)
			break;
		MUST(strlen(e.name) <= TAR_NAME_MAX && strlen(e.linkname) <= TAR_NAME_MAX);
		MUST(e.mode <= 07777);
		check_clean(e.name);
		if (e.type == TAR_HARDLINK)
			check_clean(e.linkname);
		if (e.type != TAR_OTHER) {
			struct tar_entry c = e;

			/* The reader reports a V7 directory by its trailing slash; the type of a
			 * file written back with one would change, so leave those out. */
			if (!(e.type == TAR_FILE && e.name[0] && e.name[strlen(e.name) - 1] == '/'))
				round_trip(&c);
		}
		if (e.type != TAR_FILE)
			continue;
		while ((n = tar_read_data(&r, buf, sizeof(buf), &err)) > 0)
			got += (uint64_t)n;
		if (n < 0) {
			MUST(err.code == EINVAL);
			break;
		}
		MUST(got == e.size);
	}
	tar_reader_free(&r);
	return 0;
}
