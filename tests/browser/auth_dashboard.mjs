// SPDX-License-Identifier: MIT
// The dashboard against a pulsed with a token file (run by
// 50_auth_dashboard.py): the page itself loads without a token
// (auth.public lists it by default); without a token, or with a wrong one,
// it says so in words (401); with a reader's token it lists the topics
// that token may read, and not the others; a write the token may not do is
// explained (403). PULSE_ADMIN_TOKEN and PULSE_READER_TOKEN are the
// tokens; the reader's grants are read:shop-* and commit:*.
import { URL_, check, eq, http, openPage, run, uniq, waitText } from './lib.mjs';

const PAGE = URL_ + '/';
const ADMIN = { Authorization: 'Bearer ' + process.env.PULSE_ADMIN_TOKEN };
const READER = process.env.PULSE_READER_TOKEN;

// Chromium logs every 4xx answer to fetch() as a console error; those the
// test provokes on purpose are not problems.
function problems(page) {
  return page.problems.filter((p) => !/status of 40[13]/.test(p));
}

async function connect(page, token) {
  await page.fill('#token', token);
  await page.click('#conn-form button[type=submit]');
}

await run({
  async test_without_a_token_the_page_loads_and_says_401_in_words(ctx) {
    const name = uniq('shop-a');
    eq((await http('POST', '/v1/topics', { name }, URL_, ADMIN)).status, 201, 'create with the admin token');
    const page = await openPage(ctx, null);
    await page.goto(PAGE);
    const msg = await waitText(page, '#topics-msg', /401/);
    check(/Cannot list topics: .*needs a bearer token.*\(HTTP 401 unauthorized\)/.test(msg), `topics message: ${msg}`);
    const conn = await waitText(page, '#conn-status', /401/);
    check(/bearer token/.test(conn), `connection status: ${conn}`);
    eq(await page.locator('#topics-body tr[data-topic]').count(), 0, 'no topic is shown');
    eq(problems(page), [], 'problems');
  },

  async test_a_wrong_token_is_said_to_be_unknown(ctx) {
    const page = await openPage(ctx, null);
    await page.goto(PAGE);
    await connect(page, 'not-a-token');
    const msg = await waitText(page, '#topics-msg', /not known/);
    check(/\(HTTP 401 unauthorized\)/.test(msg) && !/not-a-token/.test(msg), `topics message: ${msg}`);
  },

  async test_with_a_token_it_lists_the_topics_the_token_may_read(ctx) {
    const mine = uniq('shop-b');
    const other = uniq('hr');
    for (const name of [mine, other])
      eq((await http('POST', '/v1/topics', { name }, URL_, ADMIN)).status, 201, `create ${name}`);
    const page = await openPage(ctx, null);
    const seen = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/v1/topics')) seen.push(r.headers().authorization || null);
    });
    await page.goto(PAGE);
    await connect(page, READER);
    await waitText(page, '#conn-status', /Connected to/);
    await page.locator(`#topics-body tr[data-topic="${mine}"]`).waitFor();
    eq(await page.locator(`#topics-body tr[data-topic="${other}"]`).count(), 0, `${other} is not shown`);
    check(seen.includes('Bearer ' + READER), `the token went out as a bearer token: ${JSON.stringify(seen.length)}`);
    // A create the token may not do reads as words, naming the grant.
    await page.fill('#create-name', 'shop-new');
    await page.click('#create-form button[type=submit]');
    const msg = await waitText(page, '#topics-msg', /Cannot create/);
    check(/token "reader" holds no admin grant.*\(HTTP 403 forbidden\)/.test(msg), `create message: ${msg}`);
    eq(problems(page), [], 'problems');
  },
});
