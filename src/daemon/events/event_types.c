/* event_types.c -- what an event is called, which state changes are events, and an event's
 * JSON both ways: pure, unit-tested (tests/unit/test_events.c) */
#include <stdio.h>
#include <string.h>

#include "events.h"

static const char *const names[EVT__COUNT] = {
	[EVT_CREATED] = "sandbox.created",
	[EVT_RUNNING] = "sandbox.running",
	[EVT_PAUSED] = "sandbox.paused",
	[EVT_RESUMED] = "sandbox.resumed",
	[EVT_SUSPENDED] = "sandbox.suspended",
	[EVT_RESTORED] = "sandbox.restored",
	[EVT_FORKED] = "sandbox.forked",
	[EVT_STOPPED] = "sandbox.stopped",
	[EVT_DELETED] = "sandbox.deleted",
	[EVT_FAILED] = "sandbox.failed",
	[EVT_TIMEOUT_WARNING] = "sandbox.timeout_warning",
	[EVT_TIMEOUT_SET] = "sandbox.timeout_set",
	[EVT_SNAPSHOTTED] = "sandbox.snapshotted",
};

#define PREFIX "sandbox."

const char *ev_type_name(enum ev_type t)
{
	return (unsigned)t < EVT__COUNT ? names[t] : "sandbox.unknown";
}

int ev_type_parse(const char *s)
{
	if (!s)
		return -1;
	for (int t = 0; t < EVT__COUNT; t++)
		if (strcmp(s, names[t]) == 0 || strcmp(s, names[t] + strlen(PREFIX)) == 0)
			return t;
	return -1;
}

int ev_types_csv(const char *csv, unsigned *mask, space_err *err)
{
	char one[64];

	*mask = 0;
	if (!csv || !*csv || strcmp(csv, "*") == 0) {
		*mask = EVT_ALL;
		return 0;
	}
	for (const char *p = csv; *p;) {
		size_t n = strcspn(p, ",");
		int t;

		if (n == 0 || n >= sizeof(one))
			return err_set(err, EINVAL, "types: '%.*s' is not an event type (e.g. created,deleted)",
				       (int)(n < 64 ? n : 64), p);
		memcpy(one, p, n);
		one[n] = '\0';
		if ((t = ev_type_parse(one)) < 0)
			return err_set(err, EINVAL, "types: '%s' is not an event type (e.g. created,deleted)", one);
		*mask |= 1u << t;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

int ev_types_json(const json_t *arr, unsigned *mask, space_err *err)
{
	size_t i;
	json_t *v;

	*mask = 0;
	if (!arr || json_is_null(arr)) {
		*mask = EVT_ALL;
		return 0;
	}
	if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > 64)
		return err_set(err, EINVAL, "events: an array of 1 to 64 event types (e.g. [\"sandbox.created\"])");
	json_array_foreach(arr, i, v) {
		int t = json_is_string(v) ? ev_type_parse(json_string_value(v)) : -1;

		if (t < 0) {
			if (json_is_string(v))
				return err_set(err, EINVAL, "events[%zu]: '%.64s' is not an event type", i,
					       json_string_value(v));
			return err_set(err, EINVAL, "events[%zu]: an event type's name (a string)", i);
		}
		*mask |= 1u << t;
	}
	return 0;
}

int ev_for_transition(enum sb_state from, enum sb_state to)
{
	switch (to) {
	case SB_RUNNING:
		/* Back from a pause, a suspend or a stop that failed: nothing happened. */
		if (from == SB_PAUSED)
			return EVT_RESUMED;
		if (from == SB_RESTORING)
			return EVT_RESTORED;
		if (from == SB_CREATING)
			return EVT_RUNNING;
		return -1;
	case SB_PAUSED:
		return from == SB_PAUSING ? EVT_PAUSED : -1;
	case SB_SUSPENDED:
		return from == SB_SUSPENDING ? EVT_SUSPENDED : -1;
	case SB_STOPPED:
		return from == SB_STOPPING ? EVT_STOPPED : -1;
	case SB_DELETED:
		return EVT_DELETED;
	case SB_FAILED:
	case SB_LOST:
		return EVT_FAILED;
	default:
		return -1;
	}
}

json_t *event_json(const struct sb_event *e)
{
	char t[32], seq[24];
	json_t *j;

	fmt_time(t, e->time_ms);
	snprintf(seq, sizeof(seq), "%lld", (long long)e->seq);
	j = json_pack("{s:s,s:I,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "id", seq, "seq", (json_int_t)e->seq, "type",
		      ev_type_name(e->type), "time", t, "time_ms", (json_int_t)e->time_ms, "sandbox_id", e->sandbox_id, "template", e->template_ref,
		      "template_digest", e->template_digest, "state", e->state);
	if (!j)
		return NULL;
	json_object_set_new(j, "operation_id", e->operation_id[0] ? json_string(e->operation_id) : json_null());
	json_object_set_new(j, "reason", e->reason[0] ? json_string(e->reason) : json_null());
	json_object_set_new(j, "data", e->data ? json_incref(e->data) : json_object());
	return j;
}

static void copy_str(const json_t *j, const char *key, char *out, size_t n)
{
	const char *v = json_string_value(json_object_get(j, key));

	snprintf(out, n, "%s", v ? v : "");
}

int event_from_json(const json_t *j, struct sb_event *out, space_err *err)
{
	json_t *data = json_object_get(j, "data");
	int t;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j) || (t = ev_type_parse(json_string_value(json_object_get(j, "type")))) < 0 ||
	    !json_is_integer(json_object_get(j, "seq")) || !json_is_integer(json_object_get(j, "time_ms")))
		return err_set(err, EINVAL, "not an event record");
	out->type = (enum ev_type)t;
	out->seq = json_integer_value(json_object_get(j, "seq"));
	out->time_ms = json_integer_value(json_object_get(j, "time_ms"));
	copy_str(j, "sandbox_id", out->sandbox_id, sizeof(out->sandbox_id));
	copy_str(j, "operation_id", out->operation_id, sizeof(out->operation_id));
	copy_str(j, "template", out->template_ref, sizeof(out->template_ref));
	copy_str(j, "template_digest", out->template_digest, sizeof(out->template_digest));
	copy_str(j, "state", out->state, sizeof(out->state));
	copy_str(j, "reason", out->reason, sizeof(out->reason));
	if (json_is_object(data) && json_object_size(data))
		out->data = json_incref(data);
	return 0;
}

void event_clear(struct sb_event *e)
{
	json_decref(e->data);
	e->data = NULL;
}
