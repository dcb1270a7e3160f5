#!/usr/bin/env node
// SPDX-License-Identifier: MIT
//
// A Pulse consumer-group member in JavaScript for Node 18 or later, with
// nothing but the built-in fetch: the loop of examples/consumer.py. Start
// it twice and the two split the topic's partitions.
//
//   node examples/group_consumer.mjs --topic orders --group billing
//   PULSE_URL=http://127.0.0.1:8080 node examples/group_consumer.mjs --topic orders --exit-when-idle
//
// join -> loop { fetch (long-poll over all my partitions) -> handle ->
// commit {generation, offsets: positions} } -> leave on Ctrl-C.
// Delivery is at least once: handle() must be idempotent (key the work by
// topic/partition/offset). 409 "commit_fenced": the batch's partitions
// moved, it will be delivered again. 409 "rejoin": join again. Each fetch
// starts at the committed cursors (it commits every batch); to fetch again
// before committing, pass the last answer's "resume" as ?resume=.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]?.startsWith("--") || all[i + 1] === undefined ? true : all[i + 1]]);
    return acc;
  }, []),
);
const url = (args.url || process.env.PULSE_URL || "http://127.0.0.1:8080").replace(/\/$/, "");
const topics = String(args.topic || "orders").split(",");
const group = String(args.group || "example-consumer");
const waitMs = Number(args["wait-ms"] || 1000);
const leaseMs = Number(args["lease-ms"] || 10000);
const maxRecords = Number(args["max-records"] || 100);
const base = `${url}/v1/groups/${encodeURIComponent(group)}`;

async function call(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, doc: text ? JSON.parse(text) : null };
}

let member = null;
async function join() {
  const { status, doc } = await call("POST", "/members", { topics, lease_ms: leaseMs });
  if (status !== 201) throw new Error(`join: HTTP ${status} ${JSON.stringify(doc)}`);
  member = doc.member_id;
  console.error(`joined ${group} as ${member} (generation ${doc.generation})`);
}

const seen = new Set();
function handle(rec) {
  // Idempotent: a record may come again; its position is its identity.
  const pos = `${rec.topic}/${rec.partition}@${rec.offset}`;
  const again = seen.has(pos) ? " (again)" : "";
  seen.add(pos);
  console.log(`${pos} key=${rec.key ?? rec.key_base64} value=${rec.value ?? rec.value_base64}${again}`);
}

let stopping = false;
let lastParts = null;
process.on("SIGINT", () => { stopping = true; });

await join();
while (!stopping) {
  const q = `max_records=${maxRecords}&max_wait_ms=${waitMs}`;
  const { status, doc } = await call("GET", `/members/${member}/records?${q}`);
  if (status === 409 && doc?.error?.code === "rejoin") { await join(); continue; }
  if (status !== 200) throw new Error(`fetch: HTTP ${status} ${JSON.stringify(doc)}`);
  const parts = JSON.stringify(doc.partitions);
  if (doc.records.length === 0) {
    // Idle: nothing came and nothing changed (an empty answer may also
    // mean a rebalance gave this member new partitions).
    if (args["exit-when-idle"] && doc.pending_partitions === 0 && parts === lastParts) break;
    lastParts = parts;
    continue;
  }
  lastParts = parts;
  for (const rec of doc.records) handle(rec);
  const c = await call("POST", `/members/${member}/commit`, { generation: doc.generation, offsets: doc.positions });
  if (c.status === 409 && c.doc?.error?.code === "rejoin") await join();
  else if (c.status === 409) console.error("commit refused (partitions moved); the batch comes again");
  else if (c.status !== 200) throw new Error(`commit: HTTP ${c.status} ${JSON.stringify(c.doc)}`);
}
await call("DELETE", `/members/${member}`);
console.log(`handled ${seen.size} records`);
