/* lsfmt.c -- `spacectl ls ID:PATH`'s output (see lsfmt.h) */
#include "lsfmt.h"

#include <string.h>
#include <time.h>

#include "client.h"

const char *ls_rel_name(const json_t *entry, const char *base)
{
	const char *path = ctl_jstr(entry, "path", NULL), *name = ctl_jstr(entry, "name", "?");
	size_t n = strlen(base);

	while (n > 1 && base[n - 1] == '/')
		n--;
	if (!path)
		return name;
	if (n == 1 && base[0] == '/')
		return path[0] == '/' && path[1] ? path + 1 : name;
	if (strncmp(path, base, n) == 0 && path[n] == '/' && path[n + 1])
		return path + n + 1;
	return name;
}

void ls_permissions(const json_t *entry, char out[11])
{
	const char *p = ctl_jstr(entry, "permissions", NULL), *type = ctl_jstr(entry, "type", "");
	long long mode = ctl_jint(entry, "mode", 0);
	static const char rwx[] = "rwxrwxrwx";
	int i;

	if (p && strlen(p) == 10) {
		memcpy(out, p, 11);
		return;
	}
	out[0] = strcmp(type, "dir") == 0 ? 'd' : strcmp(type, "symlink") == 0 ? 'l' :
		 strcmp(type, "file") == 0 ? '-' : '?';
	for (i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400 >> i)) ? rwx[i] : '-';
	if (mode & 04000)
		out[3] = out[3] == 'x' ? 's' : 'S';
	if (mode & 02000)
		out[6] = out[6] == 'x' ? 's' : 'S';
	if (mode & 01000)
		out[9] = out[9] == 'x' ? 't' : 'T';
	out[10] = '\0';
}

/* s with control characters as '?'. */
static void put_clean(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

static void fmt_time(const json_t *entry, char *buf, size_t len)
{
	json_t *m = json_object_get(entry, "mtime");
	time_t t;
	struct tm tm;

	if (!json_is_number(m)) {
		snprintf(buf, len, "-");
		return;
	}
	t = (time_t)json_number_value(m);
	if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M", &tm))
		snprintf(buf, len, "-");
}

static int width(const char *s)
{
	return (int)strlen(s);
}

int ls_print(FILE *out, const json_t *entries, const char *base, bool long_fmt)
{
	int wo = 0, wg = 0, ws = 0;
	const json_t *en;
	size_t i;

	if (!json_is_array(entries))
		return -1;
	if (long_fmt) {
		json_array_foreach(entries, i, en) {
			char size[32];

			snprintf(size, sizeof(size), "%lld", ctl_jint(en, "size", 0));
			if (width(ctl_jstr(en, "owner", "?")) > wo)
				wo = width(ctl_jstr(en, "owner", "?"));
			if (width(ctl_jstr(en, "group", "?")) > wg)
				wg = width(ctl_jstr(en, "group", "?"));
			if (width(size) > ws)
				ws = width(size);
		}
	}
	json_array_foreach(entries, i, en) {
		if (long_fmt) {
			char perms[11], when[32];

			ls_permissions(en, perms);
			fmt_time(en, when, sizeof(when));
			fprintf(out, "%s  ", perms);
			put_clean(out, ctl_jstr(en, "owner", "?"));
			fprintf(out, "%*s  ", wo - width(ctl_jstr(en, "owner", "?")), "");
			put_clean(out, ctl_jstr(en, "group", "?"));
			fprintf(out, "%*s  %*lld  %s  ", wg - width(ctl_jstr(en, "group", "?")), "",
				ws, ctl_jint(en, "size", 0), when);
		}
		put_clean(out, ls_rel_name(en, base));
		if (long_fmt && json_is_string(json_object_get(en, "symlink_target"))) {
			fputs(" -> ", out);
			put_clean(out, ctl_jstr(en, "symlink_target", ""));
		}
		fputc('\n', out);
	}
	return 0;
}
