/* paths.c -- where a sandbox's files live.
 *
 * Persistent files (overlay disk, console log, output spools) go under the
 * state directory. Unix sockets go to a short directory because sun_path
 * holds 108 bytes and state directories can be long; guest RAM goes to tmpfs
 * (/dev/shm) so memory snapshots and copy-on-write clones can map it. Both
 * are named by a hash of the state directory so daemons side by side never
 * collide. */
#include <stdio.h>

#include "daemon.h"

void path_run_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s", d->cfg.state_dir, sb_id);
}

void path_sock_dir(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/run/space/%s/%s", d->state_tag, sb_id);
}

void path_mem_file(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "/dev/shm/space-%s/%s.mem", d->state_tag, sb_id);
}

void path_console_log(const struct spaced *d, const char *sb_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s/console.log", d->cfg.state_dir, sb_id);
}

void path_session_spool(const struct spaced *d, const char *sb_id, const char *ss_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/sandboxes/%s/sessions/%s.out", d->cfg.state_dir, sb_id, ss_id);
}
