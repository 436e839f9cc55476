/* context.c -- build contexts: upload (hashed as written), the checks a hostile tar must pass,
 * the manifest, and the selection of entries a copy step sends into the builder (libarchive
 * reads and writes the tars: docs/design/builds.md says why). */
#include "context.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "model/model.h"

struct context_upload {
	char dir[PATH_MAX], tmp[PATH_MAX];
	int fd;
	uint64_t bytes, max;
	EVP_MD_CTX *md;
};

static void hex(const unsigned char *md, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

struct context_upload *context_upload_begin(const char *dir, uint64_t max, space_err *err)
{
	struct context_upload *u = calloc(1, sizeof(*u));
	char id[ID_LEN];

	if (!u || !(u->md = EVP_MD_CTX_new()) || EVP_DigestInit_ex(u->md, EVP_sha256(), NULL) != 1) {
		if (u)
			EVP_MD_CTX_free(u->md);
		free(u);
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		err_sys(err, errno, "creating %s", dir);
		goto fail;
	}
	id_new(id, "up-");
	snprintf(u->dir, sizeof(u->dir), "%s", dir);
	snprintf(u->tmp, sizeof(u->tmp), "%s/.%s.tar", dir, id);
	u->max = max;
	u->fd = open(u->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (u->fd < 0) {
		err_sys(err, errno, "creating %s", u->tmp);
		goto fail;
	}
	return u;
fail:
	EVP_MD_CTX_free(u->md);
	free(u);
	return NULL;
}

int context_upload_write(struct context_upload *u, const void *buf, size_t len, space_err *err)
{
	const char *p = buf;

	if (u->bytes + len > u->max)
		return err_set(err, E2BIG, "the context is over its limit of %llu MiB", (unsigned long long)(u->max >> 20));
	EVP_DigestUpdate(u->md, buf, len);
	while (len) {
		ssize_t n = write(u->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(err, errno == ENOSPC ? ENOSPC : errno, "writing the context");
		p += n;
		len -= (size_t)n;
		u->bytes += (uint64_t)n;
	}
	return 0;
}

void context_upload_abort(struct context_upload *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	unlink(u->tmp);
	EVP_MD_CTX_free(u->md);
	free(u);
}

/* ---- checking a tar and its manifest ---- */

/* "./a//b/" -> "a/b"; -1 for an absolute name, a ".." component or an empty result. */
static int clean_name(const char *in, char *out, size_t max)
{
	size_t o = 0;
	const char *p = in;

	if (!in || in[0] == '/')
		return -1;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -1;
		if (n && !(n == 1 && p[0] == '.')) {
			if (o + n + 2 > max)
				return -1;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n + (e ? 1 : 0);
	}
	out[o] = '\0';
	return 0;
}

static struct archive *open_tar(const char *path, space_err *err)
{
	struct archive *a = archive_read_new();

	if (!a) {
		err_set(err, ENOMEM, "out of memory");
		return NULL;
	}
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_none(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		err_set(err, EINVAL, "not a tar: %s", archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

static const char *type_of(const struct archive_entry *e)
{
	if (archive_entry_hardlink((struct archive_entry *)e))
		return "h";
	switch (archive_entry_filetype((struct archive_entry *)e)) {
	case AE_IFREG: return "f";
	case AE_IFDIR: return "d";
	case AE_IFLNK: return "l";
	default: return NULL;
	}
}

static int hash_data(struct archive *a, char out[65], space_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char buf[1 << 16], sum[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	la_ssize_t got;

	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return err_set(err, ENOMEM, "out of memory");
	}
	while ((got = archive_read_data(a, buf, sizeof(buf))) > 0)
		EVP_DigestUpdate(md, buf, (size_t)got);
	EVP_DigestFinal_ex(md, sum, &n);
	EVP_MD_CTX_free(md);
	if (got < 0)
		return err_set(err, EINVAL, "a truncated or corrupt tar: %s", archive_error_string(a));
	hex(sum, 32, out);
	return 0;
}

/* One entry into the manifest, checked. */
static int add_entry(struct archive *a, struct archive_entry *e, json_t *list, space_err *err)
{
	const char *name = archive_entry_pathname(e), *t = type_of(e);
	char path[PATH_MAX], link[PATH_MAX] = "", h[65] = "";
	json_t *j;

	if (!name || clean_name(name, path, sizeof(path)) < 0)
		return err_set(err, EINVAL, "entry '%.200s': absolute names and '..' are refused", name ? name : "");
	if (!path[0])
		return 0; /* "./": the context's root */
	if (!t)
		return err_set(err, EINVAL, "entry '%.200s': only files, directories and links may be in a context", path);
	if (t[0] == 'h') {
		if (clean_name(archive_entry_hardlink(e), link, sizeof(link)) < 0)
			return err_set(err, EINVAL, "entry '%.200s': a hard link out of the context", path);
		/* its target must be a file earlier in the tar */
		bool found = false;
		size_t i;
		json_t *x;
		json_array_foreach (list, i, x)
			found |= strcmp(json_string_value(json_object_get(x, "p")), link) == 0 &&
				 strcmp(json_string_value(json_object_get(x, "t")), "f") == 0;
		if (!found)
			return err_set(err, EINVAL, "entry '%.200s': a hard link to '%.200s', no file before it", path, link);
	} else if (t[0] == 'l') {
		snprintf(link, sizeof(link), "%s", archive_entry_symlink(e) ? archive_entry_symlink(e) : "");
	} else if (t[0] == 'f' && hash_data(a, h, err) < 0) {
		return err_wrap(err, "entry '%.200s'", path);
	}
	j = json_pack("{s:s,s:s,s:i,s:I,s:I,s:I,s:s,s:s}", "p", path, "t", t, "m", (int)(archive_entry_perm(e) & 07777),
		      "u", (json_int_t)archive_entry_uid(e), "g", (json_int_t)archive_entry_gid(e), "s",
		      (json_int_t)(t[0] == 'f' ? archive_entry_size(e) : 0), "h", h, "l", link);
	if (!j || json_array_append_new(list, j) < 0)
		return err_set(err, ENOMEM, "out of memory");
	return 0;
}

static json_t *scan(const char *path, space_err *err)
{
	struct archive *a = open_tar(path, err);
	struct archive_entry *e;
	json_t *list = json_array();
	int rc;

	if (!a || !list) {
		json_decref(list);
		if (a)
			archive_read_free(a);
		return a ? (err_set(err, ENOMEM, "out of memory"), NULL) : NULL;
	}
	while ((rc = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (json_array_size(list) >= CONTEXT_ENTRIES_MAX) {
			err_set(err, EINVAL, "more than %d entries", CONTEXT_ENTRIES_MAX);
			goto fail;
		}
		if (add_entry(a, e, list, err) < 0)
			goto fail;
	}
	if (rc != ARCHIVE_EOF) {
		err_set(err, EINVAL, "a truncated or corrupt tar: %s", archive_error_string(a));
		goto fail;
	}
	archive_read_free(a);
	return list;
fail:
	archive_read_free(a);
	json_decref(list);
	return NULL;
}

static void paths_of(const char *dir, const char *digest, char tar[PATH_MAX], char man[PATH_MAX])
{
	const char *h = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;

	snprintf(tar, PATH_MAX, "%s/%s.tar", dir, h);
	snprintf(man, PATH_MAX, "%s/%s.json", dir, h);
}

int context_upload_finish(struct context_upload *u, char digest[72], uint64_t *bytes, space_err *err)
{
	unsigned char sum[EVP_MAX_MD_SIZE];
	char tar[PATH_MAX], man[PATH_MAX], tmpman[PATH_MAX];
	unsigned int n = 0;
	json_t *list = NULL;
	int rc = -1;

	EVP_DigestFinal_ex(u->md, sum, &n);
	memcpy(digest, "sha256:", 7);
	hex(sum, 32, digest + 7);
	*bytes = u->bytes;
	if (fsync(u->fd) < 0 || close(u->fd) < 0) {
		u->fd = -1;
		err_sys(err, errno, "writing the context");
		goto out;
	}
	u->fd = -1;
	paths_of(u->dir, digest, tar, man);
	if (access(tar, F_OK) == 0 && access(man, F_OK) == 0) {
		rc = 0; /* the same bytes are there already */
		goto out;
	}
	if (!u->bytes) {
		err_set(err, EINVAL, "an empty body: a context is a tar");
		goto out;
	}
	if (!(list = scan(u->tmp, err)))
		goto out;
	snprintf(tmpman, sizeof(tmpman), "%s.tmp", u->tmp);
	if (json_dump_file(list, tmpman, JSON_COMPACT) < 0) {
		err_set(err, EIO, "writing %s", tmpman);
		goto out;
	}
	if (rename(u->tmp, tar) < 0 || rename(tmpman, man) < 0) {
		err_sys(err, errno, "storing the context");
		unlink(tmpman);
		goto out;
	}
	rc = 0;
out:
	json_decref(list);
	context_upload_abort(u); /* unlinks the temporary file, if it is still there */
	return rc;
}

int context_exists(const char *dir, const char *digest, space_err *err)
{
	char tar[PATH_MAX], man[PATH_MAX];

	paths_of(dir, digest, tar, man);
	if (access(tar, R_OK) < 0 || access(man, R_OK) < 0)
		return err_set(err, ENOENT, "no context %s (PUT /v1/contexts first)", digest);
	return 0;
}

static json_t *manifest(const char *dir, const char *digest, space_err *err)
{
	char tar[PATH_MAX], man[PATH_MAX];
	json_error_t jerr;
	json_t *m;

	paths_of(dir, digest, tar, man);
	if (!(m = json_load_file(man, 0, &jerr)) || !json_is_array(m)) {
		json_decref(m);
		err_set(err, ENOENT, "no context %s (PUT /v1/contexts first)", digest);
		return NULL;
	}
	return m;
}

/* Is p src itself or below it? ("" = everything) */
static bool under(const char *p, const char *src)
{
	size_t n = strlen(src);

	return !n || (strncmp(p, src, n) == 0 && (p[n] == '\0' || p[n] == '/'));
}

int context_inputs(const char *dir, const char *digest, const char *src, char out[65], space_err *err)
{
	json_t *m = manifest(dir, digest, err), *x;
	EVP_MD_CTX *md;
	unsigned char sum[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	size_t i, hits = 0;

	if (!m)
		return -1;
	if (!(md = EVP_MD_CTX_new()) || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		json_decref(m);
		return err_set(err, ENOMEM, "out of memory");
	}
	json_array_foreach (m, i, x) {
		char *line;

		if (!under(json_string_value(json_object_get(x, "p")), src))
			continue;
		if (!(line = json_dumps(x, JSON_COMPACT | JSON_SORT_KEYS)))
			continue;
		EVP_DigestUpdate(md, line, strlen(line));
		EVP_DigestUpdate(md, "\n", 1);
		free(line);
		hits++;
	}
	EVP_DigestFinal_ex(md, sum, &n);
	EVP_MD_CTX_free(md);
	json_decref(m);
	if (!hits && src[0])
		return err_set(err, ENOENT, "'%.200s' is not in the context", src);
	hex(sum, 32, out);
	return 0;
}

/* ---- picking what a copy sends ---- */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* Where src goes: the directory to extract into, and the name src itself gets there ("" for a
 * directory, whose contents go straight in). */
static int place(const char *src, bool src_dir, const char *dest, char pdir[1024], char pname[PATH_MAX],
		 space_err *err)
{
	size_t n = strlen(dest);
	bool into = n && dest[n - 1] == '/';

	if (src_dir || into) {
		snprintf(pdir, 1024, "%.*s", (int)(into && n > 1 ? n - 1 : n), dest);
		snprintf(pname, PATH_MAX, "%s", src_dir ? "" : base_name(src));
		return 0;
	}
	const char *slash = strrchr(dest, '/');
	if (!slash || !slash[1])
		return err_set(err, EINVAL, "copy: destination '%.200s' is not a path", dest);
	snprintf(pdir, 1024, "%.*s", slash == dest ? 1 : (int)(slash - dest), dest);
	snprintf(pname, PATH_MAX, "%s", slash + 1);
	return 0;
}

/* src's entry name in the pick: under pname, or with src's prefix cut off. */
static int renamed(const char *p, const char *src, const char *pname, char out[PATH_MAX])
{
	size_t n = strlen(src);
	const char *rest = !n ? p : p[n] == '/' ? p + n + 1 : p + n;
	int w;

	if (pname[0])
		w = snprintf(out, PATH_MAX, "%s%s%s", pname, rest[0] ? "/" : "", rest);
	else
		w = snprintf(out, PATH_MAX, "%s", rest);
	return w < 0 || w >= PATH_MAX ? -1 : 0;
}

static int copy_data(struct archive *in, struct archive *out, space_err *err)
{
	char buf[1 << 16];
	la_ssize_t n;

	while ((n = archive_read_data(in, buf, sizeof(buf))) > 0)
		if (archive_write_data(out, buf, (size_t)n) != n)
			return err_set(err, EIO, "writing the copy: %s", archive_error_string(out));
	return n < 0 ? err_set(err, EINVAL, "reading the context: %s", archive_error_string(in)) : 0;
}

struct pick_job {
	const char *src, *pname;
	long uid, gid;
	struct archive *in, *out;
	size_t n;
};

static int pick_one(struct pick_job *j, struct archive_entry *e, space_err *err)
{
	char path[PATH_MAX], name[PATH_MAX], link[PATH_MAX];
	const char *hl = archive_entry_hardlink(e);

	if (clean_name(archive_entry_pathname(e), path, sizeof(path)) < 0 || !path[0] || !under(path, j->src))
		return 0;
	if (renamed(path, j->src, j->pname, name) < 0)
		return err_set(err, EINVAL, "copy: a name too long under '%.200s'", j->src);
	if (!name[0])
		return 0; /* the directory itself: it is the extraction's target */
	if (hl) {
		if (clean_name(hl, link, sizeof(link)) < 0 || !under(link, j->src))
			return err_set(err, EINVAL, "copy: '%.200s' is a hard link to a file outside '%.200s'", path, j->src);
		char to[PATH_MAX];
		if (renamed(link, j->src, j->pname, to) < 0)
			return err_set(err, EINVAL, "copy: a name too long");
		archive_entry_set_hardlink(e, to);
	}
	archive_entry_set_pathname(e, name);
	archive_entry_set_uid(e, j->uid >= 0 ? j->uid : 0);
	archive_entry_set_gid(e, j->gid >= 0 ? j->gid : 0);
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	if (archive_write_header(j->out, e) != ARCHIVE_OK)
		return err_set(err, EIO, "writing the copy: %s", archive_error_string(j->out));
	j->n++;
	return archive_entry_filetype(e) == AE_IFREG && !hl ? copy_data(j->in, j->out, err) : 0;
}

static int src_kind(const char *dir, const char *digest, const char *src, bool *is_dir, space_err *err)
{
	json_t *m = manifest(dir, digest, err), *x;
	size_t i;
	bool found = !src[0];

	if (!m)
		return -1;
	*is_dir = !src[0];
	json_array_foreach (m, i, x) {
		const char *p = json_string_value(json_object_get(x, "p"));

		if (strcmp(p, src) == 0) {
			found = true;
			*is_dir = strcmp(json_string_value(json_object_get(x, "t")), "d") == 0;
		} else if (src[0] && under(p, src)) {
			found = true; /* a directory the tar names only through its entries */
			*is_dir = true;
		}
	}
	json_decref(m);
	return found ? 0 : err_set(err, ENOENT, "'%.200s' is not in the context", src);
}

int context_pick(const char *dir, const char *digest, const char *src, const char *dest, long uid, long gid,
		 const char *out, struct context_pick *pick, space_err *err)
{
	char tar[PATH_MAX], man[PATH_MAX], pname[PATH_MAX];
	struct pick_job j = { .src = src, .pname = pname, .uid = uid, .gid = gid };
	struct archive_entry *e;
	struct stat st;
	bool is_dir;
	int rc = -1, r;

	memset(pick, 0, sizeof(*pick));
	if (src_kind(dir, digest, src, &is_dir, err) < 0 || place(src, is_dir, dest, pick->dir, pname, err) < 0)
		return -1;
	paths_of(dir, digest, tar, man);
	if (!(j.in = open_tar(tar, err)))
		return -1;
	if (!(j.out = archive_write_new()) || archive_write_set_format_pax_restricted(j.out) != ARCHIVE_OK ||
	    archive_write_open_filename(j.out, out) != ARCHIVE_OK) {
		err_set(err, EIO, "creating %s: %s", out, j.out ? archive_error_string(j.out) : "out of memory");
		goto done;
	}
	while ((r = archive_read_next_header(j.in, &e)) == ARCHIVE_OK)
		if (pick_one(&j, e, err) < 0)
			goto done;
	if (r != ARCHIVE_EOF) {
		err_set(err, EINVAL, "reading the context: %s", archive_error_string(j.in));
		goto done;
	}
	if (archive_write_close(j.out) != ARCHIVE_OK) {
		err_set(err, EIO, "writing the copy: %s", archive_error_string(j.out));
		goto done;
	}
	if (stat(out, &st) == 0)
		pick->bytes = (uint64_t)st.st_size;
	rc = 0;
done:
	archive_read_free(j.in);
	if (j.out)
		archive_write_free(j.out);
	if (rc < 0)
		unlink(out);
	return rc;
}
