/* launch.c -- bringing a sandbox's VM up (cold boot or from a snapshot) until its guest answers
 * with its identity applied, and what the VM and its agent report afterwards */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "net/net.h"
#include "runtime.h"
#include "store/store.h"

static void vm_ready(struct vm *vm, void *arg);
static void vm_exited(struct vm *vm, const char *reason, void *arg);
static void vm_event(struct vm *vm, const char *event, json_t *data, void *arg);

const struct vm_events sandbox_vm_events = {
	.ready = vm_ready,
	.exited = vm_exited,
	.event = vm_event,
};

static void stop_timer(struct sandbox *sb)
{
	if (sb->timer) {
		event_free(sb->timer);
		sb->timer = NULL;
	}
}

/* The bring-up ends: exactly one call of its callback. */
static void bringup_end(struct sandbox *sb, const char *error)
{
	bringup_cb done = sb->up_done;

	stop_timer(sb);
	sb->up_done = NULL;
	if (!error && done) {
		char text[320];

		phases_mark(&sb->phases, PH_UP);
		phases_text(&sb->phases, text, sizeof(text));
		log_info("sandbox %s: up in %.1f ms: %s", sb->rec.id, phases_ms(&sb->phases, PH_UP), text);
	}
	if (done)
		done(sb, error);
}

static void bringup_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	char why[160];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "the guest agent did not answer within %d s (see the console log)",
		 sb->d->cfg.boot_timeout_s);
	if (sb->vm)
		vm_kill(sb->vm);
	bringup_end(sb, why);
}

static void attach_agent(struct sandbox *sb)
{
	agent_free(sb->agent);
	sb->identity_sent = false;
	sb->agent = agent_new(sb, vm_agent_path(sb->vm));
	if (!sb->agent) {
		if (sb->vm)
			vm_kill(sb->vm);
		bringup_end(sb, "cannot set up the agent channel");
	}
}

static void launch_vm(struct sandbox *sb);

/* The netns and CA of this launch are there (or not): QEMU starts on the next bulk turn of
 * the loop (each spawn is a slice of the loop's time), its gateway right after it. */
static void net_prepared(struct sandbox *sb, const space_err *err)
{
	if (!sb->up_done || sb->vm)
		return; /* deleted (or failed) while it waited */
	if (err) {
		bringup_end(sb, err->msg);
		return;
	}
	phases_mark(&sb->phases, PH_NETNS);
	sb->vm_next = true;
	event_active(sb->launch_ev, EV_TIMEOUT, 0);
}

/* The deferred half of sandbox_launch: QEMU is spawned from its own turn of
 * the loop (a low-priority event, one per turn), so a burst of creates never
 * holds up a request that came in meanwhile. */
static void launch_now(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	space_err err = { 0 };

	(void)fd;
	(void)what;
	if (!sb->up_done || sb->vm)
		return; /* deleted (or failed) while it waited */
	if (sb->vm_next) {
		sb->vm_next = false;
		launch_vm(sb);
		return;
	}
	uint32_t old_uid = sb->rec.jail_uid;
	if (sandbox_jail_uid(sb, &err) < 0) {
		bringup_end(sb, err.msg);
		return;
	}
	/* Recorded before the spawn: a restart that finds this QEMU by its
	 * id (its pid not yet written) still knows which uid it must have. */
	if (sb->rec.jail_uid != old_uid)
		sandbox_persist(sb);
	/* The device exactly when the snapshot's VM had it (a cold boot: when this daemon
	 * gives VMs a network); its netns and CA before the VM, made by a child meanwhile. */
	sb->net_dev = geteuid() == 0 && (sb->launch_snap[0] ? sb->launch_snap_net : egress_enabled(sb->d));
	if (sb->net_dev) {
		int r = egress_prepare(sb, net_prepared, &err);
		if (r < 0) {
			bringup_end(sb, err.msg);
			return;
		}
		if (r == 1)
			net_prepared(sb, NULL);
		return; /* net_prepared goes on */
	}
	launch_vm(sb);
}

static void launch_vm(struct sandbox *sb)
{
	struct vm_spec spec;
	struct spec_bufs b;
	space_err err = { 0 };
	char ns[PATH_MAX];

	sandbox_spec(sb, &spec, &b);
	if (sb->net_dev) {
		net_ns_path(sb->d, sb->rec.id, ns);
		spec.net_ns = ns;
	}
	if (sb->launch_snap[0]) {
		snprintf(b.image, sizeof(b.image), "%s/mem", sb->launch_snap);
		snprintf(b.state, sizeof(b.state), "%s/state", sb->launch_snap);
		spec.mem = VM_MEM_IMAGE;
		spec.mem_image = b.image;
		spec.mem_own = sb->launch_snap_own;
		spec.incoming = b.state;
	}
	if (vm_launch(sb->d->base, &spec, sb->d->cfg.boot_timeout_s * 1000, &sandbox_vm_events, sb, &sb->vm,
		      &err) < 0) {
		err_wrap(&err, "starting vm");
		bringup_end(sb, err.msg);
		return;
	}
	phases_mark(&sb->phases, PH_QEMU);
	/* The gateway after QEMU: it starts while QEMU restores, and its first policy is
	 * answered before the bring-up ends (sandbox_identity_applied). */
	if (sb->net_dev) {
		egress_gateway_up(sb);
		phases_mark(&sb->phases, PH_GATEWAY);
	}
	sb->rec.pid = vm_pid(sb->vm);
	sb->rec.pid_start = vm_pid_start(sb->vm);
	sandbox_persist(sb);
	/* Its socket is ours and listening already: H_HELLO and H_IDENTITY wait in it while
	 * QEMU restores, and the guest finds them the moment it runs. */
	attach_agent(sb);
}

int sandbox_launch(struct sandbox *sb, const struct snapshot_rec *snap, bringup_cb done, space_err *err)
{
	struct timeval tv = { sb->d->cfg.boot_timeout_s, 0 };

	if (!sb->launch_ev) {
		sb->launch_ev = evtimer_new(sb->d->base, launch_now, sb);
		if (!sb->launch_ev || event_priority_set(sb->launch_ev, SPACED_PRIO_BULK) < 0)
			return err_set(err, ENOMEM, "out of memory");
	}
	snprintf(sb->launch_snap, sizeof(sb->launch_snap), "%s", snap ? snap->dir : "");
	/* A suspend snapshot resumes its own sandbox only: its image needs
	 * no sealed copy (memimg.c), the VM may have it read-write. */
	sb->launch_snap_own = snap && snap->kind == SNAP_SUSPEND;
	sb->launch_snap_net = snap && snap->net;
	sb->identity_done = false;
	sb->guest_ran = false;
	sb->vm_next = false;
	sb->up_done = done;
	phases_begin(&sb->phases);
	event_active(sb->launch_ev, EV_TIMEOUT, 0);
	/* The deadline counts from now: the wait for a turn is part of it. */
	stop_timer(sb);
	sb->timer = evtimer_new(sb->d->base, bringup_deadline, sb);
	if (sb->timer)
		evtimer_add(sb->timer, &tv);
	return 0;
}

void sandbox_bringup_adopted(struct sandbox *sb, bringup_cb done)
{
	struct timeval tv = { sb->d->cfg.boot_timeout_s, 0 };

	sb->identity_done = false;
	sb->up_done = done;
	stop_timer(sb);
	sb->timer = evtimer_new(sb->d->base, bringup_deadline, sb);
	if (sb->timer)
		evtimer_add(sb->timer, &tv);
	attach_agent(sb);
}

/* QEMU answers (and a restored guest runs): the agent can be reached. */
static void vm_ready(struct vm *vm, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	sb->guest_ran = true;
	phases_mark(&sb->phases, PH_READY);
	if (!sb->agent)
		attach_agent(sb);
}

static void vm_exited(struct vm *vm, const char *reason, void *arg)
{
	struct sandbox *sb = arg;
	char why[512];

	vm_free(vm);
	sb->vm = NULL;
	sb->rec.pid = 0;
	egress_down(sb);
	agent_free(sb->agent);
	sb->agent = NULL;
	if (sb->rec.state == SB_DELETING) {
		sandbox_finish_delete(sb);
		return;
	}
	snprintf(why, sizeof(why), "qemu %s", reason);
	if (sb->up_done) {
		bringup_end(sb, why);
		return;
	}
	/* Actions that end the VM on purpose take it from here. */
	if (sb->rec.state == SB_STOPPING && act_stop_vm_exited(sb))
		return;
	if (sb->rec.state == SB_SUSPENDING && act_suspend_vm_exited(sb))
		return;
	if (!sb_state_has_vm(sb->rec.state)) {
		sandbox_persist(sb);
		return;
	}
	sandbox_fail(sb, why);
}

static void vm_event(struct vm *vm, const char *event, json_t *data, void *arg)
{
	struct sandbox *sb = arg;

	(void)vm;
	(void)data;
	if (strcmp(event, "GUEST_PANICKED") == 0)
		log_warn("sandbox %s: the guest kernel panicked", sb->rec.id);
}

static void send_identity(struct sandbox *sb)
{
	space_err err = { 0 };

	if (identity_send(sb, &err) < 0) {
		log_warn("sandbox %s: %s", sb->rec.id, err.msg);
		if (sb->vm)
			vm_kill(sb->vm);
		bringup_end(sb, err.msg);
		return;
	}
	sb->identity_sent = true;
}

/* Every VM gets its identity once, before any command of a client: frames are processed in
 * order, so an H_EXEC queued after H_IDENTITY runs after it. It goes on every connection until
 * the guest has applied it (one lost with a dropped connection goes again; applying it twice
 * is harmless), right behind H_HELLO: the guest reads both in one wake-up. A reconnect to a
 * VM that has it needs none. */
void sandbox_agent_connected(struct sandbox *sb)
{
	if (!sb->identity_done)
		send_identity(sb);
}

void sandbox_agent_ready(struct sandbox *sb)
{
	phases_mark(&sb->phases, PH_HELLO);
	if (sb->identity_done || sb->identity_sent)
		return;
	send_identity(sb);
}

void sandbox_identity_applied(struct sandbox *sb, uint32_t applied, int error)
{
	if (error)
		log_warn("sandbox %s: the guest could not apply all of its identity (applied 0x%x): %s",
			 sb->rec.id, applied, strerror(error));
	sb->identity_sent = false;
	if (sb->identity_done)
		return;
	sb->identity_done = true;
	phases_mark(&sb->phases, PH_IDENTITY);
	/* Ready once its gateway has its policy too: a client's first connection must not
	 * race the policy (it would be refused). */
	if (egress_wait_ready(sb))
		return;
	bringup_end(sb, NULL);
}

void sandbox_network_ready(struct sandbox *sb)
{
	if (sb->up_done && sb->identity_done)
		bringup_end(sb, NULL);
}

void sandbox_agent_lost(struct sandbox *sb, const char *why)
{
	sb->identity_sent = false;
	log_warn("sandbox %s: agent channel lost (%s); reconnecting", sb->rec.id, why);
}

void sandbox_send_clock(struct sandbox *sb)
{
	struct timespec ts;
	uint8_t buf[8];
	uint64_t ns;

	/* Not connected: the H_HELLO of the next connection carries the clock. */
	if (!agent_ready(sb->agent))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(ns >> (8 * i));
	if (agent_send(sb->agent, H_SETTIME, 0, buf, sizeof(buf)) < 0)
		log_warn("sandbox %s: could not send the clock", sb->rec.id);
}
