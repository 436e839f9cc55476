/* events_emit.c -- the core's side of lifecycle events: an event filled from a sandbox's own
 * record (its id, template, state, the operation in flight) and handed to events/ */
#include <stdio.h>
#include <string.h>

#include "events/events.h"
#include "runtime.h"

void events_emit(struct sandbox *sb, enum ev_type type, const char *reason, json_t *data)
{
	struct sb_event e = { .type = type, .data = data };
	const struct sandbox_rec *r = &sb->rec;

	if (r->role != ROLE_USER) {
		json_decref(data);
		return;
	}
	snprintf(e.sandbox_id, sizeof(e.sandbox_id), "%s", r->id);
	snprintf(e.template_ref, sizeof(e.template_ref), "%s", r->template_ref);
	snprintf(e.template_digest, sizeof(e.template_digest), "%s", r->template_digest);
	snprintf(e.state, sizeof(e.state), "%s", sb_state_name(r->state));
	if (sb->op.id[0] && !op_state_done(sb->op.state))
		snprintf(e.operation_id, sizeof(e.operation_id), "%s", sb->op.id);
	snprintf(e.reason, sizeof(e.reason), "%s", reason ? reason : "");
	events_emit_raw(sb->d, &e);
}

void events_transition(struct sandbox *sb, enum sb_state from, enum sb_state to)
{
	int t = ev_for_transition(from, to);
	const char *reason;

	if (t < 0)
		return;
	reason = to == SB_FAILED || to == SB_LOST ? sb->rec.error : sb->event_reason;
	events_emit(sb, (enum ev_type)t, reason,
		    t == EVT_RUNNING ? json_pack("{s:s}", "start_kind", start_kind_name(sb->rec.start_kind)) : NULL);
	if (t == EVT_DELETED || t == EVT_SUSPENDED || t == EVT_FAILED || t == EVT_STOPPED)
		sb->event_reason[0] = '\0';
}

