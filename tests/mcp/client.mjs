// client.mjs -- the official MCP client (@modelcontextprotocol/sdk) against SPACE, over one
// transport: `node client.mjs http` (StreamableHTTPClientTransport to $SPACE_URL/mcp) or
// `node client.mjs stdio` (StdioClientTransport running `$SPACECTL mcp`). It walks an agent's
// session and prints what it saw, one JSON object per line ({"step": ..., ...}); the checks are
// tests/e2e/test_mcp.py's. `node client.mjs http-badkey|stdio-badkey` connects with a wrong key.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const mode = process.argv[2] || 'http';
const url = process.env.SPACE_URL;
const badkey = mode.endsWith('-badkey');
const key = badkey ? 'e2b_' + '0'.repeat(40) : process.env.SPACE_API_KEY;

function report(step, data) {
  process.stdout.write(JSON.stringify({ step, ...data }) + '\n');
}

function transport() {
  if (mode.startsWith('stdio')) {
    return new StdioClientTransport({
      command: process.env.SPACECTL,
      args: ['mcp'],
      env: { PATH: process.env.PATH || '/usr/bin:/bin', SPACE_URL: url, SPACE_API_KEY: key },
      stderr: 'inherit',
    });
  }
  return new StreamableHTTPClientTransport(new URL(url + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
}

const client = new Client({ name: 'space-mcp-test', version: '1.0.0' });

async function call(name, args, options) {
  const r = await client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: 120000, ...options });
  return { isError: !!r.isError, text: r.content?.[0]?.text ?? '', data: r.structuredContent ?? null };
}

async function protocolError(fn) {
  try {
    await fn();
    return { threw: false };
  } catch (e) {
    return { threw: true, code: e.code ?? null, message: String(e.message ?? e) };
  }
}

async function badKey() {
  const r = await protocolError(() => client.connect(transport()));
  report('connect', r);
  await client.close().catch(() => {});
}

async function main() {
  if (badkey)
    return badKey();
  const t = transport();
  await client.connect(t);
  report('connected', { server: client.getServerVersion(), session: t.sessionId ?? null });

  const tools = await client.listTools();
  report('tools', {
    names: tools.tools.map((t) => t.name),
    schemas_ok: tools.tools.every((t) => t.inputSchema?.type === 'object'),
  });

  const created = await call('create_sandbox', { template: 'base', timeout: 600 });
  report('create', created);
  const id = created.data?.sandbox_id;

  const progress = [];
  const ran = await call('run_command', { sandbox_id: id, command: "python3 -c 'print(6*7)'" },
    { onprogress: (p) => progress.push(p.message ?? '') });
  report('run', { ...ran, progress });

  // Output arrives as progress while the command runs: it waits for a file that this client
  // writes (a second, concurrent tool call) only once the progress with line1 came.
  const streamed = [];
  let go = null;
  const counted = await call('run_command', {
    sandbox_id: id, timeout: 90,
    command: 'echo line1; while [ ! -e /tmp/mcp-go ]; do sleep 0.1; done; echo line2; echo oops >&2; exit 3',
  }, {
    onprogress: (p) => {
      streamed.push(p.message ?? '');
      if (!go && streamed.join('').includes('line1\n'))
        go = call('write_file', { sandbox_id: id, path: '/tmp/mcp-go', content: '' });
    },
  });
  report('run2', { ...counted, progress: streamed, go: go ? await go : null });

  report('write', await call('write_file', { sandbox_id: id, path: '/home/user/mcp/hello.txt', content: 'hello from mcp\n' }));
  report('read', await call('read_file', { sandbox_id: id, path: '/home/user/mcp/hello.txt' }));
  report('list', await call('list_files', { sandbox_id: id, path: '/home/user/mcp' }));

  const templates = await client.listResourceTemplates();
  const uri = `space://sandboxes/${id}/files/home/user/mcp/hello.txt`;
  const res = await client.readResource({ uri });
  report('resource', { templates: templates.resourceTemplates.map((t) => t.uriTemplate), text: res.contents?.[0]?.text ?? null });

  // Arguments an agent got wrong: tool errors, not protocol failures.
  report('bad_missing', await call('run_command', { sandbox_id: id }));
  report('bad_type', await call('run_command', { sandbox_id: id, command: 42 }));
  report('bad_unknown_sandbox', await call('read_file', { sandbox_id: 'sb-0000000000000000', path: '/etc/hostname' }));
  report('bad_relative_path', await call('read_file', { sandbox_id: id, path: 'etc/hostname' }));
  report('bad_missing_file', await call('read_file', { sandbox_id: id, path: '/home/user/nope.txt' }));
  report('bad_tool', await protocolError(() => client.callTool({ name: 'no_such_tool', arguments: {} })));
  report('ping', await protocolError(() => client.ping()));

  const forked = await call('fork_sandbox', { sandbox_id: id });
  report('fork', forked);
  const kid = forked.data?.sandbox_ids?.[0];
  report('kid_read', await call('run_command', { sandbox_id: kid, command: 'cat /home/user/mcp/hello.txt' }));
  report('kid_delete', await call('delete_sandbox', { sandbox_id: kid }));
  report('delete', await call('delete_sandbox', { sandbox_id: id }));
  report('after_delete', await call('run_command', { sandbox_id: id, command: 'true' }));
  const listed = await call('list_sandboxes', {});
  report('listed', { ids: (listed.data?.sandboxes ?? []).filter((s) => s.state === 'running').map((s) => s.sandbox_id) });

  if (t.terminateSession)
    await t.terminateSession();
  await client.close();
  report('closed', {});
}

main().catch((e) => {
  report('error', { message: String(e?.stack ?? e) });
  process.exitCode = 1;
});
