// SPDX-License-Identifier: MIT
// The dashboard's live tail over Server-Sent Events, against the pulsed at
// PULSE_URL (run by 20_live_tail.py, which skips it when that pulsed
// answers 406 to Accept: text/event-stream).
import {
  URL_, check, createTopic, eq, http, openPage, publish, run, text, uniq, waitText,
} from './lib.mjs';

const PAGE = URL_ + '/';

async function startTail(page, topic, partition, from = 'latest') {
  await page.waitForFunction((n) => [...document.querySelectorAll('#tail-topic option')].some((o) => o.value === n), topic);
  await page.selectOption('#tail-topic', topic);
  await page.selectOption('#tail-partition', partition);
  await page.selectOption('#tail-from', from);
  await page.click('#tail-start');
  await waitText(page, '#tail-status', /^Tailing /);
}

function item(page, key) {
  return page.locator(`#tail-list li[data-key="${key}"]`);
}

await run({
  async test_record_published_outside_shows_within_a_second(ctx) {
    const t = uniq('tail');
    await createTopic(t, 2);
    const page = await openPage(ctx, PAGE);
    await startTail(page, t, '1');
    const key = uniq('k');
    const t0 = Date.now();
    await publish(t, [{ key, value: { id: 1, nested: { ok: true } }, partition: 1 }]);
    await item(page, key).waitFor({ timeout: 1000 });
    const ms = Date.now() - t0;
    console.log(`  published-to-shown ${ms} ms`);
    check(ms <= 1000, `shown after ${ms} ms`);
    const li = item(page, key);
    eq(await li.getAttribute('data-partition'), '1', 'partition');
    eq(await li.getAttribute('data-offset'), '0', 'offset');
    eq(await li.locator('pre').textContent(), '{\n  "id": 1,\n  "nested": {\n    "ok": true\n  }\n}',
      'the JSON value, indented');
    check(page.problems.length === 0, page.problems.join('; '));
  },

  async test_whole_topic_tail_pause_and_filter(ctx) {
    const t = uniq('topic-tail');
    await createTopic(t, 3);
    const page = await openPage(ctx, PAGE);
    await startTail(page, t, '');
    await publish(t, [0, 1, 2].map((p) => ({ key: `p${p}`, value: `v${p}`, partition: p })));
    for (const p of [0, 1, 2]) await item(page, `p${p}`).waitFor();
    eq(await page.locator('#tail-list li[data-key]').count(), 3, 'one item per record');

    await page.click('#tail-pause');
    await publish(t, [{ key: 'held-1', value: 'x', partition: 0 }, { key: 'held-2', value: 'y', partition: 2 }]);
    await waitText(page, '#tail-status', /Paused: 2 new records held/);
    eq(await item(page, 'held-1').count(), 0, 'nothing shown while paused');
    await page.click('#tail-pause');
    await item(page, 'held-1').waitFor();
    await item(page, 'held-2').waitFor();

    await page.fill('#tail-filter', 'held');
    await page.waitForFunction(() => document.querySelectorAll('#tail-list li[data-key]').length === 2);
    eq(await page.locator('#tail-list li[data-key]').evaluateAll((ls) => ls.map((l) => l.dataset.key).sort()),
      ['held-1', 'held-2'], 'only matching keys');
    await publish(t, [{ key: 'other', value: 'z', partition: 1 }, { key: 'held-3', value: 'w', partition: 1 }]);
    await item(page, 'held-3').waitFor();
    eq(await item(page, 'other').count(), 0, 'a new record that does not match stays hidden');
    await page.fill('#tail-filter', '');
    await item(page, 'other').waitFor();
    check(page.problems.length === 0, page.problems.join('; '));
  },

  async test_tail_with_a_token_sends_it(ctx) {
    // EventSource cannot send headers: with a token the page reads the
    // stream through fetch(), and the token goes with it.
    const t = uniq('token-tail');
    await createTopic(t, 1);
    const page = await openPage(ctx, PAGE);
    const auth = [];
    page.on('request', (r) => {
      if (r.url().includes(`/v1/topics/${t}/partitions/0/records`)) auth.push(r.headers().authorization || null);
    });
    await page.fill('#token', 'tail-token');
    await page.click('#conn-form button[type=submit]');
    await waitText(page, '#conn-status', /^Connected/);
    await startTail(page, t, '0');
    await publish(t, [{ key: 'with-token', value: '{"a": [1, 2]}' }]);
    await item(page, 'with-token').waitFor();
    eq(await item(page, 'with-token').locator('pre').textContent(), '{\n  "a": [\n    1,\n    2\n  ]\n}', 'value');
    eq(auth, ['Bearer tail-token'], 'the stream request carried the token');
    await page.click('#tail-start');
    check(page.problems.length === 0, page.problems.join('; '));
  },

  async test_topic_deleted_while_tailed_ends_the_tail_in_words(ctx) {
    const t = uniq('doomed');
    await createTopic(t, 1);
    const page = await openPage(ctx, PAGE);
    await startTail(page, t, '0');
    eq((await http('DELETE', `/v1/topics/${t}`)).status, 204, 'delete over HTTP');
    const msg = await waitText(page, '#tail-status', /ended the stream/);
    eq(await page.locator('#tail-status.error').count(), 1, `shown as an error: ${msg}`);
    eq(await text(page, '#tail-start'), 'Start', 'the tail is stopped, not reconnecting');
  },

  async test_stop_and_start_from_the_log_start(ctx) {
    const t = uniq('replay');
    await createTopic(t, 1);
    await publish(t, [1, 2, 3].map((i) => ({ key: `old-${i}`, value: String(i) })));
    const page = await openPage(ctx, PAGE);
    await startTail(page, t, '0', 'earliest');
    for (const i of [1, 2, 3]) await item(page, `old-${i}`).waitFor();
    await page.click('#tail-start');
    eq(await text(page, '#tail-status'), 'Stopped.', 'stopped');
    await publish(t, [{ key: 'after-stop', value: 'x' }]);
    await publish(t, [{ key: 'sentinel', value: 'x' }]);
    await startTail(page, t, '0', 'latest');
    await publish(t, [{ key: 'after-restart', value: 'x' }]);
    await item(page, 'after-restart').waitFor();
    eq(await item(page, 'after-stop').count(), 0, 'a stopped tail shows nothing of the meantime');
    check(page.problems.length === 0, page.problems.join('; '));
  },
});
