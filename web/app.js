// SPDX-License-Identifier: MIT
// The Pulse dashboard: plain JavaScript, no framework, no build step.
//
// It talks to one pulsed over its HTTP API: this page's own server, or the
// one named in the Server field (another origin then needs that server's
// server.cors-origins to allow this page's origin). A bearer token, when
// given, is kept in sessionStorage (gone with the tab) and sent as
// "Authorization: Bearer ..." on every request.
//
// What it polls: /v1/broker, /v1/topics and the consumers' cursors every
// 5 s, /metrics every 2 s (rates and latencies are differences between two
// samples of the counters). The live tail is a Server-Sent Events stream
// (GET .../partitions/{p}/records with Accept: text/event-stream, or
// GET /v1/topics/{t}/events), read through EventSource, or through fetch()
// when a token must be sent (EventSource cannot send headers).
'use strict';

const POLL_MS = 5000;
const METRICS_MS = 2000;
const HISTORY_MS = 5 * 60 * 1000;
const TAIL_KEEP = 500;      // records kept for the live tail's list
const PAUSE_KEEP = 5000;    // records held while paused
const MAX_CONSUMERS = 50;   // consumers whose cursors are read per poll
const MAX_GROUPS = 50;      // consumer groups described per poll

const $ = (id) => document.getElementById(id);

const state = {
  base: '',            // server URL without a trailing slash; '' = this page's server
  token: '',
  topics: [],          // the last /v1/topics answer's topics
  timers: [],
  metrics: { last: null, series: { pubRate: [], fetchRate: [], pubLat: [], fetchLat: [] } },
  tail: null,          // the running stream, see startTail
  gen: 0,              // bumped on Connect: answers from before are dropped
};

// ---- the API ------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function serverName() {
  return state.base || location.origin;
}

function authHeaders(extra) {
  const h = Object.assign({}, extra);
  if (state.token) h.Authorization = 'Bearer ' + state.token;
  return h;
}

function networkError(err) {
  return new ApiError(0, 'network',
    `Cannot reach ${serverName()} (${err.message}). Is pulsed running there` +
    (state.base && new URL(state.base).origin !== location.origin
      ? `, and does its server.cors-origins allow ${location.origin}?` : '?'));
}

// The words of an error answer: {"error": {"code", "message"}} when the
// server sent one, else the status line.
async function errorFrom(resp) {
  const text = await resp.text().catch(() => '');
  let code = 'http_' + resp.status;
  let message = `${resp.status} ${resp.statusText || ''}`.trim();
  try {
    const e = JSON.parse(text).error;
    if (e && e.message) {
      code = e.code || code;
      message = e.message;
    }
  } catch (_) {
    if (text) message += ': ' + text.slice(0, 200);
  }
  return new ApiError(resp.status, code, message);
}

async function api(method, path, body) {
  const headers = authHeaders({ Accept: 'application/json' });
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(state.base + path, init);
  } catch (err) {
    throw networkError(err);
  }
  if (!resp.ok)
    throw await errorFrom(resp);
  if (resp.status === 204)
    return null;
  return resp.json();
}

async function apiText(path) {
  let resp;
  try {
    resp = await fetch(state.base + path, { headers: authHeaders({ Accept: 'text/plain' }) });
  } catch (err) {
    throw networkError(err);
  }
  if (!resp.ok)
    throw await errorFrom(resp);
  return resp.text();
}

function describe(err) {
  if (err instanceof ApiError)
    return err.status ? `${err.message} (HTTP ${err.status} ${err.code})` : err.message;
  return String(err && err.message ? err.message : err);
}

const enc = encodeURIComponent;

// ---- small DOM helpers -----------------------------------------------------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids)
    if (kid !== null && kid !== undefined)
      e.append(kid);
  return e;
}

function say(id, text, kind) {
  const p = $(id);
  p.textContent = text || '';
  p.classList.toggle('error', kind === 'error');
  p.classList.toggle('ok', kind === 'ok');
}

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

function num(n) {
  return Number(n).toLocaleString('en-US');
}

// ---- connection ------------------------------------------------------------

function loadSettings() {
  state.base = (localStorage.getItem('pulse.server') || '').replace(/\/+$/, '');
  state.token = sessionStorage.getItem('pulse.token') || '';
  $('server-url').value = state.base;
  $('token').value = state.token;
}

function onConnect(ev) {
  ev.preventDefault();
  const raw = $('server-url').value.trim().replace(/\/+$/, '');
  if (raw) {
    try {
      const u = new URL(raw);
      if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new Error('not http');
    } catch (_) {
      say('conn-status', `"${raw}" is not a server URL: give one like http://127.0.0.1:8080.`, 'error');
      return;
    }
  }
  state.base = raw;
  state.token = $('token').value;
  if (raw) localStorage.setItem('pulse.server', raw);
  else localStorage.removeItem('pulse.server');
  if (state.token) sessionStorage.setItem('pulse.token', state.token);
  else sessionStorage.removeItem('pulse.token');
  stopTail('Not tailing.');
  state.gen++;
  state.metrics.last = null;
  for (const s of Object.values(state.metrics.series)) s.length = 0;
  state.topics = [];
  renderTopics();
  fillTopicSelects();
  renderConsumers([], []);
  renderGroups([]);
  say('conn-status', `Connecting to ${serverName()}…`);
  refreshAll();
}

async function refreshBroker() {
  const gen = state.gen;
  try {
    const b = await api('GET', '/v1/broker');
    if (gen !== state.gen) return;
    const up = Math.round(b.uptime_ms / 1000);
    say('conn-status', `Connected to ${serverName()}: pulsed ${b.version}, broker ${b.broker_id}, up ${up} s.`);
  } catch (err) {
    if (gen === state.gen) say('conn-status', describe(err), 'error');
  }
}

// ---- topics ----------------------------------------------------------------

async function refreshTopics() {
  const gen = state.gen;
  try {
    const doc = await api('GET', '/v1/topics');
    if (gen !== state.gen) return;
    state.topics = doc.topics || [];
    renderTopics();
    fillTopicSelects();
    if (!$('topics-msg').classList.contains('ok'))
      say('topics-msg', '');
  } catch (err) {
    if (gen === state.gen) say('topics-msg', 'Cannot list topics: ' + describe(err), 'error');
  }
}

function renderTopics() {
  const body = $('topics-body');
  const rows = [];
  for (const t of state.topics) {
    const parts = t.partition_stats || [];
    const n = Math.max(parts.length, 1);
    const actions = el('td', { rowspan: n }, el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'small quiet', 'data-tail': t.name, text: 'Tail',
                     'aria-label': `Tail topic ${t.name}`, onclick: () => tailTopic(t.name) }),
      el('button', { type: 'button', class: 'small danger', 'data-delete': t.name, text: 'Delete',
                     'aria-label': `Delete topic ${t.name}`, onclick: () => confirmDelete(t.name) })));
    const name = el('td', { class: 'topic', rowspan: n, title: `${t.partitions} partitions, cleanup ${t.cleanup}` },
      t.name);
    if (parts.length === 0) {
      rows.push(el('tr', { 'data-topic': t.name }, name, el('td', { colspan: 5, class: 'empty', text: '-' }), actions));
      continue;
    }
    parts.forEach((p, i) => {
      const tr = el('tr', { 'data-topic': t.name, 'data-partition': p.partition },
        i === 0 ? name : null,
        el('td', { text: String(p.partition) }),
        el('td', { class: 'num', text: num(p.log_start_offset) }),
        el('td', { class: 'num', text: num(p.high_watermark) }),
        el('td', { class: 'num', text: bytes(p.size_bytes) }),
        el('td', { class: 'num', text: num(p.segments) }),
        i === 0 ? actions : null);
      rows.push(tr);
    });
  }
  if (rows.length === 0)
    rows.push(el('tr', {}, el('td', { colspan: 7, class: 'empty', text: 'No topics yet: create one above.' })));
  body.replaceChildren(...rows);
}

function fillSelect(sel, names, keepFirst) {
  const old = sel.value;
  const opts = keepFirst ? [sel.options[0]] : [];
  for (const n of names)
    opts.push(el('option', { value: n, text: n }));
  sel.replaceChildren(...opts);
  if (names.includes(old) || (keepFirst && old === ''))
    sel.value = old;
}

function fillTopicSelects() {
  const names = state.topics.map((t) => t.name);
  fillSelect($('tail-topic'), names, false);
  fillSelect($('pub-topic'), names, false);
  fillPartitionSelect();
}

function fillPartitionSelect() {
  const t = state.topics.find((x) => x.name === $('tail-topic').value);
  const n = t ? t.partitions : 0;
  const names = [];
  for (let i = 0; i < n; i++) names.push(String(i));
  fillSelect($('tail-partition'), names, true);
}

async function onCreate(ev) {
  ev.preventDefault();
  const name = $('create-name').value.trim();
  const partitions = Number($('create-partitions').value || 1);
  const cleanup = $('create-cleanup').value;
  try {
    await api('POST', '/v1/topics', { name, partitions, cleanup });
    say('topics-msg', `Created topic "${name}" with ${partitions} partition${partitions === 1 ? '' : 's'}.`, 'ok');
    $('create-name').value = '';
    await refreshTopics();
  } catch (err) {
    say('topics-msg', `Cannot create topic "${name}": ` + describe(err), 'error');
  }
}

function confirmDelete(name) {
  const dlg = $('confirm');
  $('confirm-text').textContent =
    `Delete topic "${name}", all its records and every consumer cursor on it? This cannot be undone.`;
  dlg.returnValue = '';
  dlg.onclose = async () => {
    if (dlg.returnValue !== 'ok')
      return;
    try {
      await api('DELETE', '/v1/topics/' + enc(name));
      say('topics-msg', `Deleted topic "${name}".`, 'ok');
      if (state.tail && state.tail.topic === name)
        stopTail(`Topic "${name}" was deleted.`);
    } catch (err) {
      say('topics-msg', `Cannot delete topic "${name}": ` + describe(err), 'error');
    }
    await refreshTopics();
  };
  dlg.showModal();
  $('confirm-cancel').focus();
}

// ---- consumers -------------------------------------------------------------

async function refreshConsumers() {
  const gen = state.gen;
  try {
    const doc = await api('GET', '/v1/consumers');
    const names = (doc.consumers || []).slice(0, MAX_CONSUMERS);
    const all = await Promise.all(names.map((c) =>
      api('GET', `/v1/consumers/${enc(c)}/cursors`).then((d) => d.cursors || [])));
    if (gen !== state.gen) return;
    renderConsumers(names, all);
    const more = (doc.consumers || []).length - names.length;
    say('consumers-msg', more > 0 ? `Showing ${names.length} consumers of ${names.length + more}.` : '');
  } catch (err) {
    if (gen === state.gen) say('consumers-msg', 'Cannot list consumers: ' + describe(err), 'error');
  }
}

function renderConsumers(names, cursors) {
  const rows = [];
  names.forEach((c, i) => {
    const list = cursors[i];
    if (list.length === 0) {
      rows.push(el('tr', { 'data-consumer': c }, el('td', { text: c }),
        el('td', { colspan: 5, class: 'empty', text: 'no cursors' })));
      return;
    }
    list.forEach((cur, j) => {
      rows.push(el('tr', { 'data-consumer': c, 'data-topic': cur.topic, 'data-partition': cur.partition },
        el('td', { text: j === 0 ? c : '' }),
        el('td', { text: cur.topic }),
        el('td', { text: String(cur.partition) }),
        el('td', { class: 'num', text: num(cur.offset) }),
        el('td', { class: 'num', text: num(cur.high_watermark) }),
        el('td', { class: 'num' + (cur.lag > 0 ? ' lag-high' : ''), text: num(cur.lag) })));
    });
  });
  if (rows.length === 0)
    rows.push(el('tr', {}, el('td', { colspan: 6, class: 'empty',
      text: 'No consumers yet: a consumer appears once it commits a cursor.' })));
  $('consumers-body').replaceChildren(...rows);
}

// ---- consumer groups ---------------------------------------------------------

async function refreshGroups() {
  const gen = state.gen;
  try {
    const doc = await api('GET', '/v1/groups');
    const names = (doc.groups || []).slice(0, MAX_GROUPS);
    // A group whose last member left between the list and its read is gone:
    // shown as nothing rather than as an error.
    const all = await Promise.all(names.map((g) =>
      api('GET', `/v1/groups/${enc(g)}`).catch((err) => (err.status === 404 ? null : Promise.reject(err)))));
    if (gen !== state.gen) return;
    renderGroups(all.filter((d) => d !== null));
    const more = (doc.groups || []).length - names.length;
    say('groups-msg', more > 0 ? `Showing ${names.length} groups of ${names.length + more}.` : '');
  } catch (err) {
    if (gen === state.gen) say('groups-msg', 'Cannot list consumer groups: ' + describe(err), 'error');
  }
}

function renderGroups(groups) {
  const rows = [];
  groups.forEach((g) => {
    const parts = g.partitions || [];
    const members = (g.members || []).length;
    if (parts.length === 0) {
      rows.push(el('tr', { 'data-group': g.group }, el('td', { text: g.group }),
        el('td', { class: 'num', text: num(g.generation) }), el('td', { class: 'num', text: num(members) }),
        el('td', { colspan: 6, class: 'empty', text: 'no partitions' })));
      return;
    }
    parts.forEach((p, j) => {
      rows.push(el('tr', { 'data-group': g.group, 'data-topic': p.topic, 'data-partition': p.partition },
        el('td', { text: j === 0 ? g.group : '' }),
        el('td', { class: 'num', text: j === 0 ? num(g.generation) : '' }),
        el('td', { class: 'num', text: j === 0 ? num(members) : '' }),
        el('td', { text: p.topic }),
        el('td', { text: String(p.partition) }),
        el('td', { text: p.owner || (p.assigned_to ? 'handing over' : 'free') }),
        el('td', { class: 'num', text: p.committed === null ? '-' : num(p.committed) }),
        el('td', { class: 'num', text: num(p.high_watermark) }),
        el('td', { class: 'num' + (p.lag > 0 ? ' lag-high' : ''), text: num(p.lag) })));
    });
  });
  if (rows.length === 0)
    rows.push(el('tr', {}, el('td', { colspan: 9, class: 'empty',
      text: 'No consumer groups: a group appears while it has members.' })));
  $('groups-body').replaceChildren(...rows);
}

// ---- metrics ---------------------------------------------------------------

// Prometheus text format 0.0.4: "name{label="v",...} value" lines; comments
// and blank lines skipped.
function parseMetrics(text) {
  const out = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const l of text.split('\n')) {
    if (l === '' || l[0] === '#') continue;
    const m = line.exec(l);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      for (const lm of m[3].matchAll(label))
        labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

const PUBLISH_ROUTE = '/v1/topics/{topic}/records';
const FETCH_ROUTE = '/v1/topics/{topic}/partitions/{partition}/records';

// The counters the charts need, summed over their labels.
function sampleOf(rows) {
  const s = { t: Date.now(), pub: 0, fetch: 0, hist: {} };
  for (const r of rows) {
    if (r.name === 'pulse_published_records_total') s.pub += r.value;
    else if (r.name === 'pulse_fetched_records_total') s.fetch += r.value;
    else if (r.name.startsWith('pulse_http_request_duration_seconds') &&
             (r.labels.route === PUBLISH_ROUTE || r.labels.route === FETCH_ROUTE)) {
      const h = s.hist[r.labels.route] || (s.hist[r.labels.route] = { sum: 0, count: 0, buckets: [] });
      if (r.name.endsWith('_sum')) h.sum = r.value;
      else if (r.name.endsWith('_count')) h.count = r.value;
      else if (r.name.endsWith('_bucket')) h.buckets.push([Number(r.labels.le), r.value]);
    }
  }
  return s;
}

// Mean and 95th percentile (a bucket's upper bound) of the requests between
// two samples, in seconds; null when there were none.
function latencyBetween(a, b) {
  if (!a || !b) return null;
  const count = b.count - a.count;
  if (count <= 0) return null;
  const mean = (b.sum - a.sum) / count;
  let p95 = null;
  const prev = new Map(a.buckets);
  const sorted = [...b.buckets].sort((x, y) => x[0] - y[0]);
  for (const [le, v] of sorted) {
    if (v - (prev.get(le) || 0) >= 0.95 * count) {
      p95 = Number.isFinite(le) ? le : null;
      break;
    }
  }
  return { mean, p95: p95 === null ? mean : Math.max(p95, mean) };
}

function push(series, point) {
  series.push(point);
  while (series.length && series[0].t < point.t - HISTORY_MS) series.shift();
}

async function refreshMetrics() {
  const gen = state.gen;
  let rows;
  try {
    rows = parseMetrics(await apiText('/metrics'));
  } catch (err) {
    if (gen === state.gen) say('metrics-msg', 'Cannot read /metrics: ' + describe(err), 'error');
    return;
  }
  if (gen !== state.gen) return;
  say('metrics-msg', '');
  const cur = sampleOf(rows);
  const last = state.metrics.last;
  state.metrics.last = cur;
  const S = state.metrics.series;
  if (last && cur.t > last.t) {
    const dt = (cur.t - last.t) / 1000;
    // A counter that went down means the server restarted: no rate then.
    if (cur.pub >= last.pub) push(S.pubRate, { t: cur.t, v: (cur.pub - last.pub) / dt });
    if (cur.fetch >= last.fetch) push(S.fetchRate, { t: cur.t, v: (cur.fetch - last.fetch) / dt });
    const pl = latencyBetween(last.hist[PUBLISH_ROUTE], cur.hist[PUBLISH_ROUTE]);
    const fl = latencyBetween(last.hist[FETCH_ROUTE], cur.hist[FETCH_ROUTE]);
    push(S.pubLat, { t: cur.t, v: pl ? pl.mean * 1000 : null, v2: pl ? pl.p95 * 1000 : null });
    push(S.fetchLat, { t: cur.t, v: fl ? fl.mean * 1000 : null, v2: fl ? fl.p95 * 1000 : null });
  }
  drawAll();
}

function fmtRate(v) {
  return v === null || v === undefined ? '-' : (v < 10 ? v.toFixed(1) : Math.round(v).toString()) + '/s';
}

function fmtMs(v) {
  return v === null || v === undefined ? '-' : (v < 10 ? v.toFixed(2) : Math.round(v).toString()) + ' ms';
}

function lastPoint(series) {
  return series.length ? series[series.length - 1] : null;
}

function drawAll() {
  const S = state.metrics.series;
  const lp = (s) => lastPoint(s) || {};
  drawChart($('pub-rate'), S.pubRate, fmtRate);
  drawChart($('fetch-rate'), S.fetchRate, fmtRate);
  drawChart($('pub-lat'), S.pubLat, fmtMs);
  drawChart($('fetch-lat'), S.fetchLat, fmtMs);
  $('pub-rate-now').textContent = fmtRate(lp(S.pubRate).v);
  $('fetch-rate-now').textContent = fmtRate(lp(S.fetchRate).v);
  $('pub-lat-now').textContent = `mean ${fmtMs(lp(S.pubLat).v)}, p95 ${fmtMs(lp(S.pubLat).v2)}`;
  $('fetch-lat-now').textContent = `mean ${fmtMs(lp(S.fetchLat).v)}, p95 ${fmtMs(lp(S.fetchLat).v2)}`;
}

// One small line chart over the last HISTORY_MS: v as a line, v2 (when
// the points have one) as a second, dashed line; the top of the scale is
// written in the corner.
function drawChart(canvas, series, fmt) {
  const css = getComputedStyle(document.documentElement);
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width;
  const h = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = css.getPropertyValue('--muted');
  const now = Date.now();
  let max = 0;
  for (const p of series) max = Math.max(max, p.v || 0, p.v2 || 0);
  if (series.length < 2) {
    g.fillText('collecting samples…', 8, h / 2);
    return;
  }
  max = max > 0 ? max * 1.15 : 1;
  // The time axis spans the samples held (at least 30 s, at most
  // HISTORY_MS), so a page just opened shows its first minute in full.
  const span = Math.min(HISTORY_MS, Math.max(30000, now - series[0].t));
  const x = (t) => w - ((now - t) / span) * w;
  const y = (v) => h - 4 - (v / max) * (h - 18);
  g.fillText(fmt(max), 4, 11);
  g.fillText(span >= 120000 ? `${Math.round(span / 60000)} min` : `${Math.round(span / 1000)} s`, 4, h - 4);
  const line = (key, color, dash) => {
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.setLineDash(dash);
    g.beginPath();
    let open = false;
    for (const p of series) {
      if (p[key] === null || p[key] === undefined) {
        open = false;
        continue;
      }
      if (open) g.lineTo(x(p.t), y(p[key]));
      else g.moveTo(x(p.t), y(p[key]));
      open = true;
    }
    g.stroke();
  };
  line('v', css.getPropertyValue('--accent'), []);
  if (series.some((p) => p.v2 !== undefined)) line('v2', css.getPropertyValue('--accent2'), [4, 3]);
}

// ---- live tail -------------------------------------------------------------

function tailUrl(topic, partition, from) {
  const q = from && from !== 'latest' ? `?from=${enc(from)}` : '';
  if (partition === '')
    return `${state.base}/v1/topics/${enc(topic)}/events${q}`;
  return `${state.base}/v1/topics/${enc(topic)}/partitions/${enc(partition)}/records${q}`;
}

// Why a stream could not be opened, in words: asks the same URL once more
// with fetch(), which, unlike EventSource, sees the status and the body.
async function explainStreamFailure(url) {
  let resp;
  try {
    resp = await fetch(url, { headers: authHeaders({ Accept: 'text/event-stream' }) });
  } catch (err) {
    return describe(networkError(err));
  }
  if (resp.ok) {
    if (resp.body) resp.body.cancel().catch(() => {});
    return 'The stream ended; it is reopened when you press Start.';
  }
  const err = await errorFrom(resp);
  if (resp.status === 406)
    return `This server does not offer live tails (it answered 406 to Accept: text/event-stream: ${err.message}). ` +
      'A pulsed with Server-Sent Events support is needed.';
  if (resp.status === 404 && err.code === 'not_found')
    return `This server has no such stream (${err.message}): the topic-wide stream needs a newer pulsed; ` +
      'pick one partition instead.';
  return 'Cannot tail: ' + describe(err);
}

// A Server-Sent Events reader over fetch(), for when a token must be sent.
// Calls on.message(data, id) and on.named(type, data); reconnects with
// Last-Event-ID after the server's retry time, as EventSource does.
function fetchStream(url, on) {
  const ctl = { closed: false, abort: null, lastId: '', retry: 1000 };
  const run = async () => {
    while (!ctl.closed) {
      const ac = new AbortController();
      ctl.abort = () => ac.abort();
      const headers = authHeaders({ Accept: 'text/event-stream' });
      if (ctl.lastId) headers['Last-Event-ID'] = ctl.lastId;
      let resp;
      try {
        resp = await fetch(url, { headers, signal: ac.signal });
      } catch (err) {
        if (ctl.closed) return;
        on.error(describe(networkError(err)), true);
        await new Promise((r) => setTimeout(r, ctl.retry));
        continue;
      }
      if (!resp.ok) {
        on.fatal(url);
        return;
      }
      on.open();
      await readEvents(resp.body, ctl, on).catch(() => {});
      if (ctl.closed) return;
      on.error('The stream was interrupted; reconnecting…', true);
      await new Promise((r) => setTimeout(r, ctl.retry));
    }
  };
  run();
  return { close() { ctl.closed = true; if (ctl.abort) ctl.abort(); } };
}

async function readEvents(body, ctl, on) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { type: '', data: [], id: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const ln = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
      if (ln === '') {
        if (ev.id !== null) ctl.lastId = ev.id;
        if (ev.data.length) {
          const data = ev.data.join('\n');
          if (ev.type === '' || ev.type === 'message') on.message(data, ctl.lastId);
          else on.named(ev.type, data);
        }
        ev = { type: '', data: [], id: null };
        continue;
      }
      if (ln[0] === ':') continue;
      const c = ln.indexOf(':');
      const field = c < 0 ? ln : ln.slice(0, c);
      const val = c < 0 ? '' : ln.slice(c + 1).replace(/^ /, '');
      if (field === 'data') ev.data.push(val);
      else if (field === 'event') ev.type = val;
      else if (field === 'id' && !val.includes('\0')) ev.id = val;
      else if (field === 'retry' && /^\d+$/.test(val)) ctl.retry = Number(val);
    }
  }
}

// Event types the server may send besides records (the end of a stream and
// its reason); shown as notices in the list.
const NOTICE_EVENTS = ['end', 'close', 'closed', 'shutdown', 'deleted', 'overflow', 'lagging', 'error'];

function startTail(topic, partition, from) {
  stopTail('');
  if (!topic) {
    say('tail-status', 'Pick a topic to tail (create one first).', 'error');
    return;
  }
  const url = tailUrl(topic, partition, from);
  const tail = { topic, partition, url, paused: false, pending: [], dropped: 0, records: [], stream: null, count: 0 };
  state.tail = tail;
  const where = partition === '' ? `topic "${topic}" (all partitions)` : `partition ${partition} of "${topic}"`;
  const on = {
    open: () => say('tail-status', `Tailing ${where}` + (from === 'earliest' ? ' from the log start.' : '; new records appear here.')),
    message: (data, id) => onTailRecord(tail, data, id),
    named: (type, data) => onTailNotice(tail, type, data),
    error: (text) => say('tail-status', text, 'error'),
    fatal: async (u) => {
      if (state.tail !== tail) return;
      const why = await explainStreamFailure(u);
      if (state.tail === tail) stopTail(why, 'error');
    },
  };
  if (state.token) {
    tail.stream = fetchStream(url, on);
  } else {
    const es = new EventSource(url);
    es.onopen = on.open;
    es.onmessage = (ev) => on.message(ev.data, ev.lastEventId);
    for (const type of NOTICE_EVENTS)
      es.addEventListener(type, (ev) => { if (ev.data !== undefined) on.named(type, ev.data); });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) on.fatal(url);
      else say('tail-status', `The stream of ${where} was interrupted; reconnecting…`, 'error');
    };
    tail.stream = es;
  }
  say('tail-status', `Opening the stream of ${where}…`);
  $('tail-start').textContent = 'Stop';
  $('tail-pause').disabled = false;
  $('tail-pause').textContent = 'Pause';
}

function stopTail(text, kind) {
  const tail = state.tail;
  if (tail && tail.stream) tail.stream.close();
  state.tail = null;
  $('tail-start').textContent = 'Start';
  $('tail-pause').disabled = true;
  $('tail-pause').textContent = 'Pause';
  if (text !== '') say('tail-status', text || 'Stopped.', kind);
}

function onTailRecord(tail, data, id) {
  if (state.tail !== tail) return;
  let rec;
  try {
    rec = JSON.parse(data);
  } catch (_) {
    rec = { value: data };
  }
  if (rec.partition === undefined && tail.partition !== '') rec.partition = Number(tail.partition);
  rec._id = id;
  tail.count++;
  if (tail.paused) {
    tail.pending.push(rec);
    if (tail.pending.length > PAUSE_KEEP) {
      tail.pending.shift();
      tail.dropped++;
    }
    say('tail-status', `Paused: ${tail.pending.length} new record${tail.pending.length === 1 ? '' : 's'} held` +
      (tail.dropped ? ` (${tail.dropped} older ones not kept)` : '') + '.');
    return;
  }
  keep(tail, rec);
  if (matches(rec)) $('tail-list').prepend(recordItem(rec));
  trimList();
}

function keep(tail, rec) {
  tail.records.push(rec);
  if (tail.records.length > TAIL_KEEP) tail.records.shift();
}

// The server's own word on its stream: "end" (with a reason and a message)
// closes it, since a reconnect would only meet the same end.
function onTailNotice(tail, type, data) {
  let doc = null;
  try { doc = JSON.parse(data); } catch (_) { /* plain text */ }
  const words = doc && doc.message ? `${doc.message}${doc.reason ? ` (${doc.reason})` : ''}` : data;
  addNotice(tail, `${type}: ${words}`);
  if (type === 'end' && state.tail === tail)
    stopTail(`The server ended the stream: ${words}`, 'error');
}

function addNotice(tail, text) {
  if (state.tail !== tail) return;
  $('tail-list').prepend(el('li', { class: 'notice', text }));
}

function matches(rec) {
  const f = $('tail-filter').value;
  if (!f) return true;
  return typeof rec.key === 'string' && rec.key.includes(f);
}

function trimList() {
  const list = $('tail-list');
  while (list.children.length > TAIL_KEEP) list.lastElementChild.remove();
}

// A value that is JSON text is shown indented; anything else as it is.
function readable(rec) {
  if (rec.value === null) return 'null';
  if (rec.value === undefined) return rec.value_base64 !== undefined ? `(bytes, base64) ${rec.value_base64}` : '';
  if (typeof rec.value !== 'string') return JSON.stringify(rec.value, null, 2);
  const s = rec.value.trim();
  if (s.startsWith('{') || s.startsWith('[')) {
    try {
      return JSON.stringify(JSON.parse(s), null, 2);
    } catch (_) { /* not JSON after all */ }
  }
  return rec.value;
}

function recordItem(rec) {
  const key = rec.key === undefined ? (rec.key_base64 !== undefined ? `(base64) ${rec.key_base64}` : 'none')
    : rec.key === null ? 'none' : rec.key;
  const when = Number.isFinite(rec.timestamp) ? new Date(rec.timestamp).toISOString() : '';
  const meta = el('div', { class: 'meta' },
    el('span', {}, 'partition ', el('b', { text: String(rec.partition ?? '?') })),
    el('span', {}, 'offset ', el('b', { text: String(rec.offset ?? '?') })),
    el('span', {}, 'key ', el('b', { text: key })),
    when ? el('time', { datetime: when, text: when }) : null);
  return el('li', { 'data-offset': rec.offset, 'data-partition': rec.partition, 'data-key': rec.key ?? '' },
    meta, el('pre', { text: readable(rec) }));
}

function renderTail() {
  const tail = state.tail;
  const list = $('tail-list');
  if (!tail) return;
  const items = tail.records.filter(matches).map(recordItem).reverse();
  list.replaceChildren(...items);
}

function onTailSubmit(ev) {
  ev.preventDefault();
  if (state.tail) {
    stopTail('Stopped.');
    return;
  }
  $('tail-list').replaceChildren();
  startTail($('tail-topic').value, $('tail-partition').value, $('tail-from').value);
}

function onPause() {
  const tail = state.tail;
  if (!tail) return;
  tail.paused = !tail.paused;
  $('tail-pause').textContent = tail.paused ? 'Resume' : 'Pause';
  if (tail.paused) {
    say('tail-status', 'Paused: new records are held until you resume.');
    return;
  }
  for (const rec of tail.pending) keep(tail, rec);
  const n = tail.pending.length;
  tail.pending = [];
  tail.dropped = 0;
  renderTail();
  say('tail-status', `Resumed; ${n} held record${n === 1 ? '' : 's'} shown.`);
}

function tailTopic(name) {
  $('tail-topic').value = name;
  fillPartitionSelect();
  $('tail-partition').value = '';
  $('tail-list').replaceChildren();
  startTail(name, '', $('tail-from').value);
  $('tail').scrollIntoView({ block: 'nearest' });
}

// ---- publish ---------------------------------------------------------------

async function onPublish(ev) {
  ev.preventDefault();
  const topic = $('pub-topic').value;
  if (!topic) {
    say('publish-msg', 'Pick a topic to publish to (create one first).', 'error');
    return;
  }
  const rec = {};
  const key = $('pub-key').value;
  if (key !== '') rec.key = key;
  const part = $('pub-partition').value;
  if (part !== '') rec.partition = Number(part);
  const text = $('pub-value').value;
  if ($('pub-json').checked) {
    try {
      rec.value = JSON.parse(text);
    } catch (err) {
      say('publish-msg', `The value is not valid JSON (${err.message}); fix it or untick "The value is JSON".`, 'error');
      return;
    }
  } else {
    rec.value = text;
  }
  try {
    const doc = await api('POST', `/v1/topics/${enc(topic)}/records`, { records: [rec] });
    const o = doc.offsets[0];
    say('publish-msg', `Stored in "${topic}", partition ${o.partition}, at offset ${o.offset}.`, 'ok');
    refreshTopics();
  } catch (err) {
    say('publish-msg', `Cannot publish to "${topic}": ` + describe(err), 'error');
  }
}

// ---- wiring ----------------------------------------------------------------

// One refresh at a time; one asked for meanwhile (after Connect, say) runs
// when the current one ends, so it sees the new settings.
let busy = false;
let again = false;
async function refreshAll() {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    do {
      again = false;
      await Promise.all([refreshBroker(), refreshTopics(), refreshConsumers(), refreshGroups(), refreshMetrics()]);
    } while (again);
  } finally {
    busy = false;
  }
}

function start() {
  loadSettings();
  $('conn-form').addEventListener('submit', onConnect);
  $('create-form').addEventListener('submit', onCreate);
  $('refresh').addEventListener('click', () => { say('topics-msg', ''); refreshAll(); });
  $('tail-form').addEventListener('submit', onTailSubmit);
  $('tail-pause').addEventListener('click', onPause);
  $('tail-topic').addEventListener('change', fillPartitionSelect);
  $('tail-filter').addEventListener('input', renderTail);
  $('publish-form').addEventListener('submit', onPublish);
  $('confirm-ok').addEventListener('click', () => $('confirm').close('ok'));
  $('confirm-cancel').addEventListener('click', () => $('confirm').close('cancel'));
  refreshAll();
  let metricsBusy = false;
  state.timers.push(setInterval(async () => {
    if (metricsBusy || document.hidden) return;
    metricsBusy = true;
    try { await refreshMetrics(); } finally { metricsBusy = false; }
  }, METRICS_MS));
  state.timers.push(setInterval(() => {
    if (document.hidden) return;
    Promise.all([refreshBroker(), refreshTopics(), refreshConsumers(), refreshGroups()]);
  }, POLL_MS));
  window.addEventListener('resize', drawAll);
}

document.addEventListener('DOMContentLoaded', start);
