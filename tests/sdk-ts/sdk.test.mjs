// sdk.test.mjs -- SPACE's TypeScript SDK (sdk/typescript/dist, built by `make sdk-ts`) against a
// real daemon: SPACE_URL / SPACE_API_KEY come from tests/e2e/test_sdk_typescript.py. One `minimal`
// sandbox is shared by the tests that need no python (created by the first that needs it); the
// snippet's `base` sandbox and its fork are its own. Every sandbox made here is deleted by the
// test that made it, or by after() (whose failure fails the run).
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'

import {
  AlreadyExistsError,
  BadRequestError,
  Client,
  CommandExitError,
  ConflictError,
  InvalidArgumentError,
  IsADirectoryError,
  NotEmptyError,
  NotFoundError,
  OperationFailedError,
  SpaceError,
  StreamError,
  UnauthorizedError,
  verifySignature,
} from '../../sdk/typescript/dist/index.js'
import { readSse } from '../../sdk/typescript/dist/sse.js'

for (const v of ['SPACE_URL', 'SPACE_API_KEY'])
  assert.ok(process.env[v], `${v} is not set (run through tests/e2e/test_sdk_typescript.py)`)

const RUN = process.env.SPACE_TEST_RUN || `run-${process.pid}`
const T = { timeout: Number(process.env.SPACE_SDK_TEST_TIMEOUT_MS || 180_000) }
const client = new Client()
const live = new Map()
let shared

function track(sb) {
  live.set(sb.id, sb)
  return sb
}

async function remove(sb) {
  const r = await sb.delete()
  live.delete(sb.id)
  assert.equal(r.operation.state, 'succeeded')
  assert.equal(r.sandbox.state, 'deleted')
}

// The shared minimal sandbox.
function mini() {
  shared ??= client.sandboxes.create({ template: 'minimal', metadata: { suite: RUN, role: 'shared' }, timeoutS: 3600 }).then(track)
  return shared
}

async function waitFor(what, cond, ms = 30_000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

// An error of class Cls carrying SPACE's code and status; returns a predicate for assert.rejects.
function typed(Cls, code, status, message) {
  return (e) => {
    assert.ok(e instanceof Cls, `expected ${Cls.name}, got ${e?.name}: ${e?.message}`)
    assert.ok(e instanceof SpaceError)
    assert.equal(e.code, code)
    assert.equal(e.status, status)
    if (message) assert.match(e.message, message)
    return true
  }
}

after(async () => {
  const errors = []
  for (const [id, sb] of live) {
    try {
      await sb.delete()
    } catch (e) {
      errors.push(`${id}: ${e}`)
    }
  }
  if (errors.length) throw new Error(`cleanup failed: ${errors.join('; ')}`)
})

test('snippet: create base, run python, write and read a file, fork, delete', T, async () => {
  const sb = track(await new Client().sandboxes.create({ template: 'base', metadata: { suite: RUN } }))
  assert.match(sb.id, /^sb-[0-9a-f]{16}$/)
  assert.equal(sb.state, 'running')
  const r = await sb.run(['python3', '-c', 'print(6*7)'])
  assert.equal(r.stdout, '42\n')
  assert.equal(r.exitCode, 0)
  assert.equal(r.signal, null)
  await sb.files.write('/home/user/a.txt', 'hi')
  assert.equal(await sb.files.read('/home/user/a.txt'), 'hi')
  const [kid] = await sb.fork({ count: 1 })
  track(kid)
  assert.notEqual(kid.id, sb.id)
  assert.equal(kid.info.parent_id, sb.id)
  assert.equal(kid.info.start_kind, 'fork')
  assert.equal((await kid.refresh()).state, 'running')
  // The child has the parent's disk at the fork: the file is there; its own writes stay its own.
  assert.equal(await kid.files.read('/home/user/a.txt'), 'hi')
  await kid.files.write('/home/user/a.txt', 'kid')
  assert.equal(await sb.files.read('/home/user/a.txt'), 'hi')
  await remove(kid)
  await remove(sb)
  await assert.rejects(sb.run(['true']), typed(ConflictError, 'conflict', 409, /deleted/))
})

test('config: SPACE_API_KEY_FILE and its checks, a wrong key is UnauthorizedError', T, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'space-sdk-'))
  try {
    const file = join(dir, 'key')
    writeFileSync(file, `${process.env.SPACE_API_KEY}\n`, { mode: 0o600 })
    const viaFile = new Client({ url: process.env.SPACE_URL, apiKeyFile: file })
    assert.match((await viaFile.info()).version, /^\d+\.\d+/)
    const open = join(dir, 'open')
    writeFileSync(open, `${process.env.SPACE_API_KEY}\n`, { mode: 0o644 })
    await assert.rejects(new Client({ apiKeyFile: open }).info(), typed(UnauthorizedError, 'unauthorized', 0, /mode 0644/))
    const bad = new Client({ apiKey: 'not-the-key' })
    await assert.rejects(bad.sandboxes.list(), typed(UnauthorizedError, 'unauthorized', 401))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  // No key anywhere: the constructor says how to give one.
  const saved = process.env.SPACE_API_KEY
  delete process.env.SPACE_API_KEY
  try {
    assert.throws(() => new Client(), typed(UnauthorizedError, 'unauthorized', 0, /SPACE_API_KEY/))
  } finally {
    process.env.SPACE_API_KEY = saved
  }
})

test('errors: typed classes carry the code, status and message', T, async () => {
  await assert.rejects(client.sandboxes.get('sb-0000000000000000'), typed(NotFoundError, 'not_found', 404, /sb-0000000000000000/))
  await assert.rejects(client.sandboxes.create({ template: 'minimal', vcpus: 99 }), typed(BadRequestError, 'bad_request', 400, /vcpus/))
  await assert.rejects(client.sandboxes.create({ template: 'no-such-template' }), typed(NotFoundError, 'not_found', 404))
  await assert.rejects(client.operations.get('op-0000000000000000'), typed(NotFoundError, 'not_found', 404))
  const sb = await mini()
  const dir = '/var/tmp/errs'
  await sb.files.mkdir(dir)
  await assert.rejects(sb.files.mkdir(dir), typed(AlreadyExistsError, 'already_exists', 409))
  assert.ok(AlreadyExistsError.prototype instanceof ConflictError)
  await sb.files.write(`${dir}/f`, 'x')
  await assert.rejects(sb.files.remove(dir), typed(NotEmptyError, 'not_empty', 409))
  await assert.rejects(sb.files.read(dir), typed(IsADirectoryError, 'is_a_directory', 400))
  await assert.rejects(sb.files.read(`${dir}/missing`), typed(NotFoundError, 'not_found', 404, /No such file/))
  await sb.files.remove(dir, { recursive: true })
  assert.equal(await sb.files.exists(dir), false)
})

test('commands: run with streaming callbacks, exit codes, check', T, async () => {
  const sb = await mini()
  const out = []
  const err = []
  const chunks = []
  const r = await sb.run('for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 3', {
    onStdout: (s) => out.push(s),
    onStderr: (s) => err.push(s),
    onOutput: (c) => chunks.push(c),
    env: { X: 'y' },
  })
  assert.equal(r.exitCode, 3)
  assert.equal(r.stdout, 'out1\nout2\nout3\n')
  assert.equal(r.stderr, 'err1\nerr2\nerr3\n')
  assert.equal(out.join(''), r.stdout)
  assert.equal(err.join(''), r.stderr)
  // Offsets count both streams together; the last chunk's is the final offset.
  assert.equal(r.offset, r.stdoutBytes.length + r.stderrBytes.length)
  assert.equal(chunks.at(-1).offset, r.offset)
  // keepOutput: false: the callbacks see it all, the result keeps none of it.
  let streamed = ''
  const lean = await sb.run(['sh', '-c', 'echo lean; echo side >&2'], { keepOutput: false, onStdout: (s) => (streamed += s) })
  assert.equal(streamed, 'lean\n')
  assert.deepEqual([lean.stdout, lean.stderr, lean.exitCode, lean.offset], ['', '', 0, 10])
  const env = await sb.run(['sh', '-c', 'echo "$X" $(pwd)'], { env: { X: 'from-sdk' }, cwd: '/var/tmp' })
  assert.equal(env.stdout, 'from-sdk /var/tmp\n')
  await assert.rejects(sb.run(['sh', '-c', 'echo bad >&2; exit 4'], { check: true }), (e) => {
    assert.ok(e instanceof CommandExitError, `${e?.name}: ${e?.message}`)
    assert.equal(e.code, 'command_failed')
    assert.equal(e.exitCode, 4)
    assert.equal(e.stderr, 'bad\n')
    return true
  })
  // A command that cannot start: its stream's error event.
  await assert.rejects(sb.run(['/no/such/binary']), typed(StreamError, 'stream_error', 0, /exec \/no\/such\/binary: No such file/))
  const listed = await sb.commands.list()
  assert.ok(listed.some((s) => s.id === r.sessionId && s.exit_code === 3), JSON.stringify(listed.map((s) => [s.id, s.state])))
})

test('commands: stdin, sent whole or piece by piece', T, async () => {
  const sb = await mini()
  const whole = await sb.run(['cat'], { stdin: 'all at once\n' })
  assert.equal(whole.stdout, 'all at once\n')
  let seen = ''
  const cat = await sb.commands.start(['cat'], { stdin: true, onStdout: (s) => (seen += s) })
  await cat.sendStdin('ping\n')
  await waitFor('cat to echo ping', () => seen.includes('ping\n'))
  await cat.sendStdin(new Uint8Array([0x70, 0x6f, 0x6e, 0x67, 0x0a]))
  await waitFor('cat to echo pong', () => seen.includes('pong\n'))
  await cat.closeStdin()
  const r = await cat.wait()
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'ping\npong\n')
  await assert.rejects(cat.sendStdin('late'), typed(ConflictError, 'conflict', 409))
})

test('commands: an expired data-plane token is renewed by itself', T, async () => {
  const sb = await mini()
  let seen = ''
  const cat = await sb.commands.start(['cat'], { stdin: true, tokenTtlS: 1, onStdout: (s) => (seen += s) })
  await cat.sendStdin('a\n')
  await waitFor('cat to echo a', () => seen.includes('a\n'))
  await new Promise((r) => setTimeout(r, 2100)) // past the token's 1 s
  await cat.sendStdin('b\n', { close: true }) // 401, a new token, the same request again
  const r = await cat.wait()
  assert.equal(r.stdout, 'a\nb\n')
})

test('commands: a signal ends a command', T, async () => {
  const sb = await mini()
  let seen = ''
  const c = await sb.commands.start(['sh', '-c', 'echo ready; exec sleep 120'], { onStdout: (s) => (seen += s) })
  await waitFor('the command to print ready', () => seen.includes('ready'))
  await c.sendSignal('SIGTERM')
  const r = await c.wait()
  assert.equal(r.signal, 15)
  assert.equal(r.exitCode, null)
  await assert.rejects(c.sendSignal('KILL'), typed(ConflictError, 'conflict', 409))
})

test('commands: a PTY, resized', T, async () => {
  const sb = await mini()
  let screen = ''
  const pty = await sb.commands.start(['sh'], { pty: { rows: 24, cols: 80 }, onStdout: (s) => (screen += s) })
  assert.equal((await sb.commands.get(pty.id)).kind, 'pty')
  await pty.sendStdin('stty size; tty\n')
  await waitFor('stty size 24 80 and the tty', () => screen.includes('24 80') && /\/dev\/pts\/\d+/.test(screen))
  await pty.resize({ rows: 30, cols: 100 })
  await pty.sendStdin('stty size\n')
  await waitFor('stty size 30 100', () => screen.includes('30 100'))
  await pty.sendStdin('exit 7\n')
  const r = await pty.wait()
  assert.equal(r.exitCode, 7)
  assert.equal(r.stderr, '', 'a PTY has no stderr')
})

test('sse: events split anywhere, CRLF, comments, multi-line data, a cut last event', T, async () => {
  const text = ': keepalive\r\nevent: stdout\r\nid: 3\r\ndata: YWJj\r\n\r\ndata: one\ndata: two\n\nid: 9\revent: exit\rdata: {}\r\r' +
    'event: stdout\ndata: cut'
  const bytes = new TextEncoder().encode(text)
  for (const size of [1, 2, 3, 7, bytes.length]) {
    const chunks = []
    for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size))
    const body = new ReadableStream({ pull: (c) => (chunks.length ? c.enqueue(chunks.shift()) : c.close()) })
    const got = []
    for await (const ev of readSse(body)) got.push(ev)
    assert.deepEqual(got, [
      { event: 'stdout', id: '3', data: 'YWJj' },
      { event: 'message', id: '3', data: 'one\ntwo' },
      { event: 'exit', id: '9', data: '{}' },
    ], `chunks of ${size}`)
  }
})

// A TCP relay on loopback between the SDK and the data plane that cuts each of its first `cuts`
// connections once `after` bytes came back through it: a connection dropped mid-stream.
function cuttingProxy(target, cuts, after) {
  const { hostname, port } = new URL(target)
  const seen = []
  const open = new Set()
  let n = 0
  const server = net.createServer((c) => {
    const cut = n++ < cuts
    const up = net.connect(Number(port), hostname)
    open.add(c).add(up)
    let back = 0
    const req = { head: '' } // what the client sent on this connection (its requests' heads)
    seen.push(req)
    c.on('data', (d) => {
      if (req.head.length < 65536) req.head += d.toString('latin1')
      up.write(d)
    })
    up.on('data', (d) => {
      c.write(d)
      back += d.length
      if (cut && back >= after) {
        c.destroy()
        up.destroy()
      }
    })
    c.on('close', () => up.destroy())
    up.on('close', () => c.destroy())
    c.on('error', () => undefined)
    up.on('error', () => undefined)
  })
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        seen,
        // Kept-alive connections too (else close waits for the client's idle timeout).
        close: () =>
          new Promise((r) => {
            server.close(r)
            for (const s of open) s.destroy()
          }),
      }),
    ),
  )
}

test('commands: the stream resumes after a dropped connection, and from another client', T, async () => {
  const sb = await mini()
  const info = await client.info()
  const proxy = await cuttingProxy(info.data_plane_url, 2, 400)
  try {
    const viaProxy = new Client({ dataPlaneUrl: proxy.url })
    const sb2 = await viaProxy.sandboxes.get(sb.id)
    let streamed = ''
    const want = Array.from({ length: 40 }, (_, i) => `line ${i}\n`).join('')
    const c = await sb2.commands.start(['sh', '-c', 'i=0; while [ $i -lt 40 ]; do echo "line $i"; i=$((i+1)); usleep 10000; done'], {
      onStdout: (s) => (streamed += s),
    })
    const r = await c.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, want, 'every byte once, in order, across the drops')
    assert.equal(streamed, want)
    assert.ok(c.reconnectCount >= 2, `reconnected ${c.reconnectCount} times`)
    // Each connection after a cut resumed from an offset (the first began at 0).
    const resumed = proxy.seen.filter((c) => /^last-event-id: [1-9]\d*\r$/im.test(c.head))
    assert.ok(proxy.seen.length >= 3 && resumed.length >= 2, `connections: ${JSON.stringify(proxy.seen.map((c) => c.head.slice(0, 300)))}`)
    // Another client follows the same session from an offset: exactly the bytes after it.
    const from = want.indexOf('line 30')
    const again = await client.sandboxes.get(sb.id).then((s) => s.commands.connect(c.id, { offset: from }))
    const tail = await again.wait()
    assert.equal(tail.stdout, want.slice(from))
    assert.equal(tail.exitCode, 0)
  } finally {
    await proxy.close()
  }
})

test('files: write, read (text, bytes, ranges), stat, list, mkdir, rename, remove', T, async () => {
  const sb = await mini()
  const dir = '/var/tmp/ft'
  assert.equal(await sb.files.mkdir(`${dir}/sub`, { parents: true }), true)
  assert.equal(await sb.files.mkdir(`${dir}/sub`, { parents: true }), false)
  const w = await sb.files.write(`${dir}/a.txt`, 'hello files', { mode: 0o600 })
  assert.deepEqual(w, { path: `${dir}/a.txt`, size: 11 })
  assert.equal(await sb.files.read(`${dir}/a.txt`), 'hello files')
  assert.equal(await sb.files.read(`${dir}/a.txt`, { offset: 6, length: 3 }), 'fil')
  const bin = new Uint8Array([0, 1, 2, 253, 254, 255])
  await sb.files.write(`${dir}/sub/b.bin`, bin)
  assert.deepEqual(await sb.files.read(`${dir}/sub/b.bin`, { format: 'bytes' }), bin)
  const st = await sb.files.stat(`${dir}/a.txt`)
  assert.equal(st.type, 'file')
  assert.equal(st.size, 11)
  assert.equal(st.mode, 0o600)
  assert.equal(st.permissions, '-rw-------')
  const entries = await sb.files.list(dir, { depth: 2 })
  assert.deepEqual(entries.map((e) => [e.path, e.type]), [
    [`${dir}/a.txt`, 'file'],
    [`${dir}/sub`, 'dir'],
    [`${dir}/sub/b.bin`, 'file'],
  ])
  // A stream body, streamed into the file.
  const parts = ['one ', 'two ', 'three']
  const stream = new ReadableStream({
    pull(ctl) {
      const p = parts.shift()
      if (p === undefined) ctl.close()
      else ctl.enqueue(new TextEncoder().encode(p))
    },
  })
  assert.equal((await sb.files.write(`${dir}/streamed.txt`, stream)).size, 13)
  assert.equal(await sb.files.read(`${dir}/streamed.txt`), 'one two three')
  await sb.files.rename(`${dir}/a.txt`, `${dir}/sub/moved.txt`)
  assert.equal(await sb.files.exists(`${dir}/a.txt`), false)
  await assert.rejects(sb.files.rename(`${dir}/streamed.txt`, `${dir}/sub/moved.txt`, { overwrite: false }), typed(AlreadyExistsError, 'already_exists', 409))
  assert.equal(await sb.files.read(`${dir}/sub/moved.txt`), 'hello files')
  await sb.files.remove(dir, { recursive: true })
  assert.equal(await sb.files.exists(dir), false)
})

test('files: watch sees changes, stop ends it', T, async () => {
  const sb = await mini()
  const dir = '/var/tmp/watched'
  await sb.files.mkdir(dir)
  const events = []
  const w = await sb.files.watch(dir, { recursive: true, onEvent: (e) => events.push(e) })
  assert.equal(w.path, dir)
  await sb.files.write(`${dir}/seen.txt`, 'x')
  await sb.files.mkdir(`${dir}/d`)
  await sb.files.write(`${dir}/d/deep.txt`, 'y')
  await waitFor('create events for seen.txt and d/deep.txt', () =>
    events.some((e) => e.path === `${dir}/seen.txt` && e.type === 'create') && events.some((e) => e.path === `${dir}/d/deep.txt` && e.type === 'create'),
  )
  assert.ok(events.some((e) => e.path === `${dir}/d` && e.dir === true), JSON.stringify(events))
  // The iterator yields the same events in the same order.
  const it = w[Symbol.asyncIterator]()
  assert.deepEqual((await it.next()).value, events[0])
  await w.stop()
  await w.done
  await sb.files.remove(dir, { recursive: true })
})

// A ustar header block for one entry (what a hostile client might send).
function tarHeader(name, size, type = '0') {
  const h = new Uint8Array(512)
  const put = (off, s) => h.set(new TextEncoder().encode(s), off)
  put(0, name)
  put(100, '0000644\0')
  put(108, '0000000\0')
  put(116, '0000000\0')
  put(124, size.toString(8).padStart(11, '0') + '\0')
  put(136, '00000000000\0')
  put(148, '        ')
  put(156, type)
  put(257, 'ustar\0')
  put(263, '00')
  let sum = 0
  for (const b of h) sum += b
  put(148, sum.toString(8).padStart(6, '0') + '\0 ')
  return h
}

test('files: tar out of one directory and into another; a hostile tar is refused', T, async () => {
  const sb = await mini()
  await sb.files.write('/var/tmp/proj/a.txt', 'A', { parents: true })
  await sb.files.write('/var/tmp/proj/sub/b.txt', 'BB', { parents: true })
  const tar = await sb.files.readTar('/var/tmp/proj')
  assert.equal(tar.length % 512, 0)
  const names = []
  for (let off = 0; off + 512 <= tar.length; ) {
    const h = tar.subarray(off, off + 512)
    if (h.every((b) => b === 0)) break
    const name = new TextDecoder().decode(h.subarray(0, 100)).replace(/\0.*$/s, '')
    const size = parseInt(new TextDecoder().decode(h.subarray(124, 136)).replace(/\0.*$/s, '').trim() || '0', 8)
    if (h[156] !== 0x78 /* pax 'x' */) names.push(name)
    off += 512 + Math.ceil(size / 512) * 512
  }
  assert.deepEqual(names.sort(), ['proj/', 'proj/a.txt', 'proj/sub/', 'proj/sub/b.txt'])
  await sb.files.mkdir('/var/tmp/copy')
  const x = await sb.files.writeTar('/var/tmp/copy', tar)
  assert.equal(x.path, '/var/tmp/copy')
  assert.equal(x.entries, 4)
  assert.equal(await sb.files.read('/var/tmp/copy/proj/sub/b.txt'), 'BB')
  const evil = new Uint8Array(512 * 4)
  evil.set(tarHeader('../escaped.txt', 1), 0)
  evil[512] = 0x21
  await assert.rejects(sb.files.writeTar('/var/tmp/copy', evil), typed(InvalidArgumentError, 'invalid_argument', 400))
  assert.equal(await sb.files.exists('/var/tmp/escaped.txt'), false)
  await sb.files.remove('/var/tmp/proj', { recursive: true })
  await sb.files.remove('/var/tmp/copy', { recursive: true })
})

test('sandboxes: get, list by metadata', T, async () => {
  const sb = await mini()
  const got = await client.sandboxes.get(sb.id)
  assert.equal(got.info.template, 'minimal')
  assert.equal(got.info.metadata.suite, RUN)
  const mine = await client.sandboxes.list({ metadata: { suite: RUN, role: 'shared' } })
  assert.deepEqual(mine.map((s) => s.id), [sb.id])
  assert.deepEqual(await client.sandboxes.list({ metadata: { suite: `${RUN}-none` } }), [])
  const running = await client.sandboxes.list({ state: ['running'] })
  assert.ok(running.some((s) => s.id === sb.id))
  assert.ok((await client.templates.list()).some((t) => t.name === 'minimal'))
})

test('network policy and secrets', T, async () => {
  const sb = await mini()
  const name = `sdk-${RUN}`.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 60)
  const put = await client.secrets.put(name, { value: 's3cret', hosts: ['API.example.com'] })
  assert.deepEqual(put.hosts, ['api.example.com'])
  assert.equal(put.value, undefined, 'a secret value is never returned')
  assert.ok((await client.secrets.list()).some((s) => s.name === name))
  const policy = await sb.setNetwork({
    allow: ['api.example.com:443', '203.0.113.0/24'],
    deny: ['evil.example.com'],
    inject: [{ host: 'api.example.com', header: 'Authorization', secret: name, prefix: 'Bearer ' }],
  })
  assert.deepEqual(policy.allow, ['api.example.com:443', '203.0.113.0/24'])
  assert.equal(policy.inject[0].secret, name)
  assert.deepEqual((await sb.getNetwork()).deny, ['evil.example.com'])
  await assert.rejects(
    sb.setNetwork({ allow: ['x.example.org'], inject: [{ host: 'x.example.org', header: 'Authorization', secret: name }] }),
    typed(BadRequestError, 'bad_request', 400, /may not be sent to x\.example\.org/),
  )
  assert.ok(Array.isArray(await sb.egress({ limit: 10 })))
  await sb.setNetwork({})
  await client.secrets.delete(name)
  await assert.rejects(client.secrets.get(name), typed(NotFoundError, 'not_found', 404))
})

// One GET through the data plane's port proxy (the SDK names the URL; *.localhost is not in this
// machine's resolver, so the request goes to 127.0.0.1 with the port's name as Host).
function getThroughProxy(url, headers = {}) {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: u.port, path: u.pathname, headers: { Host: u.host, ...headers } }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
  })
}

test('ports: what listens, a token opens a port, revoke, public', T, async () => {
  const sb = await mini()
  await sb.files.write('/var/tmp/www/index.html', 'served\n', { parents: true })
  const web = await sb.commands.start(['httpd', '-f', '-p', '8000', '-h', '/var/tmp/www'])
  try {
    const p = await waitFor('port 8000 to listen', async () => (await sb.ports.list()).ports.find((x) => x.port === 8000 && x.listening))
    assert.equal(p.public, false)
    assert.equal(p.url, (await sb.ports.list()).pattern.replace('{port}', '8000'))
    assert.equal((await getThroughProxy(p.url)).status, 401, 'private: no token, no entry')
    const tok = await sb.ports.token(8000, { ttlS: 300 })
    assert.equal(tok.header, 'X-Space-Token')
    const got = await getThroughProxy(tok.url, { [tok.header]: tok.token })
    assert.deepEqual(got, { status: 200, body: 'served\n' })
    assert.equal(await sb.ports.revoke(8000, tok.id), 1)
    assert.equal((await getThroughProxy(tok.url, { [tok.header]: tok.token })).status, 401)
    assert.equal((await sb.ports.setPublic(8000, true)).public, true)
    assert.equal((await getThroughProxy(p.url)).body, 'served\n')
    await sb.ports.setPublic(8000, false)
  } finally {
    await web.kill()
  }
  assert.equal((await web.wait()).signal, 9)
  await sb.files.remove('/var/tmp/www', { recursive: true })
})

test('lifecycle: pause, resume, suspend, restore, stop, start, wake, timeout', T, async () => {
  const sb = await mini()
  await sb.files.write('/var/tmp/keep.txt', 'kept')
  let r = await sb.pause()
  assert.equal(r.operation.kind, 'pause')
  assert.equal(r.sandbox.state, 'paused')
  await assert.rejects(sb.pause(), typed(ConflictError, 'conflict', 409, /paused/))
  r = await sb.resume()
  assert.equal(r.sandbox.state, 'running')
  r = await sb.suspend()
  assert.equal(r.sandbox.state, 'suspended')
  assert.ok(r.sandbox.suspended_bytes > 0)
  r = await sb.wake()
  assert.equal(r.operation.kind, 'restore')
  assert.equal(r.sandbox.state, 'running')
  assert.equal((await sb.run(['cat', '/var/tmp/keep.txt'])).stdout, 'kept')
  const noop = await sb.wake()
  assert.equal(noop.operation, null)
  r = await sb.stop()
  assert.equal(r.sandbox.state, 'stopped')
  r = await sb.start()
  assert.equal(r.operation.kind, 'start')
  assert.equal(r.sandbox.state, 'running')
  assert.equal((await sb.run(['cat', '/var/tmp/keep.txt'])).stdout, 'kept', 'the disk outlives a stop')
  r = await sb.suspend()
  r = await sb.restore()
  assert.equal(r.sandbox.state, 'running')
  const info = await sb.setTimeout(1800, { onTimeout: 'suspend' })
  assert.equal(info.on_timeout, 'suspend')
  const left = Date.parse(info.expires_at) - Date.now()
  assert.ok(left > 1700_000 && left <= 1800_000, `expires in ${left} ms`)
  const { operation } = await sb.pause({ wait: false })
  assert.equal(operation.kind, 'pause')
  assert.equal((await client.operations.wait(operation)).state, 'succeeded')
  await sb.resume()
})

test('snapshots: take a named one, create from it, delete it', T, async () => {
  const sb = await mini()
  await sb.files.write('/var/tmp/golden.txt', 'golden')
  const name = `sdk-${process.pid}`
  const snap = await sb.snapshot(name)
  assert.equal(snap.name, name)
  assert.equal(snap.kind, 'named')
  assert.equal(snap.state, 'ready')
  assert.equal((await client.snapshots.get(name)).id, snap.id)
  assert.ok((await client.snapshots.list()).some((s) => s.id === snap.id))
  const clone = track(await client.sandboxes.create({ snapshot: name, metadata: { suite: RUN } }))
  assert.equal(clone.info.snapshot, snap.id)
  assert.equal(await clone.files.read('/var/tmp/golden.txt'), 'golden')
  await remove(clone)
  await client.snapshots.delete(name)
  await assert.rejects(client.snapshots.get(name), typed(NotFoundError, 'not_found', 404))
  await assert.rejects(sb.snapshot('.bad'), typed(BadRequestError, 'bad_request', 400))
})

test('builds: a context, a template from minimal, its log, a sandbox of it; a failing step', T, async () => {
  const name = `sdk-built-${process.pid}`
  const logs = []
  const steps = []
  // A context of one file, hello.txt, for the copy step.
  const tar = new Uint8Array(512 * 4)
  tar.set(tarHeader('hello.txt', 4), 0)
  tar.set(new TextEncoder().encode('ctx\n'), 512)
  const ctx = await client.builds.uploadContext(tar)
  assert.match(ctx.context, /^sha256:[0-9a-f]{64}$/)
  const b = await client.builds.run(
    {
      name,
      from: 'minimal',
      context: ctx.context,
      steps: [{ run: 'echo building; echo made > /etc/sdk-made' }, { copy: { src: 'hello.txt', dest: '/opt/' } }, { env: { SDK_BUILT: 'yes' } }],
    },
    { onLog: (step, text) => logs.push([step, text]), onStep: (st) => steps.push(st.state) },
  )
  assert.equal(b.state, 'succeeded')
  assert.match(b.digest, /^sha256:[0-9a-f]{64}$/)
  assert.ok(logs.some(([step, text]) => step === 0 && text.includes('building')), JSON.stringify(logs))
  assert.ok(steps.includes('done'), JSON.stringify(steps))
  assert.equal((await client.templates.get(name)).digest, b.digest)
  const sb = track(await client.sandboxes.create({ template: name, metadata: { suite: RUN } }))
  const r = await sb.run(['sh', '-c', 'cat /etc/sdk-made /opt/hello.txt; echo $SDK_BUILT'])
  assert.equal(r.stdout, 'made\nctx\nyes\n')
  await remove(sb)
  await assert.rejects(
    client.builds.run({ name: `${name}-broken`, from: 'minimal', steps: [{ run: 'exit 3' }] }),
    (e) => e instanceof OperationFailedError && e.operation.kind === 'build' && /step/.test(e.message),
  )
  await client.templates.delete(name)
  await assert.rejects(client.templates.get(name), typed(NotFoundError, 'not_found', 404))
  // A running sandbox's disk made a template.
  const shared = await mini()
  await shared.files.write('/var/tmp/promoted.txt', 'from the sandbox')
  const promo = await client.builds.fromSandbox(shared.id, { name: `${name}-promoted`, tags: ['v1'] })
  const op = await client.operations.wait(promo.operation)
  assert.equal(op.kind, 'build')
  const t = await client.templates.get(`${name}-promoted:v1`)
  assert.equal(t.digest, op.result.digest)
  assert.equal((await shared.refresh()).state, 'running')
  await client.templates.delete(`${name}-promoted`)
})

test('operations: a create cut short by a delete rejects with OperationFailedError', T, async () => {
  // Not the template's size: a cold boot, long enough for the delete to come first.
  const sb = track(await client.sandboxes.create({ template: 'minimal', memoryMib: 160, wait: false }))
  assert.equal(sb.operation.kind, 'create')
  const del = await sb.delete({ wait: false })
  await assert.rejects(client.operations.wait(sb.operation), (e) => {
    assert.ok(e instanceof OperationFailedError, `${e?.name}: ${e?.message}`)
    assert.equal(e.code, 'operation_failed')
    assert.equal(e.operation.kind, 'create')
    assert.equal(e.operation.state, 'failed')
    assert.match(e.message, /cancelled/)
    return true
  })
  assert.equal((await client.operations.wait(del.operation)).state, 'succeeded')
  live.delete(sb.id)
  assert.equal((await sb.refresh()).state, 'deleted')
})

test('events and webhooks: a page, waitFor, a refused URL, verifySignature', T, async () => {
  const sb = await mini()
  const page = await client.events.list({ sandbox: sb.id, limit: 1000 })
  assert.equal(page.events[0].type, 'sandbox.created')
  assert.equal(page.events[0].sandbox_id, sb.id)
  assert.ok(page.events.every((e, i) => i === 0 || e.seq > page.events[i - 1].seq))
  const waiting = client.events.waitFor('timeout_set', { sandbox: sb.id, after: page.cursor, timeoutMs: 60_000 })
  await sb.setTimeout(1800)
  const ev = await waiting
  assert.equal(ev.type, 'sandbox.timeout_set')
  assert.equal(ev.data.timeout_s, 1800)
  // The suite's daemon runs without --webhooks-allow-loopback: a typed error naming it.
  const secret = 'a-secret-of-sixteen+'
  await assert.rejects(client.webhooks.create('http://127.0.0.1:9/x', secret),
    typed(BadRequestError, 'bad_request', 400, /webhooks-allow-loopback/))
  await assert.rejects(client.webhooks.get('wh-0000000000000000'), typed(NotFoundError, 'not_found', 404))
  const body = '{"type":"sandbox.created"}'
  const t = Math.floor(Date.now() / 1000)
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')
  assert.equal(await verifySignature(`t=${t},v1=${v1}`, body, secret), true)
  assert.equal(await verifySignature(`t=${t},v1=${v1}`, body + ' ', secret), false)
  assert.equal(await verifySignature(`t=${t},v1=${v1}`, body, secret + 'x'), false)
  assert.equal(await verifySignature(`t=${t - 1000},v1=${v1}`, body, secret), false)
})

test('delete: the shared sandbox goes, a second delete is ConflictError', T, async () => {
  const sb = await mini()
  await remove(sb)
  await assert.rejects(sb.delete(), typed(ConflictError, 'conflict', 409))
  await assert.rejects(client.sandboxes.create({ template: 'minimal', vcpus: 1, memoryMib: 63 }), typed(BadRequestError, 'bad_request', 400))
})
