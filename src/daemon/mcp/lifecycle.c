/* lifecycle.c -- MCP's lifecycle: the protocol versions served and their negotiation, the
 * initialize result (what the server offers), and the sessions that initialize opens
 * (Mcp-Session-Id). A session is a name for a client's conversation only: every request still
 * carries the API key, and no sandbox belongs to a session. The table is a fixed array (no
 * allocation, nothing to free at exit): the least recently used entry goes when it is full, and
 * an idle one expires; a client whose session is gone gets 404 and initializes again, as the
 * transport says it must. */
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "mcp.h"
#include "model/model.h"

const char *const mcp_versions[] = { "2025-06-18", "2025-03-26", "2024-11-05", NULL };

bool mcp_version_served(const char *v)
{
	for (size_t i = 0; v && mcp_versions[i]; i++)
		if (strcmp(v, mcp_versions[i]) == 0)
			return true;
	return false;
}

const char *mcp_negotiate(const char *client_version)
{
	for (size_t i = 0; client_version && mcp_versions[i]; i++)
		if (strcmp(client_version, mcp_versions[i]) == 0)
			return mcp_versions[i];
	return mcp_versions[0];
}

json_t *mcp_initialize_result(const char *v)
{
	return json_pack("{s:s,s:{s:{s:b},s:{s:b,s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", v, "capabilities",
			 "tools", "listChanged", 0, "resources", "subscribe", 0, "listChanged", 0, "serverInfo",
			 "name", "space", "title", "SPACE sandboxes", "version", SPACE_VERSION, "instructions",
			 "Sandboxes are Linux microVMs. create_sandbox gives a sandbox_id (template \"base\" has "
			 "python3); run_command runs a shell command in it; read_file, write_file and list_files "
			 "take absolute paths; delete_sandbox when done. A sandbox's files are also resources: "
			 "space://sandboxes/{sandbox_id}/files/{path}.");
}

struct mcp_session {
	char id[MCP_SID_LEN];
	char version[MCP_VERSION_LEN];
	int64_t used_ms;
};

static struct mcp_session sessions[MCP_SESSIONS_MAX];

static bool expired(const struct mcp_session *s, int64_t now)
{
	return !s->id[0] || now - s->used_ms > MCP_SESSION_IDLE_MS;
}

void mcp_session_new(char sid[MCP_SID_LEN], const char *version, int64_t now_ms)
{
	struct mcp_session *slot = &sessions[0];
	char id[ID_LEN];

	for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
		if (expired(&sessions[i], now_ms)) {
			slot = &sessions[i];
			break;
		}
		if (sessions[i].used_ms < slot->used_ms)
			slot = &sessions[i];
	}
	id_new(id, "mcp-");
	snprintf(slot->id, sizeof(slot->id), "%s", id);
	snprintf(slot->version, sizeof(slot->version), "%s", version);
	slot->used_ms = now_ms;
	snprintf(sid, MCP_SID_LEN, "%s", slot->id);
}

static struct mcp_session *find(const char *sid)
{
	if (!sid || !sid[0] || strlen(sid) >= MCP_SID_LEN)
		return NULL;
	for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
		if (sessions[i].id[0] && strcmp(sessions[i].id, sid) == 0)
			return &sessions[i];
	return NULL;
}

int mcp_session_touch(const char *sid, int64_t now_ms)
{
	struct mcp_session *s = find(sid);

	if (!s)
		return -1;
	if (expired(s, now_ms)) {
		memset(s, 0, sizeof(*s));
		return -1;
	}
	s->used_ms = now_ms;
	return 0;
}

int mcp_session_end(const char *sid)
{
	struct mcp_session *s = find(sid);

	if (!s)
		return -1;
	memset(s, 0, sizeof(*s));
	return 0;
}

void mcp_sessions_reset(void)
{
	memset(sessions, 0, sizeof(sessions));
}
