/* render.h -- the API's JSON shapes of templates, sandboxes, operations and sessions */
#ifndef SPACE_RENDER_H
#define SPACE_RENDER_H

#include <jansson.h>
#include <stdint.h>

#include "model/model.h"

/* Each returns a new object (NULL only when out of memory), shaped exactly as
 * docs/api/reference.md says; absent times and values are JSON null. */
json_t *template_to_json(const struct template_rec *t);
/* saved_bytes: the size of a suspended sandbox's saved state (-1: unknown). */
json_t *sandbox_to_json(const struct sandbox_rec *s, int64_t saved_bytes);
json_t *snapshot_to_json(const struct snapshot_rec *s);
json_t *op_to_json(const struct op_rec *op);
/* output_bytes, output_start: session_output_length() and session_output_start() of the live
 * session, else 0. */
json_t *session_to_json(const struct session_rec *s, uint64_t output_bytes, uint64_t output_start);
/* A time as the API writes it ("2026-12-01T10:00:00.000Z"), or null for none (<= 0). */
json_t *render_time(int64_t ms);
/* {"url":..,"token":..,"expires_at":..} handed out with a session token. */
json_t *data_plane_to_json(const char *url, const char *token, int64_t expires_ms);

#endif
