// reporter.mjs -- a node:test reporter for tests/e2e/test_e2b_sdk.py: one JSON line per
// finished top-level test {name, file, ok, ms, error}, so pytest reports each SDK test as its own.
function describe(err) {
  if (!err) return ''
  // node:test wraps the test's error (ERR_TEST_FAILURE) with the real one as its cause.
  const e = err.cause ?? err
  const parts = [e?.stack ?? String(e)]
  for (let c = e?.cause, depth = 0; c && depth < 4; c = c.cause, depth++) parts.push(`caused by: ${c?.stack ?? c}`)
  if (e?.rawMessage && e.rawMessage !== e.message) parts.push(`raw: ${e.rawMessage}`)
  return parts.join('\n')
}

export default async function* reporter(source) {
  for await (const ev of source) {
    if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue
    const d = ev.data
    if (d.nesting !== 0 || d.details?.type === 'suite') continue
    yield JSON.stringify({
      name: d.name,
      file: d.file,
      ok: ev.type === 'test:pass' && !d.skip,
      skip: Boolean(d.skip),
      ms: d.details?.duration_ms,
      error: ev.type === 'test:fail' ? describe(d.details?.error) : '',
    }) + '\n'
  }
}
