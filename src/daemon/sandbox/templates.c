/* templates.c -- import the templates `make` built into the state directory.
 *
 * A template directory holds vmlinuz, rootfs.ext4, template.json and digest
 * (see docs/design/guest.md). Import checks each of the three files (regular,
 * root's, writable by nobody else), hashes them as build.sh does and compares
 * with the digest, then hard-links (or copies) those very files into
 * <state>/images/<digest>/ so the content a digest names never changes under a
 * running sandbox, even when `make` rebuilds the template; then the store
 * records the template and moves its tags to this digest. */
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "egress/policy.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"

static const char *const template_files[] = { "vmlinuz", "rootfs.ext4", "template.json" };
#define NFILES 3
/* template.json is small; anything larger is not one of ours. */
#define MAX_JSON (64u << 10)
/* The one line of template.json the digest leaves out (docs/design/guest.md). */
#define CREATED_AT_LINE "  \"created_at\": "

/* Opens one file of a template for import: a regular file (not a symbolic
 * link) owned by root or by us that nobody else may write. Everything after
 * works on this fd, so the file checked is the file hashed and linked. */
static int open_checked(const char *dir, const char *name, space_err *err)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return errno == ELOOP ? err_set(err, EACCES, "%s is a symbolic link", path)
				      : err_sys(err, errno, "opening %s", path);
	if (fstat(fd, &st) < 0) {
		err_sys(err, errno, "%s", path);
	} else if (!S_ISREG(st.st_mode)) {
		err_set(err, EACCES, "%s is not a regular file", path);
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		err_set(err, EACCES, "%s belongs to uid %u, not to root", path, (unsigned)st.st_uid);
	} else if (st.st_mode & 022) {
		err_set(err, EACCES, "%s is writable by group or others (mode %04o)", path,
			(unsigned)(st.st_mode & 07777));
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

static void hex32(const unsigned char md[32], char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/*
 * Hashing base's 2 GiB image takes seconds, at every first import into a new
 * state directory. So the hash is remembered on the file itself, in the xattr
 * user.space.sha256 = "v1 <size> <mtime s>.<mtime ns> <hex>", trusted while
 * size and mtime still match. That is as safe as the file: only its owner
 * (root, or us; open_checked refuses anything else writable) can set a user
 * xattr on it or set its mtime back after writing; anyone else's write
 * moves the mtime on. A file system without user xattrs just hashes again.
 */
#define HASH_XATTR "user.space.sha256"

static bool cached_hash(int fd, const struct stat *st, char out[65])
{
	char want[160], got[160];
	ssize_t n = fgetxattr(fd, HASH_XATTR, got, sizeof(got) - 1);

	if (n <= 0)
		return false;
	got[n] = '\0';
	snprintf(want, sizeof(want), "v1 %lld %lld.%09ld ", (long long)st->st_size, (long long)st->st_mtim.tv_sec,
		 st->st_mtim.tv_nsec);
	if (strncmp(got, want, strlen(want)) != 0 || strlen(got) != strlen(want) + 64 ||
	    strspn(got + strlen(want), "0123456789abcdef") != 64)
		return false;
	memcpy(out, got + strlen(want), 65);
	return true;
}

static void remember_hash(int fd, const struct stat *st, const char hex[65])
{
	char v[160];
	int n = snprintf(v, sizeof(v), "v1 %lld %lld.%09ld %s", (long long)st->st_size,
			 (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, hex);

	if (fsetxattr(fd, HASH_XATTR, v, (size_t)n, 0) < 0 && errno != ENOTSUP && errno != EPERM)
		log_debug("remembering a hash: %s", strerror(errno));
}

int template_remember_hash(const char *path, const char hex[65], space_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return err_sys(err, errno, "opening %s", path);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return err_sys(err, errno, "%s", path);
	}
	remember_hash(fd, &st, hex);
	close(fd);
	return 0;
}

static int sha256_fd(int fd, const char *what, char out[65], space_err *err)
{
	_cleanup_free_ unsigned char *buf = malloc(1u << 20);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int mdlen;
	struct stat st;
	int rc = -1;
	ssize_t n;

	if (fstat(fd, &st) == 0 && cached_hash(fd, &st, out)) {
		EVP_MD_CTX_free(ctx);
		return 0;
	}
	if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		err_set(err, ENOMEM, "hashing %s: out of memory", what);
		goto out;
	}
	while ((n = read(fd, buf, 1u << 20)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_sys(err, errno, "reading %s", what);
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hex32(md, out);
	remember_hash(fd, &st, out);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

/* template.json's hash as the digest counts it: every byte before the
 * created_at line, which must be followed by nothing but the closing brace. */
static int sha256_template_json(int fd, const char *src, char out[65], space_err *err)
{
	_cleanup_free_ char *buf = malloc(MAX_JSON + 1);
	unsigned char md[32];
	const char *line, *rest;
	ssize_t n;

	if (!buf)
		return err_set(err, ENOMEM, "out of memory");
	n = pread(fd, buf, MAX_JSON + 1, 0);
	if (n < 0)
		return err_sys(err, errno, "reading %s/template.json", src);
	if ((size_t)n > MAX_JSON)
		return err_set(err, EINVAL, "%s/template.json is over %u bytes", src, MAX_JSON);
	buf[n] = '\0';
	line = strstr(buf, "\n" CREATED_AT_LINE);
	rest = line ? strchr(line + 1, '\n') : NULL;
	if (!line || !rest || strcmp(rest + 1, "}\n") != 0)
		return err_set(err, EINVAL, "%s/template.json: not as build.sh writes it (created_at last)", src);
	SHA256((const unsigned char *)buf, (size_t)(line + 1 - buf), md);
	hex32(md, out);
	return 0;
}

/* Hashes the opened files the way build.sh does and compares with `digest`. */
static int verify_digest(const int fds[NFILES], const char *src, const char *digest, space_err *err)
{
	char h[NFILES][65], inputs[512], what[PATH_MAX], got[65];
	unsigned char md[32];
	int len = 0;

	for (int i = 0; i < NFILES; i++) {
		snprintf(what, sizeof(what), "%s/%s", src, template_files[i]);
		if ((i == 2 ? sha256_template_json(fds[i], src, h[i], err) : sha256_fd(fds[i], what, h[i], err)) < 0)
			return -1;
		len += snprintf(inputs + len, sizeof(inputs) - (size_t)len, "%s  %s\n", h[i], template_files[i]);
	}
	SHA256((const unsigned char *)inputs, (size_t)len, md);
	hex32(md, got);
	if (strcmp(got, digest + 7) != 0)
		return err_set(err, EINVAL, "files do not match the digest: they hash to sha256:%s, digest says %s", got,
			       digest);
	return 0;
}

/* Puts the file open as fd at `to`: a hard link of that very inode (through
 * /proc, so a file swapped in since it was checked cannot be linked
 * instead), else a copy read from the same place. */
static int link_fd(int fd, const char *to, space_err *err)
{
	char proc[64];
	pid_t pid;
	int status;

	snprintf(proc, sizeof(proc), "/proc/%d/fd/%d", (int)getpid(), fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != EXDEV && errno != EPERM && errno != EMLINK)
		return err_sys(err, errno, "linking %s", to);
	pid = fork();
	if (pid < 0)
		return err_sys(err, errno, "fork");
	if (pid == 0) {
		execlp("cp", "cp", "--sparse=always", "--reflink=auto", "--", proc, to, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(err, EIO, "copying to %s failed", to);
	/* cp honours the daemon's umask (077); jailed QEMUs read the kernel
	 * and the image (their directory is root-only). */
	if (chmod(to, 0644) < 0)
		return err_sys(err, errno, "chmod %s", to);
	return 0;
}

static void close_all(int fds[NFILES])
{
	for (int i = 0; i < NFILES; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int read_digest(const char *dir, char out[80], space_err *err)
{
	char path[PATH_MAX], buf[128] = { 0 };
	_cleanup_fclose_ FILE *f = NULL;
	size_t n;

	snprintf(path, sizeof(path), "%s/digest", dir);
	f = fopen(path, "re");
	if (!f)
		return err_sys(err, errno, "opening %s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	if (n != 71 || strncmp(buf, "sha256:", 7) != 0 || strspn(buf + 7, "0123456789abcdef") != 64)
		return err_set(err, EINVAL, "%s: not a sha256 digest", path);
	memcpy(out, buf, 72);
	return 0;
}

/* Links the checked, verified files into a fresh directory renamed to dest. */
static int link_all(const int fds[NFILES], const char *images, const char *digest, const char *dest,
		    space_err *err)
{
	char tmp[PATH_MAX], to[PATH_MAX];
	size_t i;

	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", images, digest + 7);
	for (i = 0; i < NFILES; i++) {
		snprintf(to, sizeof(to), "%s/%s", tmp, template_files[i]);
		unlink(to);
	}
	rmdir(tmp);
	if (mkdir(tmp, 0755) < 0)
		return err_sys(err, errno, "creating %s", tmp);
	for (i = 0; i < NFILES; i++) {
		snprintf(to, sizeof(to), "%s/%s", tmp, template_files[i]);
		if (link_fd(fds[i], to, err) < 0)
			return -1;
	}
	if (rename(tmp, dest) < 0)
		return err_sys(err, errno, "renaming %s", tmp);
	return 0;
}

/* Makes <state>/images/<hex> hold the template's files, each checked and
 * the whole verified against the digest first; fills dest. A directory
 * already there was verified when it was made: it is ours (state dir). */
static int import_files(const char *state_dir, const char *src, const char *digest, char dest[PATH_MAX],
			space_err *err)
{
	int fds[NFILES] = { -1, -1, -1 };
	char images[PATH_MAX];
	struct stat st;
	int rc = -1;

	snprintf(images, sizeof(images), "%s/images", state_dir);
	snprintf(dest, PATH_MAX, "%s/%s", images, digest + 7);
	if (stat(dest, &st) == 0)
		return 0;
	if (mkdir(images, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", images);
	for (int i = 0; i < NFILES; i++)
		if ((fds[i] = open_checked(src, template_files[i], err)) < 0)
			goto out;
	if (verify_digest(fds, src, digest, err) < 0 || link_all(fds, images, digest, dest, err) < 0)
		goto out;
	rc = 0;
out:
	close_all(fds);
	return rc;
}

/* A build's defaults beyond env and user (template.json's workdir, start, expose, labels,
 * from) into t->config, each checked for its shape: a workdir the sessions start in must be
 * an absolute path. */
static int import_config(json_t *cfg, struct template_rec *t, const char *path, space_err *err)
{
	static const char *const keys[] = { "workdir", "start", "expose", "labels", "from", "build_key" };
	json_t *wd = json_object_get(cfg, "workdir");

	if (wd && (!json_is_string(wd) || json_string_value(wd)[0] != '/' ||
		   json_string_length(wd) >= SPEC_CWD_MAX || strchr(json_string_value(wd), '\n')))
		return err_set(err, EINVAL, "%s: workdir: an absolute path", path);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(cfg, keys[i]);

		if (!v)
			continue;
		if (!t->config && !(t->config = json_object()))
			return err_set(err, ENOMEM, "out of memory");
		json_object_set(t->config, keys[i], v);
	}
	return 0;
}

int template_import_dir(struct store *conn, const char *state_dir, const char *src, char digest[80],
			space_err *err)
{
	char path[PATH_MAX], dest[PATH_MAX];
	struct template_rec t = { 0 };
	json_error_t jerr;
	json_t *cfg, *v;
	struct stat st;
	int rc = -1;

	if (read_digest(src, t.digest, err) < 0)
		return -1;
	if (import_files(state_dir, src, t.digest, dest, err) < 0)
		return err_wrap(err, "importing %s", src);
	/* Our verified copy, not the source, which may have changed since. */
	snprintf(path, sizeof(path), "%s/template.json", dest);
	cfg = json_load_file(path, 0, &jerr);
	if (!cfg)
		return err_set(err, EINVAL, "%s: %s", path, jerr.text);
	v = json_object_get(cfg, "name");
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= sizeof(t.name)) {
		err_set(err, EINVAL, "%s: name missing", path);
		goto out;
	}
	snprintf(t.name, sizeof(t.name), "%s", json_string_value(v));
	t.tags = json_incref(json_object_get(cfg, "tags"));
	if (!json_is_array(t.tags)) {
		json_decref(t.tags);
		t.tags = json_pack("[s+]", t.name, ":latest");
	}
	t.vcpus = (int)json_integer_value(json_object_get(cfg, "vcpus"));
	t.memory_mib = (int)json_integer_value(json_object_get(cfg, "memory_mib"));
	v = json_object_get(cfg, "default_user");
	snprintf(t.default_user, sizeof(t.default_user), "%s", json_is_string(v) ? json_string_value(v) : "root");
	t.env = json_is_object(json_object_get(cfg, "env")) ? json_incref(json_object_get(cfg, "env")) : json_object();
	/* Its sandboxes' default egress policy (none: deny-all), checked like a client's. */
	v = json_object_get(cfg, "network");
	if (v && !json_is_null(v)) {
		struct egress_policy *pol = NULL;
		space_err pe = { 0 };

		if (egress_policy_parse(v, false, &pol, &pe) < 0) {
			err_set(err, EINVAL, "%s: network: %s", path, pe.msg);
			goto out;
		}
		t.network = egress_policy_json(pol, false);
		egress_policy_free(pol);
	}
	if (import_config(cfg, &t, path, err) < 0)
		goto out;
	snprintf(t.dir, sizeof(t.dir), "%s", dest);
	snprintf(path, sizeof(path), "%s/rootfs.ext4", dest);
	if (stat(path, &st) == 0) {
		t.image_bytes = st.st_size;
		t.created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	}
	/* The empty overlay every cold boot's disk starts as: made once here,
	 * so a create copies a file instead of running qemu-img. */
	if (disk_template_seed(NULL, &t, path, err) < 0)
		goto out;
	if (store_template_put(conn, &t, err) < 0)
		goto out;
	log_info("template %s: %s", t.name, t.digest);
	if (digest)
		snprintf(digest, 80, "%s", t.digest);
	rc = 0;
out:
	template_rec_clear(&t);
	json_decref(cfg);
	return rc;
}

int templates_import(struct spaced *d, space_err *err)
{
	_cleanup_closedir_ DIR *dir = opendir(d->cfg.templates_dir);
	struct dirent *de;
	int n = 0;

	if (!dir) {
		log_warn("templates directory %s: %s (run `make` to build templates)", d->cfg.templates_dir,
			 strerror(errno));
		return 0;
	}
	while ((de = readdir(dir))) {
		char src[PATH_MAX], probe[PATH_MAX];
		space_err e = { 0 };

		if (de->d_name[0] == '.')
			continue;
		snprintf(src, sizeof(src), "%s/%s", d->cfg.templates_dir, de->d_name);
		snprintf(probe, sizeof(probe), "%s/digest", src);
		if (access(probe, R_OK) < 0)
			continue;
		if (template_import_dir(d->store, d->cfg.state_dir, src, NULL, &e) < 0) {
			log_warn("template in %s not imported: %s", src, e.msg);
			continue;
		}
		n++;
	}
	(void)err;
	if (!n)
		log_warn("no templates found in %s", d->cfg.templates_dir);
	return 0;
}
