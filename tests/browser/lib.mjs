// SPDX-License-Identifier: MIT
// Shared by the browser tests: Debian's Chromium driven headless through
// playwright-core (no browser download: executablePath), a tiny runner that
// prints one PASS/FAIL/SKIP line per test as the Python tests do, and an
// HTTP client for what a test does "outside the browser".
//
// The pulsed under test is started by the Python wrapper next to each .mjs
// file (tests/browser/*.py through tests/integration/pulsetest.py), which
// passes its address in PULSE_URL (and more in other PULSE_* variables).
// Exit codes follow automake: 0 pass, 1 fail, 77 every test skipped.
import { chromium } from 'playwright-core';

export const URL_ = process.env.PULSE_URL;
export const CHROMIUM = process.env.PULSE_CHROMIUM || '/usr/bin/chromium';
// A condition a test waits for; generous because CI runs under sanitizers
// on 2 shared cores. Tests never sleep a fixed time: they wait for a
// condition, and this only bounds how long a failing one takes to fail.
export const WAIT_MS = Number(process.env.PULSE_BROWSER_WAIT_MS || 15000);

export class Skip extends Error {}

export function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

export function eq(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: expected ${w}, got ${g}`);
}

let seq = 0;
export function uniq(prefix) {
  seq++;
  return `${prefix}-${process.pid}-${seq}`;
}

// ---- HTTP outside the browser ---------------------------------------------

export async function http(method, path, body, base = URL_, headers = {}) {
  const init = { method, headers: Object.assign({}, headers) };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(base + path, init);
  const text = await resp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  return { status: resp.status, headers: resp.headers, text, json };
}

export async function createTopic(name, partitions = 1, base = URL_) {
  const r = await http('POST', '/v1/topics', { name, partitions }, base);
  eq(r.status, 201, `create topic ${name}: ${r.text}`);
  return r.json;
}

export async function publish(topic, records, base = URL_) {
  const r = await http('POST', `/v1/topics/${encodeURIComponent(topic)}/records`, { records }, base);
  eq(r.status, 200, `publish to ${topic}: ${r.text}`);
  return r.json.offsets;
}

export async function highWatermarks(topic, base = URL_) {
  const r = await http('GET', `/v1/topics/${encodeURIComponent(topic)}`, undefined, base);
  eq(r.status, 200, `get topic ${topic}: ${r.text}`);
  return r.json.partition_stats.map((p) => p.high_watermark);
}

export async function fetchRecords(topic, partition, offset = 0, base = URL_) {
  const r = await http('GET', `/v1/topics/${encodeURIComponent(topic)}/partitions/${partition}/records?offset=${offset}`,
    undefined, base);
  eq(r.status, 200, `fetch ${topic}/${partition}: ${r.text}`);
  return r.json.records;
}

// ---- pages -----------------------------------------------------------------

// A fresh browser context (its own storage) and page. Every console error,
// uncaught exception and failed load is collected in page.problems, which
// a test checks (or ignores where it provokes errors on purpose).
export async function openPage(ctx, url, opts = {}) {
  const context = await ctx.browser.newContext({
    viewport: opts.viewport || { width: 1280, height: 800 },
    deviceScaleFactor: opts.scale || 1,
    isMobile: !!opts.mobile,
    hasTouch: !!opts.mobile,
  });
  ctx.contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => page.problems.push(`uncaught: ${e.message}`));
  page.on('requestfailed', (r) => {
    // A stream the page or test closes on purpose ends as "aborted".
    if (!/ERR_ABORTED/.test(r.failure()?.errorText || '')) page.problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  if (url) {
    await page.goto(url);
    await waitConnected(page);
  }
  return page;
}

export async function waitConnected(page) {
  await page.waitForFunction(() => /Connected to|Cannot|refused|not/.test(document.getElementById('conn-status').textContent));
}

export async function text(page, sel) {
  return (await page.locator(sel).first().textContent()) || '';
}

// Waits until the element's text matches re; returns the text.
export async function waitText(page, sel, re) {
  await page.waitForFunction(([s, src, flags]) => {
    const e = document.querySelector(s);
    return e && new RegExp(src, flags).test(e.textContent);
  }, [sel, re.source, re.flags]);
  return text(page, sel);
}

// ---- the runner ------------------------------------------------------------

export async function run(tests) {
  let failed = 0;
  let skipped = 0;
  let passed = 0;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  for (const [name, fn] of Object.entries(tests)) {
    const ctx = { browser, contexts: [] };
    const t0 = Date.now();
    try {
      await fn(ctx);
      passed++;
      console.log(`PASS ${name} (${((Date.now() - t0) / 1000).toFixed(2)}s)`);
    } catch (e) {
      if (e instanceof Skip) {
        skipped++;
        console.log(`SKIP ${name}: ${e.message}`);
      } else {
        failed++;
        console.log(`FAIL ${name} (${((Date.now() - t0) / 1000).toFixed(2)}s): ${e.stack || e}`);
      }
    } finally {
      for (const c of ctx.contexts) await c.close().catch(() => {});
    }
  }
  await browser.close();
  console.log(`browser tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exitCode = failed ? 1 : (passed === 0 && skipped > 0 ? 77 : 0);
}
