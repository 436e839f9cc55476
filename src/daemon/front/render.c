/* render.c -- records to the JSON the API answers with (shapes: docs/api/reference.md) */
#include "render.h"

/* Time as RFC 3339, or null for "never" (0). */
static json_t *time_or_null(int64_t ms)
{
	char buf[32];

	if (ms <= 0)
		return json_null();
	fmt_time(buf, ms);
	return json_string(buf);
}

json_t *render_time(int64_t ms)
{
	return time_or_null(ms);
}

static json_t *str_or_null(const char *s)
{
	return s && s[0] ? json_string(s) : json_null();
}

static json_t *int_or_null(int present, json_int_t v)
{
	return present ? json_integer(v) : json_null();
}

/* A copy of an object member, or {} / [] when it is missing. */
static json_t *obj_copy(json_t *o)
{
	return json_is_object(o) ? json_deep_copy(o) : json_object();
}

static json_t *arr_copy(json_t *a)
{
	return json_is_array(a) ? json_deep_copy(a) : json_array();
}

json_t *template_to_json(const struct template_rec *t)
{
	json_t *j = json_pack("{s:s,s:s,s:o,s:i,s:i,s:s,s:o,s:I,s:o}",
			 "name", t->name,
			 "digest", t->digest,
			 "tags", arr_copy(t->tags),
			 "vcpus", t->vcpus,
			 "memory_mib", t->memory_mib,
			 "default_user", t->default_user,
			 "env", obj_copy(t->env),
			 "image_bytes", (json_int_t)t->image_bytes,
			 "created_at", time_or_null(t->created_ms));
	json_t *wd = json_object_get(t->config, "workdir");

	/* A built template's defaults beyond env and user: null for make's. */
	if (j) {
		json_object_set_new(j, "workdir", wd ? json_incref(wd) : json_null());
		json_object_set_new(j, "start", json_object_get(t->config, "start") ?
						json_incref(json_object_get(t->config, "start")) : json_null());
		json_object_set_new(j, "labels", json_object_get(t->config, "labels") ?
						 json_incref(json_object_get(t->config, "labels")) : json_object());
	}
	return j;
}

json_t *sandbox_to_json(const struct sandbox_rec *s, int64_t saved_bytes)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:o,s:o,s:I,s:s,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:o,s:o}",
			      "id", s->id,
			      "state", sb_state_name(s->state),
			      "template", s->template_ref,
			      "template_digest", s->template_digest,
			      "vcpus", s->vcpus,
			      "memory_mib", s->memory_mib,
			      "env", obj_copy(s->env),
			      "metadata", obj_copy(s->metadata),
			      "timeout_s", (json_int_t)s->timeout_s,
			      "on_timeout", on_timeout_name(s->on_timeout),
			      "created_at", time_or_null(s->created_ms),
			      "updated_at", time_or_null(s->updated_ms),
			      /* Timeouts apply to running and paused sandboxes only. */
			      "expires_at", time_or_null(s->state == SB_RUNNING || s->state == SB_PAUSED ||
							 s->state == SB_CREATING ? s->expires_ms : 0),
			      "error", str_or_null(s->error),
			      "start_kind", start_kind_name(s->start_kind),
			      "parent_id", str_or_null(s->parent_id),
			      "snapshot", str_or_null(s->source_snapshot),
			      /* What a suspended sandbox costs: the disk its saved state takes. */
			      "suspended_bytes", int_or_null(s->state == SB_SUSPENDED && saved_bytes >= 0, saved_bytes),
			      /* Its egress policy: secret names, never values. */
			      "network", obj_copy(s->network),
			      /* The node that owns it in a cluster (null: one daemon, or not placed yet). */
			      "node", str_or_null(s->node_id));
	return j;
}

json_t *snapshot_to_json(const struct snapshot_rec *s)
{
	return json_pack("{s:s,s:o,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:o,s:o}",
			 "id", s->id,
			 "name", str_or_null(s->name),
			 "kind", snap_kind_name(s->kind),
			 "state", snap_state_name(s->state),
			 "sandbox_id", s->sandbox_id,
			 "template", s->template_ref,
			 "template_digest", s->template_digest,
			 "vcpus", s->vcpus,
			 "memory_mib", s->memory_mib,
			 "bytes", (json_int_t)s->bytes,
			 "created_at", time_or_null(s->created_ms),
			 "error", str_or_null(s->error));
}

json_t *op_to_json(const struct op_rec *op)
{
	return json_pack("{s:s,s:s,s:o,s:s,s:o,s:o,s:o,s:o}",
			 "id", op->id,
			 "kind", op_kind_name(op->kind),
			 "sandbox_id", str_or_null(op->sandbox_id),
			 "state", op_state_name(op->state),
			 "error", str_or_null(op->error),
			 "created_at", time_or_null(op->created_ms),
			 "updated_at", time_or_null(op->updated_ms),
			 "result", op->result ? json_deep_copy(op->result) : json_null());
}

json_t *session_to_json(const struct session_rec *s, uint64_t output_bytes, uint64_t output_start)
{
	int exited = s->state == SESS_EXITED;
	json_t *pty = s->kind == SESS_KIND_PTY ? json_pack("{s:i,s:i}", "rows", s->pty_rows, "cols", s->pty_cols)
					       : json_null();

	return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:s,s:b,s:s,s:o,s:o,s:o,s:o,s:I,s:I,s:o,s:o,s:o}",
			 "id", s->id,
			 "sandbox_id", s->sandbox_id,
			 "kind", sess_kind_name(s->kind),
			 "pty", pty,
			 "argv", arr_copy(s->argv),
			 "env", obj_copy(s->env),
			 "cwd", s->cwd,
			 "user", s->user,
			 "stdin", (int)s->stdin_open,
			 "state", sess_state_name(s->state),
			 "pid", int_or_null(s->pid > 0, s->pid),
			 "exit_code", int_or_null(exited && s->exit_signal == 0, s->exit_code),
			 "signal", int_or_null(exited && s->exit_signal > 0, s->exit_signal),
			 "error", str_or_null(s->error),
			 "output_bytes", (json_int_t)output_bytes,
			 "output_start", (json_int_t)output_start,
			 "created_at", time_or_null(s->created_ms),
			 "started_at", time_or_null(s->started_ms),
			 "ended_at", time_or_null(s->ended_ms));
}

json_t *data_plane_to_json(const char *url, const char *token, int64_t expires_ms)
{
	return json_pack("{s:s,s:s,s:o}", "url", url, "token", token, "expires_at", time_or_null(expires_ms));
}
