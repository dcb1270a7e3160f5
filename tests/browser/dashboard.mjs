// SPDX-License-Identifier: MIT
// The dashboard at / in headless Chromium, against the pulsed at PULSE_URL
// (run by 10_dashboard.py). Screenshots go to PULSE_SCREENSHOT_DIR.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  URL_, Skip, check, createTopic, eq, fetchRecords, highWatermarks, http, openPage, publish, run, text, uniq,
  waitText,
} from './lib.mjs';

const PAGE = URL_ + '/';

function noProblems(page, what) {
  check(page.problems.length === 0, `${what}: ${page.problems.join('; ')}`);
}

async function topicRow(page, name) {
  return page.locator(`#topics-body tr[data-topic="${name}"]`);
}

await run({
  // First, while the server holds only what it makes here.
  async test_screenshots_and_phone_width(ctx) {
    const dir = process.env.PULSE_SCREENSHOT_DIR;
    if (!dir) throw new Skip('PULSE_SCREENSHOT_DIR is not set');
    mkdirSync(dir, { recursive: true });
    const t = 'orders';
    await createTopic(t, 3);
    await createTopic('audit-log', 1);
    for (let i = 0; i < 6; i++)
      await publish(t, [{ key: `user-${i}`, value: { sku: `a${i}`, qty: i + 1 } }]);
    await http('PUT', `/v1/consumers/billing/cursors/${t}/0`, { offset: 0 });
    await http('PUT', `/v1/consumers/billing/cursors/${t}/1`, { offset: 1 });
    const page = await openPage(ctx, null, { viewport: { width: 1280, height: 900 } });
    // A minute of real traffic and real /metrics samples, in compressed
    // time: the page's clock moves 2 s (one metrics poll) per step.
    await page.clock.install();
    await page.goto(PAGE);
    await page.waitForFunction(() => state.metrics.last !== null);
    for (let step = 0; step < 30; step++) {
      const n = 1 + Math.round(4 + 3 * Math.sin(step / 3));
      await publish(t, Array.from({ length: n }, (_, i) => ({ key: `user-${i}`, value: { step } })));
      await fetchRecords(t, step % 3);
      const len = await page.evaluate(() => state.metrics.series.pubRate.length);
      await page.clock.runFor(2000);
      await page.waitForFunction((l) => state.metrics.series.pubRate.length > l, len);
    }
    await page.locator('#consumers-body tr[data-consumer="billing"]').first().waitFor();
    // With a pulsed that streams, the tail shows the topic from its start.
    const ac = new AbortController();
    const probe = await fetch(`${URL_}/v1/topics/${t}/events`, { headers: { Accept: 'text/event-stream' }, signal: ac.signal });
    ac.abort();
    if (probe.ok) {
      await page.selectOption('#tail-topic', t);
      await page.selectOption('#tail-partition', '');
      await page.selectOption('#tail-from', 'earliest');
      await page.click('#tail-start');
      await page.waitForFunction(() => document.querySelectorAll('#tail-list li[data-key]').length >= 6);
    }
    await page.screenshot({ path: join(dir, 'dashboard-laptop.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.evaluate(() => drawAll());
    // On a phone the page fits its width (wide tables scroll inside).
    const [scrollW, viewW] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    check(scrollW <= viewW, `no sideways scrolling at 390 px: page is ${scrollW} px wide`);
    await page.screenshot({ path: join(dir, 'dashboard-phone.png'), fullPage: true });
  },

  async test_dashboard_loads_without_console_errors(ctx) {
    const page = await openPage(ctx, PAGE);
    await waitText(page, '#conn-status', /^Connected to http:\/\/127\.0\.0\.1:\d+: pulsed /);
    // Every section has drawn what the server said, and the metrics poll
    // has run twice (the charts need two samples).
    await page.waitForFunction(() => document.querySelectorAll('#topics-body tr').length > 0);
    await page.waitForFunction(() => document.querySelectorAll('#consumers-body tr').length > 0);
    await waitText(page, '#pub-lat-now', /mean/);
    await page.waitForFunction(() => state.metrics.series.pubRate.length >= 1);
    noProblems(page, 'problems while loading');
    eq(await page.title(), 'Pulse dashboard', 'title');
  },

  async test_topic_created_over_http_appears(ctx) {
    const page = await openPage(ctx, PAGE);
    const name = uniq('outside');
    await createTopic(name, 3);
    await publish(name, [{ value: 'a', partition: 2 }, { value: 'b', partition: 2 }]);
    // No reload: the page's own poll brings it.
    const rows = page.locator(`#topics-body tr[data-topic="${name}"]`);
    await rows.first().waitFor();
    await page.waitForFunction((n) => {
      const r = document.querySelector(`#topics-body tr[data-topic="${n}"][data-partition="2"]`);
      return r && r.children[2].textContent === '2';
    }, name);
    eq(await rows.count(), 3, 'one row per partition');
    const cells = await page.locator(`#topics-body tr[data-topic="${name}"][data-partition="2"] td`).allTextContents();
    eq(cells.slice(0, 3), ['2', '0', '2'], 'partition, log start, high watermark');
    check(/B$/.test(cells[3]) && cells[3] !== '0 B', `size shown in bytes: ${cells[3]}`);
    eq(cells[4], '1', 'segments');
    noProblems(page, 'problems');
  },

  async test_create_and_delete_a_topic_with_the_keyboard(ctx) {
    const page = await openPage(ctx, PAGE);
    const name = uniq('made-in-page');
    await page.locator('#create-name').focus();
    await page.keyboard.type(name);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('2');
    await page.keyboard.press('Enter');
    await waitText(page, '#topics-msg', /Created topic/);
    await (await topicRow(page, name)).first().waitFor();
    eq((await highWatermarks(name)).length, 2, 'topic made over HTTP with 2 partitions');

    // Delete asks first; Escape cancels and nothing is deleted.
    const del = page.locator(`button[data-delete="${name}"]`);
    await del.focus();
    await page.keyboard.press('Enter');
    await page.locator('#confirm[open]').waitFor();
    check((await text(page, '#confirm-text')).includes(name), 'the confirmation names the topic');
    eq(await page.evaluate(() => document.activeElement.id), 'confirm-cancel', 'focus starts on Cancel');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.getElementById('confirm').open);
    eq((await http('GET', '/v1/topics/' + name)).status, 200, 'still there after Cancel');

    await del.focus();
    await page.keyboard.press('Enter');
    await page.locator('#confirm-ok').focus();
    await page.keyboard.press('Enter');
    await waitText(page, '#topics-msg', /Deleted topic/);
    await (await topicRow(page, name)).first().waitFor({ state: 'detached' });
    eq((await http('GET', '/v1/topics/' + name)).status, 404, 'gone after confirming');
    noProblems(page, 'problems');
  },

  async test_publish_form_stores_a_record(ctx) {
    const name = uniq('form');
    await createTopic(name, 1);
    const page = await openPage(ctx, PAGE);
    await page.waitForFunction((n) => [...document.querySelectorAll('#pub-topic option')].some((o) => o.value === n), name);
    await page.selectOption('#pub-topic', name);
    await page.fill('#pub-key', 'order-7');
    await page.fill('#pub-value', '{"sku": "a1", "qty": 2}');
    await page.click('#publish-form button[type=submit]');
    eq(await waitText(page, '#publish-msg', /Stored|Cannot/), `Stored in "${name}", partition 0, at offset 0.`, 'answer');
    const recs = await fetchRecords(name, 0);
    eq(recs.map((r) => [r.key, r.value]), [['order-7', '{"sku":"a1","qty":2}']], 'the record as stored');

    // A value that is not JSON is refused in words, before anything is sent.
    await page.fill('#pub-value', '{"sku": ');
    await page.click('#publish-form button[type=submit]');
    await waitText(page, '#publish-msg', /not valid JSON/);
    eq(await highWatermarks(name), [1], 'nothing more stored');
    noProblems(page, 'problems');
  },

  async test_api_errors_are_shown_in_words(ctx) {
    const page = await openPage(ctx, PAGE);
    const name = uniq('dup');
    await createTopic(name);
    await page.fill('#create-name', name);
    await page.click('#create-form button[type=submit]');
    const msg = await waitText(page, '#topics-msg', /Cannot create/);
    check(msg.includes(`topic "${name}" already exists`) && msg.includes('HTTP 409 topic_exists'), `409 in words: ${msg}`);
    check(await page.locator('#topics-msg.error').count() === 1, 'shown as an error');
    await page.fill('#create-name', 'no spaces allowed');
    await page.click('#create-form button[type=submit]');
    const bad = await waitText(page, '#topics-msg', /invalid_name/);
    check(/HTTP 400 invalid_name/.test(bad), `400 in words: ${bad}`);
    // A server that is not there: said in words too.
    await page.fill('#server-url', 'http://127.0.0.1:9');
    await page.click('#conn-form button[type=submit]');
    await waitText(page, '#conn-status', /Cannot reach http:\/\/127\.0\.0\.1:9/);
    // Nothing of the previous server stays on show as if it were this one's.
    eq(await page.locator('#topics-body tr[data-topic]').count(), 0, 'topics of the old server');
    eq(await page.locator('#pub-topic option').count(), 0, 'topics to publish to');
  },

  async test_consumers_show_cursors_and_lag(ctx) {
    const name = uniq('lagging');
    const consumer = uniq('billing');
    await createTopic(name, 2);
    await publish(name, [1, 2, 3].map((v) => ({ value: String(v), partition: 1 })));
    const r = await http('PUT', `/v1/consumers/${consumer}/cursors/${name}/1`, { offset: 1 });
    eq(r.status, 200, 'commit');
    const page = await openPage(ctx, PAGE);
    const row = page.locator(`#consumers-body tr[data-consumer="${consumer}"][data-topic="${name}"]`);
    await row.waitFor();
    eq((await row.locator('td').allTextContents()).slice(1), [name, '1', '1', '3', '2'],
      'topic, partition, cursor, high watermark, lag');
    noProblems(page, 'problems');
  },

  async test_groups_show_members_owners_and_lag(ctx) {
    const name = uniq('grouped');
    const group = uniq('shipping');
    await createTopic(name, 2);
    await publish(name, [1, 2, 3].map((v) => ({ value: String(v), partition: 0 })));
    const j = await http('POST', `/v1/groups/${group}/members`, { topics: [name], lease_ms: 60000 });
    eq(j.status, 201, 'join');
    const member = j.json.member_id;
    const c = await http('POST', `/v1/groups/${group}/members/${member}/commit`,
      { generation: j.json.generation, offsets: [{ topic: name, partition: 0, offset: 1 }] });
    eq(c.status, 200, 'commit');
    const page = await openPage(ctx, PAGE);
    const row = page.locator(`#groups-body tr[data-group="${group}"][data-topic="${name}"][data-partition="0"]`);
    await row.waitFor();
    eq((await row.locator('td').allTextContents()).slice(0, 9),
      [group, String(j.json.generation), '1', name, '0', member, '1', '3', '2'],
      'group, generation, members, topic, partition, owner, committed, high watermark, lag');
    noProblems(page, 'problems');
  },

  async test_charts_follow_metrics(ctx) {
    const name = uniq('rates');
    await createTopic(name);
    const page = await openPage(ctx, PAGE);
    // The parser reads labels with escaped quotes and skips comments.
    const rows = await page.evaluate(() => parseMetrics(
      '# HELP x y\nx_total{a="q\\"uote",b="2"} 5\n\nplain 1.5e3\n'));
    eq(rows, [{ name: 'x_total', labels: { a: 'q"uote', b: '2' }, value: 5 },
      { name: 'plain', labels: {}, value: 1500 }], 'parsed metrics');
    // After one sample, publish: a later sample shows the difference.
    await page.waitForFunction(() => state.metrics.last !== null);
    await publish(name, [{ value: 'x' }, { value: 'y' }]);
    await page.waitForFunction(() => state.metrics.series.pubRate.some((p) => p.v > 0));
    await page.waitForFunction(() => state.metrics.series.pubLat.some((p) => p.v > 0));
    check(!/^-/.test(await text(page, '#pub-rate-now')), 'rate shown');
    noProblems(page, 'problems');
  },

  async test_token_kept_in_session_storage_and_sent_as_bearer(ctx) {
    const page = await openPage(ctx, PAGE);
    const seen = [];
    page.on('request', (r) => {
      if (r.url().includes('/v1/topics')) seen.push(r.headers().authorization || null);
    });
    await page.fill('#token', 'tok-123');
    await page.click('#conn-form button[type=submit]');
    await page.waitForFunction(() => /Connected/.test(document.getElementById('conn-status').textContent));
    check(seen.includes('Bearer tok-123'), `Authorization sent: ${JSON.stringify(seen)}`);
    eq(await page.evaluate(() => [sessionStorage.getItem('pulse.token'), JSON.stringify(localStorage)]),
      ['tok-123', '{}'], 'token in sessionStorage only');
    await page.reload();
    eq(await page.inputValue('#token'), 'tok-123', 'token kept across a reload');
    const other = await openPage(ctx, PAGE);
    eq(await other.inputValue('#token'), '', 'a new session starts without it');
  },

  async test_live_tail_explains_a_server_without_streams(ctx) {
    // Whatever this pulsed supports, answer the stream as one without
    // Server-Sent Events does (406), and the page must say so in words.
    const name = uniq('no-sse');
    await createTopic(name);
    const page = await openPage(ctx, PAGE);
    await page.route(/\/records(\?.*)?$|\/events(\?.*)?$/, (route) => {
      if (route.request().method() !== 'GET') return route.continue();
      return route.fulfill({ status: 406, contentType: 'application/json',
        body: '{"error":{"code":"not_acceptable","message":"this resource is only available as application/json"}}' });
    });
    await page.waitForFunction((n) => [...document.querySelectorAll('#tail-topic option')].some((o) => o.value === n), name);
    await page.selectOption('#tail-topic', name);
    await page.selectOption('#tail-partition', '0');
    await page.click('#tail-start');
    const msg = await waitText(page, '#tail-status.error', /does not offer live tails/);
    check(msg.includes('406'), `names the status: ${msg}`);
    eq(await text(page, '#tail-start'), 'Start', 'the tail is stopped');
  },
});
