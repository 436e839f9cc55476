/* resources.c -- a sandbox's files as MCP resources: the URI template
 * space://sandboxes/{sandbox_id}/files/{path} and its parsing (pure), read by read_file's
 * engine (tool_files.c). resources/list lists nothing: a sandbox's files are found through the
 * template (and list_files), not enumerated. */
#include <stdio.h>
#include <string.h>

#include "mcp.h"
#include "model/model.h"

json_t *mcp_resource_templates(void)
{
	return json_pack("{s:[{s:s,s:s,s:s,s:s}]}", "resourceTemplates", "uriTemplate",
			 MCP_URI_PREFIX "{sandbox_id}/files/{path}", "name", "sandbox-file", "description",
			 "A file of a sandbox: path is its absolute path without the leading slash "
			 "(space://sandboxes/sb-0123456789abcdef/files/home/user/a.txt), '/' as is or as %2F.",
			 "mimeType", "text/plain");
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int mcp_uri_parse(const char *uri, char *id, size_t idlen, char *path, size_t pathlen)
{
	size_t plen = strlen(MCP_URI_PREFIX), o = 0;
	const char *p, *slash;

	if (strncmp(uri, MCP_URI_PREFIX, plen) != 0)
		return -1;
	p = uri + plen;
	slash = strchr(p, '/');
	if (!slash || (size_t)(slash - p) >= idlen || strncmp(slash, "/files/", 7) != 0)
		return -1;
	memcpy(id, p, (size_t)(slash - p));
	id[slash - p] = '\0';
	if (!id_valid(id, "sb-"))
		return -1;
	p = slash + 7;
	if (pathlen < 2)
		return -1;
	path[o++] = '/';
	for (; *p; p++) {
		int c = (unsigned char)*p;

		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			c = hi * 16 + lo;
			p += 2;
		} else if (c == '?' || c == '#') {
			return -1;
		}
		if (o + 1 >= pathlen)
			return -1;
		/* "/files//etc" and "/files/%2Fetc" name /etc, as the template's {path} may or may not
		 * have kept the leading slash */
		if (c == '/' && o == 1)
			continue;
		path[o++] = (char)c;
	}
	path[o] = '\0';
	return o > 1 ? 0 : -1;
}
