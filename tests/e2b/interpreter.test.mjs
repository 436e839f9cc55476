// interpreter.test.mjs -- the unmodified code-interpreter SDK (@e2b/code-interpreter@2.8.0):
// its default template (code-interpreter-v1), state kept between runCode calls, and a Python
// error with its name and traceback.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'

import { Sandbox } from '@e2b/code-interpreter'

import { RUN, SANDBOX_TIMEOUT, TEST_TIMEOUT, kill, killAll, track } from './lib.mjs'

after(() => killAll(Sandbox))

test('code interpreter: runCode keeps state, reports ZeroDivisionError', { timeout: TEST_TIMEOUT }, async () => {
  const s = track(await Sandbox.create({ metadata: { suite: RUN, role: 'interpreter' }, timeoutMs: SANDBOX_TIMEOUT }))
  try {
    const a = await s.runCode('x = 41')
    assert.equal(a.error, undefined, JSON.stringify(a.error))
    const b = await s.runCode('x + 1')
    assert.equal(b.error, undefined, JSON.stringify(b.error))
    assert.equal(b.text, '42')
    const out = []
    const c = await s.runCode('print("to stdout")', { onStdout: (m) => out.push(m.line) })
    // Jupyter coalesces a print's writes into one message; the content is what counts here.
    assert.equal(c.logs.stdout.join(''), 'to stdout\n')
    assert.equal(out.join(''), 'to stdout\n')
    const d = await s.runCode('1/0')
    assert.ok(d.error, 'runCode("1/0") returned no error')
    assert.equal(d.error.name, 'ZeroDivisionError')
    assert.match(d.error.value, /division by zero/)
    assert.match(d.error.traceback, /ZeroDivisionError/)
  } finally {
    await kill(s)
  }
})
