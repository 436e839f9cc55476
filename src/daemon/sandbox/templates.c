/* templates.c -- import the templates `make` built into the state directory.
 *
 * A template directory holds vmlinuz, rootfs.ext4, template.json and digest
 * (see docs/design/guest.md). Import hard-links (or copies) the three files
 * into <state>/images/<digest>/ so the content a digest names never changes
 * under a running sandbox, even when `make` rebuilds the template; then the
 * store records the template and moves its tags to this digest. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "runtime.h"
#include "store/store.h"

static const char *const template_files[] = { "vmlinuz", "rootfs.ext4", "template.json" };

static int copy_file(const char *from, const char *to, space_err *err)
{
	pid_t pid;
	int status;

	if (link(from, to) == 0)
		return 0;
	if (errno != EXDEV && errno != EPERM && errno != EMLINK)
		return err_sys(err, errno, "linking %s to %s", from, to);
	pid = fork();
	if (pid < 0)
		return err_sys(err, errno, "fork");
	if (pid == 0) {
		execlp("cp", "cp", "--sparse=always", "--reflink=auto", "--", from, to, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return err_set(err, EIO, "copying %s to %s failed", from, to);
	/* cp honours the daemon's umask (077); jailed QEMUs read the kernel
	 * and the image (their directory is root-only). */
	if (chmod(to, 0644) < 0)
		return err_sys(err, errno, "chmod %s", to);
	return 0;
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

/* Makes <state>/images/<hex> hold the template's files; fills dest. */
static int import_files(struct spaced *d, const char *src, const char *digest, char dest[PATH_MAX], space_err *err)
{
	char tmp[PATH_MAX], from[PATH_MAX], to[PATH_MAX], images[PATH_MAX];
	struct stat st;
	size_t i;

	snprintf(images, sizeof(images), "%s/images", d->cfg.state_dir);
	snprintf(dest, PATH_MAX, "%s/%s", images, digest + 7);
	if (stat(dest, &st) == 0)
		return 0;
	if (mkdir(images, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "creating %s", images);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", images, digest + 7);
	for (i = 0; i < sizeof(template_files) / sizeof(*template_files); i++) {
		snprintf(to, sizeof(to), "%s/%s", tmp, template_files[i]);
		unlink(to);
	}
	rmdir(tmp);
	if (mkdir(tmp, 0755) < 0)
		return err_sys(err, errno, "creating %s", tmp);
	for (i = 0; i < sizeof(template_files) / sizeof(*template_files); i++) {
		snprintf(from, sizeof(from), "%s/%s", src, template_files[i]);
		snprintf(to, sizeof(to), "%s/%s", tmp, template_files[i]);
		if (copy_file(from, to, err) < 0)
			return -1;
	}
	if (rename(tmp, dest) < 0)
		return err_sys(err, errno, "renaming %s", tmp);
	return 0;
}

static int import_one(struct spaced *d, const char *src, space_err *err)
{
	char path[PATH_MAX], dest[PATH_MAX];
	struct template_rec t = { 0 };
	json_error_t jerr;
	json_t *cfg, *v;
	struct stat st;
	int rc = -1;

	if (read_digest(src, t.digest, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/template.json", src);
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
	if (import_files(d, src, t.digest, dest, err) < 0) {
		err_wrap(err, "importing %s", src);
		goto out;
	}
	snprintf(t.dir, sizeof(t.dir), "%s", dest);
	snprintf(path, sizeof(path), "%s/rootfs.ext4", dest);
	if (stat(path, &st) == 0) {
		t.image_bytes = st.st_size;
		t.created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	}
	/* The empty overlay every cold boot's disk starts as: made once here,
	 * so a create copies a file instead of running qemu-img. */
	if (disk_template_seed(d, &t, path, err) < 0)
		goto out;
	if (store_template_put(d->store, &t, err) < 0)
		goto out;
	log_info("template %s: %s", t.name, t.digest);
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
		if (import_one(d, src, &e) < 0) {
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
