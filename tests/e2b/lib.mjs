// lib.mjs -- what the SDK tests share: the daemon they talk to (the E2B_* variables
// tests/e2e/test_e2b_sdk.py sets), a registry of the sandboxes they created (each test kills its
// own; `killAll` is the last resort), and polling.
import assert from 'node:assert/strict'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY'])
  assert.ok(process.env[v], `${v} is not set (run through tests/e2e/test_e2b_sdk.py)`)

// One tag per run: Sandbox.list's metadata filter finds this run's sandboxes and no other's.
export const RUN = process.env.E2B_TEST_RUN || `run-${process.pid}-${Date.now()}`
// Generous: TCG boots on two shared cores.
export const TEST_TIMEOUT = Number(process.env.E2B_TEST_TIMEOUT_MS || 180_000)
export const SANDBOX_TIMEOUT = 600_000

const live = new Map()

export function track(sbx) {
  live.set(sbx.sandboxId, sbx)
  return sbx
}

// Kill a sandbox this suite created; a kill that throws or says "not found" fails the caller.
export async function kill(sbx) {
  const killed = await sbx.kill()
  live.delete(sbx.sandboxId)
  assert.equal(killed, true, `kill(${sbx.sandboxId}) says the sandbox was not found`)
  return killed
}

export function forget(id) {
  live.delete(id)
}

// Whatever is left (a test that failed half-way): killed, and each failure reported.
export async function killAll(Sandbox) {
  const errors = []
  for (const [id] of live) {
    try {
      await Sandbox.kill(id)
    } catch (e) {
      errors.push(`${id}: ${e}`)
    }
    live.delete(id)
  }
  if (errors.length) throw new Error(`cleanup failed: ${errors.join('; ')}`)
}

export async function waitFor(what, cond, ms = 30_000, every = 100) {
  const end = Date.now() + ms
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, every))
  }
}

export const dec = new TextDecoder()
export const enc = new TextEncoder()
