// app.js -- the SPACE browser page: log in with the API key, list, create and delete
// sandboxes, a terminal (PTY session over the data plane's WebSocket) and a files panel.
// Everything goes to the control plane of this page's origin with the key, except the
// terminal's WebSocket, which goes to the data plane with the session's token
// (docs/design/channels.md, docs/guides/browser.md).
'use strict';

(() => {
  const KEY_STORE = 'space.apiKey';
  // A login shell: bash where the template has it, else sh. (Not `exec bash 2>/dev/null ||
  // exec sh`: bash writes its prompt to stderr, and sh exits when an exec fails.)
  const SHELL = ['/bin/sh', '-c', 'if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi'];
  const $ = (id) => document.getElementById(id);
  const encoder = new TextEncoder();

  let apiKey = sessionStorage.getItem(KEY_STORE) || '';
  let info = null;

  // ---- the control plane

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // One request with the key. body: an object (sent as JSON) or a Blob/File (as is).
  // Answers the parsed JSON (null for 204), or the Response itself when raw is set.
  async function api(method, path, { body, raw = false, key = apiKey } = {}) {
    const headers = { Authorization: `Bearer ${key}` };
    let payload;
    if (body instanceof Blob) {
      headers['Content-Type'] = 'application/octet-stream';
      payload = body;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const resp = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
    if (!resp.ok) {
      let code = '', message = `${resp.status} ${resp.statusText}`;
      try {
        const j = await resp.json();
        if (j && j.error) ({ code, message } = j.error);
      } catch (_) { /* not JSON (a 413 from the HTTP library, say) */ }
      const err = new ApiError(resp.status, code, message);
      if (resp.status === 401 && key === apiKey && apiKey) loggedOut(`Logged out: ${message}`);
      throw err;
    }
    if (raw) return resp;
    return resp.status === 204 ? null : resp.json();
  }

  const q = encodeURIComponent;

  // Follows an operation until it is done (long-polls of up to 30 s).
  async function waitOperation(op) {
    while (op.state === 'pending' || op.state === 'running') {
      op = await api('GET', `/v1/operations/${q(op.id)}?wait=30`);
    }
    if (op.state === 'failed') throw new Error(`${op.kind} ${op.sandbox_id} failed: ${op.error}`);
    return op;
  }

  // ---- status line

  function setStatus(text, isError = false) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('error', isError);
  }

  // Runs an action from a button: its errors go to the status line.
  function action(fn) {
    return async (ev) => {
      if (ev) ev.preventDefault();
      try {
        await fn(ev);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 401)) setStatus(e.message, true);
      }
    };
  }

  // ---- login

  function showLogin(message) {
    $('app').hidden = true;
    $('logout').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('api-key').value = '';
    $('api-key').focus();
  }

  async function enter() {
    $('login').hidden = true;
    $('app').hidden = false;
    $('logout').hidden = false;
    setStatus(`Connected: SPACE ${info.version}, accelerator ${info.accelerator}.`);
    await refresh();
  }

  async function login(ev) {
    ev.preventDefault();
    const key = $('api-key').value.trim();
    if (!key) return;
    try {
      info = await api('GET', '/v1/info', { key });
    } catch (e) {
      $('login-error').textContent = e instanceof ApiError && e.status === 401
        ? `Wrong API key: ${e.message}` : `Cannot reach the daemon: ${e.message}`;
      return;
    }
    apiKey = key;
    sessionStorage.setItem(KEY_STORE, key);
    await action(enter)();
  }

  function loggedOut(message) {
    apiKey = '';
    sessionStorage.removeItem(KEY_STORE);
    closeTerminal();
    closeFiles();
    $('sandboxes').tBodies[0].replaceChildren();
    showLogin(message);
  }

  // ---- sandboxes

  function button(label, testid, fn) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.dataset.testid = testid;
    b.addEventListener('click', action(fn));
    return b;
  }

  function cell(text, cls) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  async function refresh() {
    const { sandboxes } = await api('GET', '/v1/sandboxes');
    const rows = sandboxes.map((sb) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'sandbox-row';
      tr.dataset.id = sb.id;
      tr.dataset.state = sb.state;
      const state = cell(sb.state, `state state-${sb.state}`);
      state.dataset.testid = 'sandbox-state';
      if (sb.error) state.title = sb.error;
      const acts = document.createElement('td');
      acts.className = 'actions';
      const running = sb.state === 'running';
      const term = button('Terminal', 'open-terminal', () => openTerminal(sb.id));
      const files = button('Files', 'open-files', () => openFiles(sb.id, '/'));
      term.disabled = files.disabled = !running;
      acts.append(term, files, button('Ports', 'open-ports', () => openPorts(sb.id)),
        button('Delete', 'delete', () => removeSandbox(sb.id)));
      tr.append(cell(sb.id, 'mono'), cell(sb.template), state, acts);
      return tr;
    });
    $('sandboxes').tBodies[0].replaceChildren(...rows);
    $('sandboxes-empty').hidden = rows.length > 0;
  }

  async function create(ev) {
    const template = $('template').value.trim();
    if (!template) return;
    const submit = ev.target.querySelector('button');
    submit.disabled = true;
    try {
      const { sandbox, operation } = await api('POST', '/v1/sandboxes', { body: { template } });
      setStatus(`Creating ${sandbox.id} from ${template}…`);
      await refresh();
      await waitOperation(operation);
      setStatus(`${sandbox.id} is running.`);
    } finally {
      submit.disabled = false;
      await refresh().catch(() => {});
    }
  }

  async function removeSandbox(id) {
    if (!window.confirm(`Delete sandbox ${id}? Its disk and processes are lost.`)) return;
    if (term && termSandbox === id) closeTerminal();
    if (filesSandbox === id) closeFiles();
    if (portsSandbox === id) closePorts();
    const { operation } = await api('DELETE', `/v1/sandboxes/${q(id)}`);
    setStatus(`Deleting ${id}…`);
    await refresh();
    try {
      await waitOperation(operation);
      setStatus(`${id} deleted.`);
    } finally {
      await refresh().catch(() => {});
    }
  }

  // ---- terminal: a PTY session; output and input over the data plane's WebSocket

  let term = null, fitAddon = null, socket = null, termSandbox = null, termHooks = [];

  function terminal() {
    if (term) return term;
    term = new window.Terminal({
      cursorBlink: true,
      fontFamily: '"DejaVu Sans Mono", "Liberation Mono", monospace',
      fontSize: 14,
      scrollback: 5000,
    });
    fitAddon = new window.FitAddon.FitAddon();
    term.loadAddon(fitAddon);
    term.open($('terminal'));
    window.__term = term; // for tests: term.buffer holds what the terminal shows
    let timer = null;
    window.addEventListener('resize', () => {
      clearTimeout(timer);
      timer = setTimeout(() => { if (!$('terminal-panel').hidden) fitAddon.fit(); }, 100);
    });
    return term;
  }

  function wsUrl(base, sid, token) {
    const u = new URL(base);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    u.pathname = `${u.pathname.replace(/\/+$/, '')}/v1/sessions/${q(sid)}/ws`;
    u.search = `?token=${q(token)}`;
    u.hash = '';
    return u.toString();
  }

  function onText(msg) {
    if (msg.type === 'exit') {
      const how = msg.signal != null ? `killed by signal ${msg.signal}` : `exited with code ${msg.exit_code}`;
      term.write(`\r\n[process ${how}]\r\n`);
    } else if (msg.type === 'dropped') {
      term.write(`\r\n[output dropped: bytes ${msg.from} to ${msg.to}]\r\n`);
    } else if (msg.type === 'error') {
      term.write(`\r\n[error: ${msg.message}]\r\n`);
    }
  }

  async function openTerminal(id) {
    closeTerminal();
    $('terminal-panel').hidden = false;
    $('terminal-title').textContent = id;
    termSandbox = id;
    const t = terminal();
    t.reset();
    fitAddon.fit();
    const { session, data_plane: dp } = await api('POST', `/v1/sandboxes/${q(id)}/sessions`, {
      body: { argv: SHELL, pty: { rows: t.rows, cols: t.cols } },
    });
    if (termSandbox !== id) return; // closed meanwhile
    const ws = new WebSocket(wsUrl(dp.url || info.data_plane_url, session.id, dp.token));
    ws.binaryType = 'arraybuffer';
    socket = ws;
    const sendText = (obj) => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj)); };
    const sendBytes = (bytes) => { if (ws.readyState === WebSocket.OPEN) ws.send(bytes); };
    ws.onopen = () => {
      // The window may have changed while the session was being created.
      sendText({ type: 'resize', rows: t.rows, cols: t.cols });
      t.focus();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        try { onText(JSON.parse(ev.data)); } catch (_) { /* not ours to show */ }
      } else {
        const bytes = new Uint8Array(ev.data); // [u8 stream][output]
        if (bytes.length > 1) t.write(bytes.subarray(1));
      }
    };
    ws.onclose = (ev) => {
      if (socket !== ws) return;
      socket = null;
      if (ev.code !== 1000) t.write(`\r\n[disconnected${ev.code ? ` (${ev.code}${ev.reason ? `: ${ev.reason}` : ''})` : ''}]\r\n`);
    };
    termHooks = [
      t.onData((d) => sendBytes(encoder.encode(d))),
      // Bytes xterm makes itself (some mouse reports): one char per byte.
      t.onBinary((d) => sendBytes(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff))),
      t.onResize(({ rows, cols }) => sendText({ type: 'resize', rows, cols })),
    ];
  }

  function closeTerminal() {
    termHooks.forEach((h) => h.dispose());
    termHooks = [];
    if (socket) {
      const ws = socket;
      socket = null;
      // The shell ends with its terminal, as when a terminal window is closed.
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'signal', signal: 'SIGHUP' }));
      ws.close(1000);
    }
    termSandbox = null;
    $('terminal-panel').hidden = true;
  }

  // ---- files

  let filesSandbox = null, filesPath = '/';

  const joinPath = (dir, name) => `${dir.replace(/\/+$/, '')}/${name}`;
  const parentPath = (p) => p.replace(/\/+[^/]*\/*$/, '') || '/';

  function formatSize(n) {
    if (n < 1024) return `${n} B`;
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    let i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
  }

  async function openFiles(id, path) {
    filesSandbox = id;
    $('files-panel').hidden = false;
    $('files-title').textContent = id;
    await listDir(path);
  }

  async function listDir(path) {
    const id = filesSandbox;
    const j = await api('GET', `/v1/sandboxes/${q(id)}/files/list?path=${q(path)}`);
    if (filesSandbox !== id) return;
    filesPath = j.path || path;
    $('files-path').value = filesPath;
    const rows = j.entries.map((e) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'file-row';
      tr.dataset.name = e.name;
      tr.dataset.type = e.type;
      const name = document.createElement('td');
      name.className = 'mono';
      if (e.type === 'dir') {
        const b = button(`${e.name}/`, 'file-open', () => listDir(joinPath(filesPath, e.name)));
        b.className = 'link';
        name.append(b);
      } else {
        name.textContent = e.type === 'symlink' ? `${e.name} → ${e.symlink_target}` : e.name;
      }
      const acts = document.createElement('td');
      acts.className = 'actions';
      if (e.type === 'file') acts.append(button('Download', 'file-download', () => download(joinPath(filesPath, e.name), e.name)));
      const mtime = new Date(e.mtime * 1000);
      tr.append(name, cell(e.type === 'dir' ? '' : formatSize(e.size)), cell(e.permissions, 'mono'),
        cell(Number.isNaN(mtime.getTime()) ? '' : mtime.toLocaleString()), acts);
      return tr;
    });
    $('files').tBodies[0].replaceChildren(...rows);
  }

  async function upload() {
    const input = $('upload');
    const files = [...input.files];
    input.value = '';
    const id = filesSandbox, dir = filesPath;
    for (const f of files) {
      setStatus(`Uploading ${f.name} (${formatSize(f.size)})…`);
      await api('PUT', `/v1/sandboxes/${q(id)}/files?path=${q(joinPath(dir, f.name))}`, { body: f });
    }
    if (files.length) setStatus(`Uploaded ${files.map((f) => f.name).join(', ')} to ${dir}.`);
    if (filesSandbox === id && filesPath === dir) await listDir(dir);
  }

  async function download(path, name) {
    const resp = await api('GET', `/v1/sandboxes/${q(filesSandbox)}/files?path=${q(path)}`, { raw: true });
    const url = URL.createObjectURL(await resp.blob());
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  function closeFiles() {
    filesSandbox = null;
    $('files-panel').hidden = true;
    $('files').tBodies[0].replaceChildren();
  }

  // ---- ports (docs/design/ports.md): what listens and what is exposed, with links

  let portsSandbox = null;

  async function openPorts(id) {
    portsSandbox = id;
    $('ports-panel').hidden = false;
    $('ports-title').textContent = id;
    await listPorts();
  }

  // A token for the port, then its browser URL (?space_token=: the cookie) in a new tab.
  async function openPort(id, port) {
    const t = await api('POST', `/v1/sandboxes/${q(id)}/ports/${port}/tokens`, { body: {} });
    window.open(t.browser_url, '_blank', 'noopener,noreferrer');
  }

  async function setPublic(id, port, pub) {
    await api('PUT', `/v1/sandboxes/${q(id)}/ports/${port}`, { body: { public: pub } });
    setStatus(`Port ${port} is ${pub ? 'public' : 'private'}.`);
    if (portsSandbox === id) await listPorts();
  }

  async function listPorts() {
    const id = portsSandbox;
    const j = await api('GET', `/v1/sandboxes/${q(id)}/ports`);
    if (portsSandbox !== id) return;
    const rows = j.ports.map((p) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'port-row';
      tr.dataset.port = String(p.port);
      const listening = p.listening === null ? '?' : p.listening ? (p.reachable ? 'yes' : 'loopback only') : 'no';
      const link = document.createElement('td');
      const a = document.createElement('a');
      a.href = p.url;
      a.textContent = p.url;
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
      a.className = 'mono';
      link.append(a);
      const acts = document.createElement('td');
      acts.className = 'actions';
      acts.append(button('Open', 'port-open', () => openPort(id, p.port)),
        button(p.public ? 'Make private' : 'Make public', 'port-public', () => setPublic(id, p.port, !p.public)));
      tr.append(cell(String(p.port), 'mono'), cell(listening), cell(p.public ? 'public' : `private (${p.tokens} tokens)`),
        link, acts);
      return tr;
    });
    $('ports').tBodies[0].replaceChildren(...rows);
    $('ports-empty').hidden = rows.length > 0;
  }

  function closePorts() {
    portsSandbox = null;
    $('ports-panel').hidden = true;
    $('ports').tBodies[0].replaceChildren();
  }

  // ---- wiring

  $('login-form').addEventListener('submit', login);
  $('logout').addEventListener('click', () => loggedOut('Logged out.'));
  $('refresh').addEventListener('click', action(refresh));
  $('create-form').addEventListener('submit', action(create));
  $('terminal-close').addEventListener('click', closeTerminal);
  $('files-form').addEventListener('submit', action(() => listDir($('files-path').value.trim() || '/')));
  $('files-up').addEventListener('click', action(() => listDir(parentPath(filesPath))));
  $('files-close').addEventListener('click', closeFiles);
  $('ports-refresh').addEventListener('click', action(listPorts));
  $('ports-close').addEventListener('click', closePorts);
  $('upload').addEventListener('change', action(upload));

  if (!apiKey) {
    showLogin();
  } else {
    api('GET', '/v1/info').then((i) => { info = i; return enter(); }).catch((e) => {
      if (!(e instanceof ApiError && e.status === 401)) showLogin(`Cannot reach the daemon: ${e.message}`);
    });
  }
})();
