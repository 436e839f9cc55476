// terminal.mjs -- drives the SPACE page (GET /ui/) in Debian's chromium, as a user would:
// logs in (a wrong key first: the 401 message must show), creates a sandbox from a template
// (or uses --sandbox ID), opens its terminal and runs a command, takes a screenshot, uploads a
// file through the files panel and finds it listed (and in the terminal), downloads it back,
// starts a web server in the terminal and opens it from the ports panel (a token, then the
// cookie, in a new tab), deletes the sandbox it created and logs out.
//
//   SPACE_API_KEY=KEY node terminal.mjs --url http://127.0.0.1:7070 --artifacts DIR
//       [--sandbox sb-...] [--template base] [--timeout-s 300] [--skip terminal,files,ports,delete]
//
// Prints one `ok - <step>` line per step and `terminal.mjs: N passed, 0 failed` at the end;
// exits 1 at the first failure (`not ok - <step>: <why>`), with a screenshot of the page then
// (failure.png in the artifacts dir). The key comes from the environment so that it is not
// on a command line. chromium: $CHROMIUM, else /usr/bin/chromium (scripts/packages.txt).
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' },
    artifacts: { type: 'string', default: '.' },
    sandbox: { type: 'string' },
    template: { type: 'string', default: 'base' },
    'timeout-s': { type: 'string', default: '300' },
    skip: { type: 'string', default: '' },
  },
});
const key = process.env.SPACE_API_KEY;
if (!opt.url || !key) {
  console.error('usage: SPACE_API_KEY=KEY node terminal.mjs --url http://127.0.0.1:PORT --artifacts DIR ' +
    '[--sandbox ID] [--template NAME] [--timeout-s N] [--skip terminal,files,ports,delete]');
  process.exit(2);
}
const LONG = Number(opt['timeout-s']) * 1000; // creating and deleting a VM (TCG, loaded machine)
const SHORT = 60000;                          // anything else
const skip = new Set(opt.skip.split(',').filter(Boolean));
mkdirSync(opt.artifacts, { recursive: true });

let passed = 0;
const pageErrors = [];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // chromium's own sandbox cannot run as root
  args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
const page = await context.newPage();
page.setDefaultTimeout(SHORT);
page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
// Console errors fail the step (a CSP violation, say), except the browser's line for each
// answer that was not 2xx: the page shows those itself (a wrong key is one of the steps).
page.on('console', (m) => {
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(`console error: ${m.text()}`);
});
page.on('dialog', (d) => d.accept()); // the delete confirmation

// Session tokens travel in WebSocket URLs, which chromium's messages quote.
const redact = (text) => String(text).replace(/token=[^&\s'"]+/g, 'token=REDACTED');

async function step(name, fn) {
  try {
    await fn();
    if (pageErrors.length) throw new Error(pageErrors.join('; '));
  } catch (e) {
    console.log(redact(`not ok - ${name}: ${(e && e.message ? e.message : String(e)).split('\n')[0]}`));
    console.log(redact(e && e.stack ? e.stack : ''));
    await page.screenshot({ path: join(opt.artifacts, 'failure.png'), fullPage: true }).catch(() => {});
    console.log(`status line: ${await page.textContent('#status').catch(() => '?')}`);
    if (createdId) { // do not leave a VM behind
      await fetch(new URL(`/v1/sandboxes/${createdId}`, opt.url), {
        method: 'DELETE', headers: { Authorization: `Bearer ${key}` },
      }).catch(() => {});
    }
    console.log(`terminal.mjs: ${passed} passed, 1 failed`);
    await browser.close();
    process.exit(1);
  }
  passed++;
  console.log(`ok - ${name}`);
}

// What the terminal shows, one string per line (xterm's buffer, exposed as window.__term).
const termLines = () => page.evaluate(() => {
  const buf = window.__term.buffer.active;
  const out = [];
  for (let i = 0; i < buf.length; i++) out.push(buf.getLine(i).translateToString(true));
  return out;
});

async function waitForLine(pred, what, timeout = SHORT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const lines = await termLines();
    const hit = lines.find(pred);
    if (hit !== undefined) return hit;
    if (Date.now() > deadline) {
      throw new Error(`terminal never showed ${what}; it shows:\n${lines.filter((l) => l).join('\n')}`);
    }
    await page.waitForTimeout(200);
  }
}

// Types a command and waits for an output line (not the echoed command line itself).
async function run(cmd, expect) {
  await page.click('#terminal');
  await page.keyboard.type(cmd);
  await page.keyboard.press('Enter');
  return waitForLine((l) => l.includes(expect) && !l.includes(cmd), `an output line with ${expect}`);
}

const row = (id) => page.locator(`[data-testid="sandbox-row"][data-id="${id}"]`);
let sbId = opt.sandbox;
let createdId = null; // the sandbox this run created (deleted by its last step, or on a failure)

await step('page loads with the login form', async () => {
  const resp = await page.goto(new URL('/ui/', opt.url).toString());
  if (resp.status() !== 200) throw new Error(`GET /ui/: ${resp.status()}`);
  await page.waitForSelector('[data-testid="api-key"]', { state: 'visible' });
});

await step('a wrong key shows the 401 message', async () => {
  await page.fill('[data-testid="api-key"]', 'not-the-key');
  await page.click('[data-testid="login-submit"]');
  await page.waitForFunction(() => /Wrong API key: invalid API key/.test(
    document.querySelector('[data-testid="login-error"]').textContent));
  if (await page.isVisible('#app')) throw new Error('the app opened with a wrong key');
});

await step('the right key logs in and lists sandboxes', async () => {
  await page.fill('[data-testid="api-key"]', key);
  await page.click('[data-testid="login-submit"]');
  await page.waitForSelector('#app', { state: 'visible' });
  await page.waitForSelector('[data-testid="sandboxes"]');
  const stored = await page.evaluate(() => sessionStorage.getItem('space.apiKey'));
  if (stored !== key) throw new Error('the key is not in sessionStorage');
});

if (!sbId) {
  await step(`create a sandbox from ${opt.template}`, async () => {
    const before = new Set(await page.locator('[data-testid="sandbox-row"]').evaluateAll(
      (rows) => rows.map((r) => r.dataset.id)));
    await page.fill('[data-testid="template"]', opt.template);
    await page.click('[data-testid="create"]');
    const rows = page.locator('[data-testid="sandbox-row"]');
    const deadline = Date.now() + SHORT;
    while (!sbId) {
      for (const id of await rows.evaluateAll((rows) => rows.map((r) => r.dataset.id))) {
        if (!before.has(id)) sbId = id;
      }
      const failed = await page.$eval('#status', (el) => (el.classList.contains('error') ? el.textContent : ''));
      if (!sbId && failed) throw new Error(`create failed: ${failed}`);
      if (!sbId && Date.now() > deadline) throw new Error('no new sandbox row appeared');
      if (!sbId) await page.waitForTimeout(200);
    }
    createdId = sbId;
    console.log(`# sandbox ${sbId}`);
    await row(sbId).and(page.locator('[data-state="running"]')).waitFor({ timeout: LONG });
    await page.waitForFunction((id) => document.getElementById('status').textContent.includes(`${id} is running`),
      sbId, { timeout: LONG });
  });
} else {
  await step(`sandbox ${sbId} is listed and running`, async () => {
    await row(sbId).and(page.locator('[data-state="running"]')).waitFor();
  });
}

const terminal = !skip.has('terminal');
if (terminal) {
  await step('open a terminal: a shell prompt appears', async () => {
    await row(sbId).locator('[data-testid="open-terminal"]').click();
    await page.waitForSelector('[data-testid="terminal-panel"]', { state: 'visible' });
    await page.waitForFunction(() => window.__term !== undefined);
    await waitForLine((l) => l.trim() !== '', 'a prompt');
  });

  await step('a command typed in the terminal runs in the sandbox', async () => {
    const line = await run('echo hello-$((40+2))-browser', 'hello-42-browser');
    console.log(`# terminal line: ${line.trim()}`);
  });

  await step('the terminal is sized to its panel (fit addon) and the PTY knows it', async () => {
    const { rows, cols } = await page.evaluate(() => ({ rows: window.__term.rows, cols: window.__term.cols }));
    if (rows < 5 || cols < 20) throw new Error(`terminal is ${rows}x${cols}`);
    await run('echo size-$(stty size | tr " " x)-end', `size-${rows}x${cols}-end`);
  });
}

await step('screenshot', async () => {
  const path = join(opt.artifacts, 'ui-terminal.png');
  await page.screenshot({ path, fullPage: true });
  console.log(`# screenshot: ${path}`);
});

if (!skip.has('files')) {
  const name = `from-browser-${process.pid}.txt`;
  const content = `uploaded through the page ${Date.now()}\n`;

  await step('the files panel lists a directory and navigates', async () => {
    await row(sbId).locator('[data-testid="open-files"]').click();
    await page.waitForSelector('[data-testid="files-panel"]', { state: 'visible' });
    await page.locator('[data-testid="file-row"][data-name="tmp"]').waitFor();
    await page.locator('[data-testid="file-row"][data-name="tmp"] [data-testid="file-open"]').click();
    await page.waitForFunction(() => document.getElementById('files-path').value === '/tmp');
  });

  await step('upload a file: it is listed, and the sandbox has it', async () => {
    await page.setInputFiles('[data-testid="upload"]',
      { name, mimeType: 'text/plain', buffer: Buffer.from(content) });
    await page.locator(`[data-testid="file-row"][data-name="${name}"]`).waitFor();
    if (terminal) await run(`cat /tmp/${name} | tr a-z A-Z`, content.trim().toUpperCase());
  });

  await step('download it back', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.locator(`[data-testid="file-row"][data-name="${name}"] [data-testid="file-download"]`).click(),
    ]);
    const path = join(opt.artifacts, 'ui-downloaded.txt');
    await download.saveAs(path);
    const got = readFileSync(path, 'utf8');
    if (got !== content) throw new Error(`downloaded ${JSON.stringify(got)}, uploaded ${JSON.stringify(content)}`);
    if (download.suggestedFilename() !== name) throw new Error(`download named ${download.suggestedFilename()}`);
  });
}

if (terminal && !skip.has('ports')) {
  await step('the ports panel lists a server started in the terminal; Open shows its page', async () => {
    await run('cd /tmp && (setsid python3 -m http.server 8000 >/dev/null 2>&1 &) ; sleep 2; echo started-$((6*7))', 'started-42');
    await row(sbId).locator('[data-testid="open-ports"]').click();
    await page.waitForSelector('[data-testid="ports-panel"]', { state: 'visible' });
    const r = page.locator('[data-testid="port-row"][data-port="8000"]');
    await r.waitFor();
    const text = await r.textContent();
    if (!text.includes('yes') || !text.includes('private')) throw new Error(`port row: ${text}`);
    const [popup] = await Promise.all([page.waitForEvent('popup'), r.locator('[data-testid="port-open"]').click()]);
    await popup.waitForLoadState();
    const body = await popup.content();
    if (!body.includes('Directory listing for /')) throw new Error(`the port's page: ${body.slice(0, 300)}`);
    if (popup.url().includes('space_token')) throw new Error(`the token stayed in the URL: ${popup.url()}`);
    await popup.close();
  });
}

if (terminal) {
  await step('exit ends the shell: the page says so', async () => {
    await page.click('#terminal');
    await page.keyboard.type('exit 7');
    await page.keyboard.press('Enter');
    await waitForLine((l) => l.includes('[process exited with code 7]'), '[process exited with code 7]');
  });
}

if (!opt.sandbox && !skip.has('delete')) {
  await step('delete the sandbox', async () => {
    await row(sbId).locator('[data-testid="delete"]').click();
    await row(sbId).waitFor({ state: 'detached', timeout: LONG });
    await page.waitForFunction((id) => document.getElementById('status').textContent.includes(`${id} deleted`),
      sbId, { timeout: LONG });
    createdId = null;
  });
}

await step('log out: the key is forgotten', async () => {
  await page.click('[data-testid="logout"]');
  await page.waitForSelector('[data-testid="api-key"]', { state: 'visible' });
  const stored = await page.evaluate(() => sessionStorage.getItem('space.apiKey'));
  if (stored !== null) throw new Error('the key is still in sessionStorage');
  await page.reload();
  await page.waitForSelector('[data-testid="api-key"]', { state: 'visible' });
});

console.log(`terminal.mjs: ${passed} passed, 0 failed`);
await browser.close();
