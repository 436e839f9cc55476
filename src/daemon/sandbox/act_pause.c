/* act_pause.c -- pause and resume: the vCPUs stop, the VM stays resident */
#include <string.h>

#include "log.h"
#include "runtime.h"

static void on_done(struct vm *vm, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	lifecycle_done(sb, err ? err->msg : NULL);
}

static void on_resumed(struct vm *vm, const space_err *err, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	/* The guest's clock stood still with its vCPUs. */
	if (!err)
		sandbox_send_clock(sb);
	lifecycle_done(sb, err ? err->msg : NULL);
}

int act_pause_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	(void)a;
	return vm_pause(sb->vm, on_done, sb, err);
}

int act_resume_start(struct sandbox *sb, const struct lc_args *a, space_err *err)
{
	(void)a;
	return vm_resume(sb->vm, on_resumed, sb, err);
}

/* After a restart: ask again. Both are idempotent for QEMU ("stop" on a
 * stopped VM, "cont" on a running one). */
void act_pause_reconcile(struct sandbox *sb)
{
	space_err err = { 0 };

	if (vm_pause(sb->vm, on_done, sb, &err) < 0)
		lifecycle_done(sb, err.msg);
}

void act_resume_reconcile(struct sandbox *sb)
{
	space_err err = { 0 };

	if (vm_resume(sb->vm, on_resumed, sb, &err) < 0)
		lifecycle_done(sb, err.msg);
}
