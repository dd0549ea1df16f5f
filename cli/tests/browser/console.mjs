// Drives Shale's console in headless Chromium against a running `shale serve` with
// access control on, and S2's TypeScript SDK inside a page of another origin (CORS).
// Run by cli/tests/console.rs:
//   SHALE_HTTP=http://127.0.0.1:PORT SHALE_ROOT_TOKEN=... SCREENSHOTS=dir node console.mjs
// Prints one JSON line of what it measured; any failed check throws (exit code 1).
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.SHALE_HTTP;
const root = process.env.SHALE_ROOT_TOKEN;
const shots = process.env.SCREENSHOTS;
assert.ok(base && root && shots, 'SHALE_HTTP, SHALE_ROOT_TOKEN and SCREENSHOTS must be set');
mkdirSync(shots, { recursive: true });
const BASIN = 'console-demo';
const STREAM = 'orders';
const measured = {};

async function call(method, urlPath, { token = root, basin, json } = {}) {
  const headers = { authorization: `Bearer ${token}` };
  if (basin) headers['s2-basin'] = basin;
  if (json !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(base + urlPath, { method, headers, body: json === undefined ? undefined : JSON.stringify(json) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function append(stream, bodies) {
  const answer = await call('POST', `/v1/streams/${encodeURIComponent(stream)}/records`, {
    basin: BASIN, json: { records: bodies.map((body) => ({ body, headers: [['kind', 'order']] })) },
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

// ---------- the data the pages show ----------
// The basin is tiered into a table at the next pass, so the tables page has a table to show.
const created = await call('POST', '/v1/basins', { json: { basin: BASIN, config: { tables: { after_secs: 0, body_format: 'json' } } } });
assert.equal(created.status, 201, JSON.stringify(created.body));
for (const name of [STREAM, 'payments', 'audit/2026']) {
  assert.equal((await call('POST', '/v1/streams', { basin: BASIN, json: { stream: name } })).status, 201);
}
await append(STREAM, Array.from({ length: 12 }, (_, i) => JSON.stringify({ order: i, amount: 10 * i })));
const readOnly = await call('POST', '/v1/access-tokens', { json: {
  id: 'console-viewer',
  scope: { basins: { prefix: '' }, streams: { prefix: '' },
    op_groups: { account: { read: true }, basin: { read: true }, stream: { read: true } } },
} });
assert.equal(readOnly.status, 201, JSON.stringify(readOnly.body));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const failures = [];
async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.on('dialog', (dialog) => dialog.accept());
  return page;
}
const shot = (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

try {
  // ---------- a wrong token is refused ----------
  const page = await newPage();
  await page.goto(`${base}/console`);
  await page.locator('#token-dialog[open]').waitFor();
  await page.fill('#token-input', 'not-a-token');
  await page.click('#token-save');
  await page.locator('#token-dialog[open] #token-reason', { hasText: 'Refused' }).waitFor();
  assert.equal(await page.locator('#basins-rows').count(), 0, 'a wrong token saw the basins');
  await shot(page, 'token-refused');

  // ---------- the root token: basins, then a basin's streams ----------
  await page.fill('#token-input', root);
  await page.click('#token-save');
  await page.locator('#basins-rows a', { hasText: BASIN }).waitFor();
  await shot(page, 'basins');
  // With the keyboard: `/` searches, Tab reaches the basin's link, Enter opens it.
  await page.locator('body').click({ position: { x: 5, y: 200 } });
  await page.keyboard.press('/');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'basins-search');
  await page.keyboard.type('console');
  await page.locator('#basins-status', { hasText: '1 shown' }).waitFor();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), BASIN);
  await page.keyboard.press('Enter');
  await page.locator('#streams-rows a', { hasText: 'audit/2026' }).waitFor();
  await page.fill('#streams-search', 'pay');
  await page.locator('#streams-rows tr').filter({ hasText: 'payments' }).waitFor();
  await page.waitForFunction(() => document.querySelectorAll('#streams-rows tr').length === 1);
  await page.fill('#streams-search', '');
  await page.fill('#create-stream-name', 'made-in-console');
  await page.click('#create-stream button[type=submit]');
  await page.locator('#streams-rows a', { hasText: 'made-in-console' }).waitFor();
  assert.equal((await call('GET', '/v1/streams/made-in-console', { basin: BASIN })).status, 200, 'the created stream is not there');
  await shot(page, 'basin');
  await page.click('button[aria-label="Delete stream made-in-console"]');
  await page.locator('#streams-rows a', { hasText: 'made-in-console' }).waitFor({ state: 'detached' });
  assert.equal((await call('GET', '/v1/streams/made-in-console', { basin: BASIN })).status, 404, 'the deleted stream is still there');

  // ---------- a stream: records, live tail, append, consumers ----------
  await page.click(`#streams-rows a:text-is("${STREAM}")`);
  await page.locator('#tail-seq', { hasText: '12' }).waitFor();
  await page.click('#browse-load');
  await page.waitForFunction(() => document.querySelectorAll('#browse-rows tr').length === 12);
  await page.selectOption('#browse-format', 'hex');
  await page.locator('#browse-rows tr[data-seq="0"] pre.body', { hasText: '7b 22 6f 72' }).waitFor();
  await page.selectOption('#browse-format', 'json');

  await page.click('#live-toggle');
  await page.locator('#live-status', { hasText: 'following' }).waitFor();
  const liveBody = `live-${Date.now()}`;
  const acked = await append(STREAM, [liveBody]);
  const ackedAt = performance.now();
  await page.locator('#live-rows pre.body', { hasText: liveBody }).waitFor({ timeout: 1000 });
  measured.live_ms = Math.round(performance.now() - ackedAt);
  assert.equal(acked.start.seq_num, 12);

  await page.fill('#append-body', 'typed in the console');
  await page.fill('#append-headers', 'source: console');
  await page.click('#append-submit');
  await page.locator('#live-rows pre.body', { hasText: 'typed in the console' }).waitFor();
  const typed = await call('GET', `/v1/streams/${STREAM}/records?seq_num=13&count=1`, { basin: BASIN });
  assert.equal(typed.body.records[0].body, 'typed in the console');
  assert.deepEqual(typed.body.records[0].headers, [['source', 'console']]);

  // A consumer's position committed through the API; its lag shows, then grows on the chart.
  const committed = await call('PUT', `/v1/streams/${STREAM}/consumers/billing`, { basin: BASIN, json: { seq_num: 4 } });
  assert.equal(committed.status, 200, JSON.stringify(committed.body));
  await page.locator('#consumer-rows tr[data-consumer="billing"] .lag-records', { hasText: '10' }).waitFor();
  await append(STREAM, ['one more', 'and another']);
  await page.locator('#consumer-rows tr[data-consumer="billing"] .lag-records', { hasText: '12' }).waitFor();
  await page.locator('#lag-chart-legend', { hasText: 'billing: 12' }).waitFor();
  const points = await page.locator('#lag-chart polyline[data-series="billing"]').getAttribute('points');
  const heights = points.trim().split(' ').map((p) => Number(p.split(',')[1]));
  assert.ok(heights.length >= 2 && heights[heights.length - 1] < heights[0], `the lag line did not rise: ${points}`);
  // And committed from the console: the lag falls to 0.
  await page.fill('#commit-name', 'billing');
  await page.fill('#commit-seq', '16');
  await page.click('#commit-form button[type=submit]');
  await page.locator('#consumer-rows tr[data-consumer="billing"] .lag-records', { hasText: /^0$/ }).waitFor();
  await shot(page, 'stream');

  // Trim from the console: records before 2 go.
  await page.fill('#trim-at', '2');
  await page.click('#trim-submit');
  await page.locator('#notice.ok', { hasText: 'Trimmed before 2' }).waitFor();
  const first = await call('GET', `/v1/streams/${STREAM}/records?seq_num=0&count=1`, { basin: BASIN });
  assert.equal(first.body.records[0].seq_num, 2, JSON.stringify(first.body));

  // ---------- metrics, tables, cluster ----------
  await page.goto(`${base}/console#/metrics`);
  const load = setInterval(() => { append('payments', ['x'.repeat(1024)]).catch(() => {}); }, 100);
  try {
    await page.waitForFunction(() => {
      const legend = document.querySelector('#chart-records-legend b');
      return legend && Number(legend.textContent.replace(/,/g, '')) > 0;
    }, null, { timeout: 15000 });
    await page.locator('#chart-latency-legend', { hasText: 'ack p99' }).waitFor();
    // A few samples, so the screenshot shows lines rather than points.
    await page.waitForFunction(() => {
      const line = document.querySelector('#chart-records polyline');
      return line && line.getAttribute('points').trim().split(' ').length >= 4;
    }, null, { timeout: 20000 });
  } finally {
    clearInterval(load);
  }
  await shot(page, 'metrics');
  await page.goto(`${base}/console#/tables/${BASIN}`);
  await page.locator('#tables-duckdb', { hasText: 'iceberg_scan(' }).waitFor({ timeout: 60000 });
  await page.locator('#tables-status td', { hasText: STREAM }).waitFor();
  await shot(page, 'tables');
  await page.goto(`${base}/console#/cluster`);
  await page.locator('#cluster-facts', { hasText: 'all-in-one' }).waitFor();
  await page.locator('#cluster-facts', { hasText: 'ready' }).waitFor();
  await shot(page, 'cluster');

  // ---------- a read-only token sees no write control ----------
  const viewer = await newPage();
  await viewer.goto(`${base}/console`);
  await viewer.fill('#token-input', readOnly.body.access_token);
  await viewer.click('#token-save');
  await viewer.locator('#basins-rows a', { hasText: BASIN }).waitFor();
  assert.equal(await viewer.locator('#create-basin').count(), 0, 'a read-only token is offered basin creation');
  assert.equal(await viewer.locator('#basins-rows button').count(), 0, 'a read-only token is offered deletes');
  await viewer.goto(`${base}/console#/basins/${BASIN}/streams/${STREAM}`);
  await viewer.locator('#browse-load').waitFor();
  // Committing a consumer's position needs only `read` (as a Kafka consumer commits its
  // offsets), so that form stays.
  assert.equal(await viewer.locator('#commit-form').count(), 1, 'a reader cannot commit its position');
  for (const control of ['#append-form', '#trim-submit', '#stream-config-save', '#create-stream']) {
    assert.equal(await viewer.locator(control).count(), 0, `a read-only token is offered ${control}`);
  }
  assert.equal(await viewer.locator('#stream-config').getAttribute('readonly'), '', 'the config is editable');
  await viewer.click('#browse-load');
  await viewer.waitForFunction(() => document.querySelectorAll('#browse-rows tr').length > 0);
  await shot(viewer, 'read-only');
  // What the page hides, the server refuses too.
  const refused = await call('POST', `/v1/streams/${STREAM}/records`, { token: readOnly.body.access_token, basin: BASIN, json: { records: [{ body: 'no' }] } });
  assert.equal(refused.status, 403);

  // ---------- S2's TypeScript SDK in a page of another origin ----------
  const bundle = await esbuild.build({
    entryPoints: [path.join(here, 'sdk-page.js')], bundle: true, format: 'iife', platform: 'browser', write: false,
    // The SDK imports Node's http2 only where it runs under Node; a browser takes fetch.
    external: ['node:*'],
  });
  const site = http.createServer((request, response) => {
    if (request.url === '/sdk.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' });
      response.end(bundle.outputFiles[0].contents);
    } else {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<!doctype html><title>S2 SDK</title><script src="/sdk.js"></script>');
    }
  });
  await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
  try {
    const sdkPage = await newPage();
    await sdkPage.goto(`http://127.0.0.1:${site.address().port}/`);
    const result = await sdkPage.evaluate(({ endpoint, token, basin }) =>
      window.sdkRoundTrip({ endpoint, token, basin, stream: 'from-the-browser' }), { endpoint: base, token: root, basin: BASIN });
    assert.equal(result.origin.startsWith(`http://127.0.0.1:${site.address().port}`), true);
    assert.deepEqual(result.bodies, ['appended by the SDK in a browser', 'and a second record']);
    assert.equal(result.start, 0);
    assert.deepEqual(result.ensured, ['updated', 'noop'], 'ensure answers what it did, its header readable across origins');
    assert.equal(result.caughtUp, 2, `a session at the tail is caught up at once (${result.caughtUpMs} ms)`);
    measured.sdk_caught_up_ms = result.caughtUpMs;
    measured.sdk_records = result.bodies.length;
  } finally {
    site.close();
  }
  assert.deepEqual(failures, [], 'the pages raised errors');
} finally {
  await browser.close();
}
console.log(JSON.stringify(measured));
