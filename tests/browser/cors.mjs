// SPDX-License-Identifier: MIT
// The dashboard served by one pulsed (PULSE_PAGE, an origin the API server
// allows; PULSE_PAGE_BAD, the same server under another name, so another
// origin it does not allow) watching another pulsed (PULSE_URL, started
// with server.cors-origins). Run by 30_cors.py, which skips it when the
// pulsed does not know that setting.
import {
  URL_, Skip, check, createTopic, eq, fetchRecords, highWatermarks, http, openPage, run, uniq, waitText,
} from './lib.mjs';

const GOOD = process.env.PULSE_PAGE;
const BAD = process.env.PULSE_PAGE_BAD;

async function pointAt(page, server) {
  await page.fill('#server-url', server);
  await page.click('#conn-form button[type=submit]');
}

await run({
  async test_allowed_origin_reads_and_publishes(ctx) {
    const t = uniq('cross');
    await createTopic(t, 1);
    const page = await openPage(ctx, GOOD);
    await pointAt(page, URL_);
    await waitText(page, '#conn-status', new RegExp('^Connected to ' + URL_.replace(/[.]/g, '\\.')));
    await page.locator(`#topics-body tr[data-topic="${t}"]`).first().waitFor();
    await page.selectOption('#pub-topic', t);
    await page.fill('#pub-key', 'from-the-page');
    await page.fill('#pub-value', '{"cross": "origin"}');
    await page.click('#publish-form button[type=submit]');
    await waitText(page, '#publish-msg', new RegExp(`^Stored in "${t}", partition 0, at offset 0\\.$`));
    const recs = await fetchRecords(t, 0);
    eq(recs.map((r) => [r.key, r.value]), [['from-the-page', '{"cross":"origin"}']], 'stored on the other server');
    check(page.problems.length === 0, page.problems.join('; '));
  },

  async test_allowed_origin_with_a_bearer_token(ctx) {
    // Authorization is not a header a browser may send cross-origin
    // unless the preflight allows it.
    const pre = await fetch(`${URL_}/v1/topics`, { method: 'OPTIONS', headers: {
      Origin: new URL(GOOD).origin, 'Access-Control-Request-Method': 'GET',
      'Access-Control-Request-Headers': 'authorization' } });
    const allowed = (pre.headers.get('access-control-allow-headers') || '').toLowerCase();
    if (!allowed.split(/\s*,\s*/).includes('authorization'))
      throw new Skip(`the preflight allows only "${allowed}": a token cannot be sent cross-origin until ` +
        'Authorization is among Access-Control-Allow-Headers');
    const t = uniq('cross-token');
    await createTopic(t, 1);
    const page = await openPage(ctx, GOOD);
    const auth = [];
    page.on('request', (r) => {
      if (r.url().startsWith(URL_ + '/v1/topics') && r.method() === 'GET') auth.push(r.headers().authorization || null);
    });
    await page.fill('#token', 'cross-token');
    await pointAt(page, URL_);
    await page.locator(`#topics-body tr[data-topic="${t}"]`).first().waitFor();
    check(auth.includes('Bearer cross-token'), `token sent: ${JSON.stringify(auth)}`);
    check(page.problems.length === 0, page.problems.join('; '));
  },

  async test_disallowed_origin_is_refused(ctx) {
    const t = uniq('refused');
    await createTopic(t, 1);
    const page = await openPage(ctx, BAD);
    const origin = new URL(BAD).origin;
    await pointAt(page, URL_);
    const msg = await waitText(page, '#conn-status', /Cannot reach/);
    check(msg.includes(`server.cors-origins allow ${origin}`), `says why in words: ${msg}`);
    eq(await page.locator(`#topics-body tr[data-topic="${t}"]`).count(), 0, 'nothing read');
    // The page's own write, as the dashboard sends it, never gets through.
    const got = await page.evaluate(async ([api, topic]) => {
      try {
        const r = await fetch(`${api}/v1/topics/${topic}/records`, { method: 'POST',
          headers: { 'Content-Type': 'application/json' }, body: '{"records": [{"value": "x"}]}' });
        return `answered ${r.status}`;
      } catch (e) {
        return 'blocked';
      }
    }, [URL_, t]);
    eq(got, 'blocked', 'the browser refuses the cross-origin write');
    // And the server refuses such a write itself (403), whoever sends it.
    const r = await http('POST', `/v1/topics/${t}/records`, { records: [{ value: 'x' }] }, URL_, { Origin: origin });
    eq(r.status, 403, `a write with Origin ${origin}: ${r.text}`);
    eq(await highWatermarks(t), [0], 'nothing stored');
  },
});
