/* build_vm.c -- the VMs of template builds (src/daemon/build/): a sandbox of role build that no
 * client sees, started like any create (from a template or from a build's layer), whose egress
 * is the build's policy, whose memory and disk are taken as layers between steps, and which is
 * deleted when its build is done with it, or found without a build (a restart). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runtime.h"

int build_vm_start(struct spaced *d, const struct create_req *req, struct create_reads *pre, const json_t *network,
		   build_vm_up_fn up, build_vm_layer_fn layer, void *arg, char sb_id[ID_LEN], space_err *err)
{
	struct create_req r = *req;
	struct sandbox *sb;

	/* The policy rides in the request (create_prepare takes it from there). */
	r.network = network ? (json_t *)network : NULL;
	if (sandbox_create_pre(d, &r, pre, ROLE_BUILD, &sb, err) < 0)
		return -1;
	sb->build_up = up;
	sb->build_layer = layer;
	sb->build_arg = arg;
	snprintf(sb_id, ID_LEN, "%s", sb->rec.id);
	return 0;
}

/* create.c, when a build VM's bring-up ended. */
void build_vm_up(struct sandbox *sb, const char *error)
{
	build_vm_up_fn up = sb->build_up;

	if (up)
		up(sb->d, sb->rec.id, error, sb->build_arg);
}

static void on_layer(struct sandbox *sb, struct snapshot_rec *snap, const char *error)
{
	build_vm_layer_fn fn = sb->build_layer;

	if (fn)
		fn(sb->d, snap ? snap->id : "", error, sb->build_arg);
}

static struct sandbox *own(struct spaced *d, const char *sb_id, space_err *err)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (!sb || sb->rec.role != ROLE_BUILD) {
		err_set(err, ENOENT, "build VM %s is gone", sb_id);
		return NULL;
	}
	if (sb->rec.state != SB_RUNNING) {
		err_set(err, EBUSY, "build VM %s is %s%s%s", sb_id, sb_state_name(sb->rec.state),
			sb->rec.error[0] ? ": " : "", sb->rec.error);
		return NULL;
	}
	return sb;
}

int build_vm_layer(struct spaced *d, const char *sb_id, const char *name, space_err *err)
{
	struct sandbox *sb = own(d, sb_id, err);

	if (!sb)
		return -1;
	return capture_start(sb, SNAP_NAMED, name, true, true, on_layer, err);
}

void build_vm_end(struct spaced *d, const char *sb_id, const char *why)
{
	struct sandbox *sb = sandbox_find(d, sb_id);

	if (!sb || sb->rec.role != ROLE_BUILD)
		return;
	sb->build_up = NULL;
	sb->build_layer = NULL;
	sb->build_arg = NULL;
	if (sb->rec.state != SB_DELETING && sb->rec.state != SB_DELETED)
		sandbox_start_delete(sb, why);
}

void build_vm_reap(struct spaced *d)
{
	for (struct sandbox *sb = d->sandboxes; sb; sb = sb->next) {
		if (sb->rec.role != ROLE_BUILD || sb->build_up || sb->rec.state == SB_DELETING ||
		    sb->rec.state == SB_DELETED || sb->op.id[0] || sb->capture)
			continue;
		sandbox_start_delete(sb, "its template build ended with the daemon that ran it");
	}
}

int build_vm_template_of(struct spaced *d, const char *sb_id, struct template_rec *out, space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, sb_id, OPK_SNAPSHOT, err);

	if (!sb)
		return -1;
	template_rec_copy(out, &sb->tmpl);
	return 0;
}

int build_vm_snapshot_of(struct spaced *d, const char *sb_id, const char *name, char op_id[ID_LEN], space_err *err)
{
	struct sandbox *sb = sandbox_find_for(d, sb_id, OPK_SNAPSHOT, err);

	if (!sb || lifecycle_begin(sb, OPK_SNAPSHOT, &(struct lc_args){ .name = name }, err) < 0)
		return -1;
	snprintf(op_id, ID_LEN, "%s", sb->op.id);
	return 0;
}

bool snapshot_visible(const struct snapshot_rec *s)
{
	return s->kind == SNAP_READY || (s->kind == SNAP_NAMED && s->name[0] != '.');
}
