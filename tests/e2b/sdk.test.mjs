// sdk.test.mjs -- the unmodified E2B JS SDK (e2b@2.51.0) against SPACE's E2B front end, base
// template. One sandbox is shared by the tests that do not change its lifecycle (create makes
// it, kill-twice ends it); each test stops the processes and watches it starts.
import assert from 'node:assert/strict'
import http from 'node:http'
import { after, test } from 'node:test'

import { CommandExitError, NotFoundError, Sandbox } from 'e2b'

import { RUN, SANDBOX_TIMEOUT, TEST_TIMEOUT, dec, enc, kill, killAll, track, waitFor } from './lib.mjs'

const T = { timeout: TEST_TIMEOUT }
let shared

// The shared sandbox; created by the first test that needs it (normally `create`).
async function sbx() {
  if (!shared)
    shared = Sandbox.create({ metadata: { suite: RUN, role: 'shared' }, timeoutMs: SANDBOX_TIMEOUT }).then(track)
  return shared
}

after(() => killAll(Sandbox))

test('create: Sandbox.create() on the base template', T, async () => {
  const s = await sbx()
  assert.match(s.sandboxId, /^sb-/)
  const info = await s.getInfo()
  assert.equal(info.sandboxId, s.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.metadata.suite, RUN)
})

test('isRunning: envd answers GET /health', T, async () => {
  const s = await sbx()
  assert.equal(await s.isRunning(), true)
})

test('commands.run: stdout, stderr and exit code', T, async () => {
  const s = await sbx()
  const r = await s.commands.run('echo hello; echo oops >&2')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello\n')
  assert.equal(r.stderr, 'oops\n')
  // The command line goes through bash -l -c, as E2B's envd runs it.
  const u = await s.commands.run('whoami; pwd; echo "$FOO"', { envs: { FOO: 'bar' }, cwd: '/tmp' })
  assert.equal(u.stdout, 'user\n/tmp\nbar\n')
  const streamed = []
  await s.commands.run('for i in 1 2 3; do echo $i; done', { onStdout: (d) => streamed.push(d) })
  assert.equal(streamed.join(''), '1\n2\n3\n')
})

test('commands.run non-zero exit: CommandExitError with exitCode', T, async () => {
  const s = await sbx()
  await assert.rejects(s.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `expected CommandExitError, got ${e?.name}: ${e?.message}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    assert.equal(e.stderr, 'bad\n')
    return true
  })
})

test('commands.run background: sendStdin, list, kill', T, async () => {
  const s = await sbx()
  let out = ''
  const h = await s.commands.run('cat', { background: true, stdin: true, onStdout: (d) => (out += d) })
  try {
    assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`)
    await h.sendStdin('ping\n')
    await waitFor('cat to echo ping', () => out.includes('ping\n'))
    await s.commands.sendStdin(h.pid, 'pong\n')
    await waitFor('cat to echo pong', () => out.includes('pong\n'))
    const listed = await s.commands.list()
    assert.ok(listed.some((p) => p.pid === h.pid), `pid ${h.pid} not in ${JSON.stringify(listed)}`)
  } finally {
    assert.equal(await h.kill(), true)
  }
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError || /signal|killed/i.test(String(e)))
  await waitFor('the killed process to leave the list', async () => !(await s.commands.list()).some((p) => p.pid === h.pid))
  // A pid that no longer exists: kill says false, not an error.
  assert.equal(await s.commands.kill(h.pid), false)
})

test('files: write, read, list, exists, makeDir, rename, remove', T, async () => {
  const s = await sbx()
  const dir = '/home/user/ft'
  const info = await s.files.write(`${dir}/a.txt`, 'hello files')
  assert.equal(info.path, `${dir}/a.txt`)
  assert.equal(await s.files.read(`${dir}/a.txt`), 'hello files')
  const bytes = await s.files.read(`${dir}/a.txt`, { format: 'bytes' })
  assert.deepEqual(Array.from(bytes), Array.from(enc.encode('hello files')))
  assert.equal(await s.files.exists(`${dir}/a.txt`), true)
  assert.equal(await s.files.exists(`${dir}/nope.txt`), false)
  assert.equal(await s.files.makeDir(`${dir}/sub`), true)
  assert.equal(await s.files.makeDir(`${dir}/sub`), false, 'makeDir of an existing dir says false')
  const entries = await s.files.list(dir)
  const byName = Object.fromEntries(entries.map((e) => [e.name, e]))
  assert.deepEqual(Object.keys(byName).sort(), ['a.txt', 'sub'])
  assert.equal(byName['a.txt'].type, 'file')
  assert.equal(byName['a.txt'].path, `${dir}/a.txt`)
  assert.equal(byName['a.txt'].size, 11)
  assert.equal(byName.sub.type, 'dir')
  const moved = await s.files.rename(`${dir}/a.txt`, `${dir}/sub/b.txt`)
  assert.equal(moved.path, `${dir}/sub/b.txt`)
  assert.equal(await s.files.exists(`${dir}/a.txt`), false)
  assert.equal(await s.files.read(`${dir}/sub/b.txt`), 'hello files')
  await s.files.remove(dir)
  assert.equal(await s.files.exists(dir), false)
  await assert.rejects(s.files.read(`${dir}/sub/b.txt`), (e) => {
    assert.ok(e instanceof NotFoundError, `expected NotFoundError, got ${e?.name}: ${e?.message}`)
    return true
  })
})

test('files.write: several files in one call', T, async () => {
  const s = await sbx()
  const dir = '/home/user/multi'
  const infos = await s.files.write([
    { path: `${dir}/one.txt`, data: 'one' },
    { path: `${dir}/deeper/two.txt`, data: 'two' },
    { path: `${dir}/three.bin`, data: new Uint8Array([0, 1, 2, 255]).buffer },
  ])
  assert.deepEqual(infos.map((i) => i.path).sort(), [`${dir}/deeper/two.txt`, `${dir}/one.txt`, `${dir}/three.bin`])
  assert.equal(await s.files.read(`${dir}/one.txt`), 'one')
  assert.equal(await s.files.read(`${dir}/deeper/two.txt`), 'two')
  assert.deepEqual(Array.from(await s.files.read(`${dir}/three.bin`, { format: 'bytes' })), [0, 1, 2, 255])
  await s.files.remove(dir)
})

test('files.watchDir: sees a file written', T, async () => {
  const s = await sbx()
  const dir = '/home/user/watched'
  await s.files.makeDir(dir)
  const events = []
  const w = await s.files.watchDir(dir, (ev) => events.push(ev))
  try {
    await s.files.write(`${dir}/seen.txt`, 'x')
    await waitFor('a watch event for seen.txt', () => events.some((e) => e.name === 'seen.txt'))
    assert.ok(events.every((e) => typeof e.type === 'string'), JSON.stringify(events))
    assert.ok(events.some((e) => e.name === 'seen.txt' && ['create', 'write'].includes(e.type)), JSON.stringify(events))
  } finally {
    await w.stop()
  }
  await s.files.remove(dir)
})

test('pty: create, sendInput, resize (stty size)', T, async () => {
  const s = await sbx()
  let out = ''
  const h = await s.pty.create({ cols: 80, rows: 24, onData: (d) => (out += dec.decode(d, { stream: true })) })
  try {
    await s.pty.sendInput(h.pid, enc.encode('stty size\n'))
    await waitFor('stty size to print 24 80', () => out.includes('24 80'))
    await s.pty.resize(h.pid, { cols: 100, rows: 30 })
    await s.pty.sendInput(h.pid, enc.encode('stty size\n'))
    await waitFor('stty size to print 30 100', () => out.includes('30 100'))
  } finally {
    assert.equal(await s.pty.kill(h.pid), true)
  }
})

test('setTimeout: moves the end of life', T, async () => {
  const s = await sbx()
  await s.setTimeout(900_000)
  const info = await s.getInfo()
  const left = info.endAt.getTime() - Date.now()
  assert.ok(left > 800_000 && left <= 910_000, `endAt ${info.endAt.toISOString()} is ${left} ms away, expected ~900 s`)
  await s.setTimeout(SANDBOX_TIMEOUT)
})

test('Sandbox.list: finds ours, filters by metadata', T, async () => {
  const s = await sbx()
  const mine = await Sandbox.list({ query: { metadata: { suite: RUN, role: 'shared' } } }).nextItems()
  const found = mine.find((i) => i.sandboxId === s.sandboxId)
  assert.ok(found, `${s.sandboxId} not in ${JSON.stringify(mine.map((i) => i.sandboxId))}`)
  assert.equal(found.state, 'running')
  assert.equal(found.templateId, 'base')
  assert.equal(found.metadata.suite, RUN)
  const other = await Sandbox.list({ query: { metadata: { suite: `${RUN}-other` } } }).nextItems()
  assert.ok(!other.some((i) => i.sandboxId === s.sandboxId), 'a metadata filter that does not match still lists it')
})

// GET http://<host>/ over the data plane's address (Node does not resolve *.localhost itself).
function getVia(host, headers = {}) {
  const [, port] = host.split(':')
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(port), path: '/', headers: { Host: host, ...headers } },
      (res) => {
        let body = ''
        res.on('data', (d) => (body += d))
        res.on('end', () => resolve({ status: res.statusCode, body }))
      })
    req.on('error', reject)
    req.end()
  })
}

async function serve(s) {
  await s.commands.run('cd /tmp && echo hi-from-port > index.html && python3 -m http.server 8000', { background: true })
  await s.commands.run("for i in $(seq 100); do grep -qi ':1F40 00000000:0000 0A' /proc/net/tcp && exit 0; sleep 0.1; done; exit 1")
}

test('getHost: a port of the sandbox through the data plane, public by default', T, async () => {
  const s = await sbx()
  await serve(s)
  const host = s.getHost(8000)
  assert.equal(host, `8000-${s.sandboxId}.localhost:${new URL(process.env.E2B_SANDBOX_URL).port}`)
  const r = await getVia(host)
  assert.equal(r.status, 200)
  assert.equal(r.body, 'hi-from-port\n')
})

test('allowPublicTraffic: false: the traffic token opens the port', T, async () => {
  const s = track(await Sandbox.create({ metadata: { suite: RUN }, timeoutMs: SANDBOX_TIMEOUT,
    network: { allowPublicTraffic: false } }))
  try {
    await serve(s)
    assert.equal((await getVia(s.getHost(8000))).status, 401)
    assert.ok(s.trafficAccessToken, 'no traffic token')
    const r = await getVia(s.getHost(8000), { 'e2b-traffic-access-token': s.trafficAccessToken })
    assert.equal(r.status, 200)
    assert.equal(r.body, 'hi-from-port\n')
  } finally {
    await kill(s)
  }
})

test('pause, then Sandbox.connect: the process and the file are still there', T, async () => {
  const s = await sbx()
  await s.files.write('/home/user/kept.txt', 'kept across pause')
  const h = await s.commands.run('cat', { background: true, stdin: true })
  await h.disconnect()
  assert.equal(await s.pause(), true)
  const paused = await Sandbox.list({ query: { metadata: { suite: RUN, role: 'shared' }, state: ['paused'] } }).nextItems()
  assert.ok(paused.some((i) => i.sandboxId === s.sandboxId && i.state === 'paused'), JSON.stringify(paused))
  const again = await Sandbox.connect(s.sandboxId, { timeoutMs: SANDBOX_TIMEOUT })
  assert.equal(again.sandboxId, s.sandboxId)
  assert.equal(await again.isRunning(), true)
  assert.equal(await again.files.read('/home/user/kept.txt'), 'kept across pause')
  let out = ''
  const h2 = await again.commands.connect(h.pid, { onStdout: (d) => (out += d) })
  try {
    await again.commands.sendStdin(h.pid, 'after resume\n')
    await waitFor('the resumed cat to echo', () => out.includes('after resume\n'))
  } finally {
    assert.equal(await h2.kill(), true)
  }
  shared = Promise.resolve(again)
})

test('kill twice: true, then false for the same sandbox', T, async () => {
  const s = await sbx()
  await kill(s)
  assert.equal(await Sandbox.kill(s.sandboxId), false)
  assert.equal(await s.kill(), false)
  const left = await Sandbox.list({ query: { metadata: { suite: RUN } } }).nextItems()
  assert.ok(!left.some((i) => i.sandboxId === s.sandboxId), `${s.sandboxId} still listed after kill`)
})
