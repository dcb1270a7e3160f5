// SPDX-License-Identifier: MIT
// A browser EventSource whose connection drops: it reconnects by itself
// with the Last-Event-ID header, and a new EventSource resumes with
// ?last_event_id=, and across both every record arrives exactly once, for
// one partition and for the topic-wide stream. The page is loaded through a
// TCP proxy in this process, which the test cuts to make the drop (run by
// 40_sse_resume.py, which skips it when PULSE_URL answers 406 to
// Accept: text/event-stream).
import net from 'node:net';
import { URL_, check, createTopic, eq, openPage, publish, run, uniq } from './lib.mjs';

// Forwards every connection to pulsed; dropAll() cuts them all, as a lost
// network would; heads holds each connection's first bytes (its request).
async function dropProxy() {
  const target = new URL(URL_);
  const socks = new Set();
  const heads = [];
  const srv = net.createServer((c) => {
    const up = net.connect(Number(target.port), target.hostname);
    socks.add(c);
    socks.add(up);
    let first = true;
    c.on('data', (d) => {
      if (first) heads.push(d.toString('latin1'));
      first = false;
    });
    c.pipe(up);
    up.pipe(c);
    const end = () => { c.destroy(); up.destroy(); socks.delete(c); socks.delete(up); };
    c.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    heads,
    dropAll() { for (const s of socks) s.destroy(); },
    close() { this.dropAll(); srv.close(); },
  };
}

// Opens an EventSource in the page; its records collect in window.got as
// [partition, offset, lastEventId].
async function listen(page, path, partition) {
  await page.evaluate(([p, part]) => {
    window.got = window.got || [];
    window.es = new EventSource(p);
    window.es.onmessage = (e) => {
      const r = JSON.parse(e.data);
      window.got.push([r.partition ?? part, r.offset, e.lastEventId]);
    };
  }, [path, partition]);
}

async function waitGot(page, n) {
  await page.waitForFunction((k) => (window.got || []).length >= k, n);
  return page.evaluate(() => window.got.slice());
}

function exactlyOnce(got, want, what) {
  const keys = got.map(([p, o]) => `${p}:${o}`);
  eq(keys.length, new Set(keys).size, `${what}: no record twice (${keys})`);
  eq([...keys].sort(), [...want].sort(), `${what}: every record`);
}

async function dropAndResume(ctx, topic, partitions, path) {
  const proxy = await dropProxy();
  try {
    // Any page of the server's origin will do: the test drives EventSource
    // itself, not the dashboard.
    const page = await openPage(ctx, null);
    await page.goto(proxy.url + '/healthz');
    await listen(page, path, 0);
    const want = [];
    const send = async (n) => {
      const recs = [];
      for (let i = 0; i < n; i++) recs.push({ value: `v${want.length + i}`, partition: (want.length + i) % partitions });
      const offs = await publish(topic, recs);
      for (const o of offs) want.push(`${o.partition}:${o.offset}`);
    };
    await send(4);
    await waitGot(page, 4);
    // The network drops: EventSource reconnects by itself, with the id of
    // the last event it saw in Last-Event-ID.
    const before = proxy.heads.length;
    proxy.dropAll();
    await send(4);
    const got = await waitGot(page, 8);
    const lastSeen = got[3][2];
    const again = proxy.heads.slice(before).filter((h) => h.startsWith('GET ' + path.split('?')[0]));
    check(again.some((h) => h.toLowerCase().includes(`\r\nlast-event-id: ${lastSeen.toLowerCase()}\r\n`)),
      `the reconnect carried Last-Event-ID: ${lastSeen}; requests: ${JSON.stringify(again)}`);
    // A new EventSource (a reload, say) resumes with ?last_event_id=.
    const last = got[got.length - 1][2];
    await page.evaluate(() => window.es.close());
    await send(3);
    await listen(page, `${path.split('?')[0]}?last_event_id=${encodeURIComponent(last)}`, 0);
    const all = await waitGot(page, 11);
    exactlyOnce(all, want, topic);
    await send(1);
    exactlyOnce(await waitGot(page, 12), want, topic + ' after one more');
    await page.evaluate(() => window.es.close());
  } finally {
    proxy.close();
  }
}

await run({
  async test_partition_stream_resumes_exactly_once(ctx) {
    const t = uniq('resume');
    await createTopic(t, 1);
    await dropAndResume(ctx, t, 1, `/v1/topics/${t}/partitions/0/records?from=earliest`);
  },

  async test_topic_stream_resumes_exactly_once(ctx) {
    const t = uniq('resume-all');
    await createTopic(t, 3);
    await dropAndResume(ctx, t, 3, `/v1/topics/${t}/events?from=earliest`);
  },
});
