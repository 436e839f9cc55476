// ports.mjs -- a sandbox's port in Debian's chromium, as a user opens what `spacectl expose`
// printed: the URL with ?space_token= answers with a redirect to the clean URL and an HttpOnly
// cookie for that port's host alone; the page served from the guest shows; a reload (the cookie
// alone) shows it again; the same host without the cookie (a fresh context) is refused.
//
//   node ports.mjs --url 'http://8000-sb-....localhost:7071/page?space_token=...' --expect TEXT
//
// Prints `ok - <step>` lines and `ports.mjs: N passed, 0 failed`; exits 1 at the first failure.
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: opt } = parseArgs({ options: { url: { type: 'string' }, expect: { type: 'string' } } });
if (!opt.url || !opt.expect) {
  console.error('usage: node ports.mjs --url URL --expect TEXT');
  process.exit(2);
}
let passed = 0;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
});
function ok(step) {
  passed++;
  console.log(`ok - ${step}`);
}
async function fail(step, why) {
  console.log(`not ok - ${step}: ${why}`);
  await browser.close();
  process.exit(1);
}
try {
  const u = new URL(opt.url);
  const clean = new URL(opt.url);
  clean.searchParams.delete('space_token');
  const context = await browser.newContext();
  const page = await context.newPage();
  const resp = await page.goto(opt.url);
  if (page.url() !== clean.toString()) await fail('redirected to the clean URL', page.url());
  if (!resp || resp.status() !== 200) await fail('the page answers 200', resp && resp.status());
  ok('redirected to the clean URL, 200');
  if (!(await page.content()).includes(opt.expect)) await fail('the guest\'s page shows', await page.content());
  ok('the page served from the guest shows');
  const cookies = await context.cookies(u.origin);
  const c = cookies.find((x) => x.name === 'space_port_token');
  if (!c || !c.httpOnly || c.domain !== u.hostname || c.path !== '/') await fail('an HttpOnly host cookie', JSON.stringify(cookies));
  if (await page.evaluate(() => document.cookie.includes('space_port_token'))) await fail('scripts cannot read it', 'document.cookie has it');
  ok('an HttpOnly cookie for this host alone, out of scripts\' reach');
  const again = await page.reload();
  if (!again || again.status() !== 200 || !(await page.content()).includes(opt.expect)) await fail('a reload with the cookie alone', again && again.status());
  ok('a reload with the cookie alone');
  const other = await browser.newContext();
  const p2 = await other.newPage();
  const refused = await p2.goto(clean.toString());
  if (!refused || refused.status() !== 401) await fail('no cookie: 401', refused && refused.status());
  ok('without the cookie: 401');
} catch (e) {
  await fail('the browser', e.message);
}
await browser.close();
console.log(`ports.mjs: ${passed} passed, 0 failed`);
