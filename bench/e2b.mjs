// e2b.mjs -- bench/e2b.py's SDK side: the unmodified e2b SDK (tests/e2b's packages, run by the
// Node.js pinned there). For every line "go" on stdin, one sample: Sandbox.create() -> the first
// stdout bytes of commands.run('echo x'), printed as one JSON line {created, first, done} in
// seconds from the start of Sandbox.create(); the sandbox is then killed (not timed).
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY name the daemon.
import { createInterface } from 'node:readline'

const { Sandbox } = await import(new URL('../tests/e2b/node_modules/e2b/dist/index.mjs', import.meta.url))
const TEMPLATE = process.env.E2B_BENCH_TEMPLATE || 'base'

async function sample() {
  const t0 = performance.now()
  const s = await Sandbox.create(TEMPLATE, { timeoutMs: 300_000 })
  const created = performance.now()
  let first = 0
  try {
    const r = await s.commands.run('echo x', {
      onStdout: () => {
        if (!first) first = performance.now()
      },
    })
    const done = performance.now()
    if (r.stdout !== 'x\n') throw new Error(`echo x printed ${JSON.stringify(r.stdout)}`)
    return { created: (created - t0) / 1e3, first: (first - t0) / 1e3, done: (done - t0) / 1e3 }
  } finally {
    if ((await s.kill()) !== true) throw new Error(`kill ${s.sandboxId}: not found`)
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() !== 'go') continue
  try {
    process.stdout.write(JSON.stringify(await sample()) + '\n')
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e?.stack ?? e) }) + '\n')
  }
}
