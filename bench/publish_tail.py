#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where the slowest one-connection publishes spend their time
(docs/Performance.md "Where the one-connection tail goes").

    python3 bench/publish_tail.py BUILD [--seconds S] [--dir DIR] [--loop]
                                        [--rt PRIO] [--cpus LIST] [--csv FILE]
                                        [-o OPT ...]

Starts BUILD/pulsed (every-write, data under DIR, default /tmp) on
127.0.0.1 with a one-partition topic and runs wrk with one connection
publishing one record of 256 B (bench/wrk_bench.lua, as
bench/publish_ab.sh does). After a second it records S seconds (default 5)
of kernel tracepoints with `perf record -a` (its file in /dev/shm): the
syscalls of wrk's thread and of pulsed's threads (enter and exit), every
sched_switch, the wake-ups of those threads, and the block layer's request
issue and completion (every process's, so the neighbours' I/O shows).
Nothing in pulsed is changed; the tracepoints add some tens of
microseconds to every request, fast or slow (compare wrk's own line).

Each request is cut at wrk's write() of it; the worker is the pulsed
thread whose epoll_wait returns next. Its phases, in order, in µs:

  req_wait     worker asleep from wrk's write() on (the loopback delivery
               and the wake-up)
  req_rq       worker runnable but waiting for a CPU, until its pwrite()
  parse        worker on CPU until its pwrite() of the batch: epoll return,
               recv, libmicrohttpd, JSON parse, encode
  append       the pwrite()s of the batch (and of an index entry)
  pre_sync     from the last pwrite() to fdatasync()
  fsync_sleep  fdatasync(), worker asleep: the device (data block, inode,
               cache flush: fsync_ios block requests) and the interrupt
  fsync_rq     fdatasync(), worker woken but waiting for a CPU
  fsync_cpu    fdatasync(), worker on CPU (the kernel's own work, the
               virtio notifications)
  answer       fdatasync()'s return until sendmsg() of the answer
  resp_wait    wrk asleep from that sendmsg() on
  resp_rq      wrk runnable but waiting for a CPU
  resp_cpu     wrk on CPU until its read() returns the answer
  total        wrk's write() until that read() returns (what wrk times)

It prints, per phase, the median over all requests, the mean over the
median half (p25..p75) and over the slowest 1 % (by total), the slow 1 %'s
excess over the median half and its share of the total excess; then what
the slow requests had in common: block requests of other processes during
their fdatasync (foreign_ios), run-queue waits of the worker and of wrk
over the whole request, other pulsed threads that ran during it, overlap
with pulsed's background syncs (bg_io: the syncer's checkpoint, index
fdatasync, snapshot file, rename, directory fsync), and how many of the
slow 1 % start in the same tenth of a 100 ms period (a periodic stall
outside pulsed shows as a share well above 0.2). --csv writes every
request's phases and start time. --loop then traces bench_storage's bare
write+fdatasync loop (--only fdatasync) the same way. --rt PRIO runs
pulsed, wrk and the loop under `chrt -f PRIO`, which takes most of the
neighbours' CPU out of a shared machine (not their disk, nor the kernel's
non-preemptible sections); --cpus LIST runs them under `taskset -c LIST`
(one CPU: the worker and wrk wake each other without an interprocessor
interrupt); under --rt the two do not share a CPU otherwise, since a FIFO
task does not preempt its equal. -o passes a setting to pulsed
(-o storage.checkpoint-interval=1h). Needs perf, wrk and root (or
perf_event_paranoid <= -1).
"""
import argparse
import bisect
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ["req_wait", "req_rq", "parse", "append", "pre_sync", "fsync_sleep", "fsync_rq", "fsync_cpu", "answer",
          "resp_wait", "resp_rq", "resp_cpu"]
EXTRA = ["fsync_ios", "foreign_ios", "worker_rq_all", "wrk_rq_all", "other_threads", "bg_io"]
SRV_CALLS = ["epoll_wait", "recvfrom", "pwrite64", "fdatasync", "sendmsg", "fsync", "rename"]
CLI_CALLS = ["write", "read", "epoll_wait"]
LINE = re.compile(r"^\s*(.*?)\s+(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s?(.*)$")


def http(port, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body,
                                 headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def tids(pid):
    return [int(t) for t in os.listdir("/proc/%d/task" % pid)]


def perf_record(out, seconds, srv, cli):
    """perf record -a for seconds; srv, cli: thread ids to follow."""
    ours = srv + cli
    by_pid = " || ".join("common_pid == %d" % t for t in ours)
    wakee = " || ".join("pid == %d" % t for t in ours)
    ev = []
    calls = set(SRV_CALLS if srv else []) | set(CLI_CALLS if cli else [])
    for c in sorted(calls):
        for d in ("enter", "exit"):
            ev += ["-e", "syscalls:sys_%s_%s" % (d, c), "--filter", by_pid]
    ev += ["-e", "sched:sched_wakeup", "--filter", wakee, "-e", "sched:sched_switch",
           "-e", "block:block_rq_issue", "-e", "block:block_rq_complete"]
    subprocess.run(["perf", "record", "-q", "-a", "-m", "8M", "-o", out] + ev + ["--", "sleep", str(seconds)],
                   check=True, stderr=subprocess.DEVNULL)


def events(data):
    """(t_ns, tid, cpu, name, fields) from perf script, in time order."""
    p = subprocess.run(["perf", "script", "-i", data, "--ns", "-F", "comm,tid,cpu,time,event,trace"],
                       capture_output=True, text=True, check=True)
    out = []
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if m:
            t = int(m.group(4)) * 1000000000 + int(m.group(5).ljust(9, "0")[:9])
            out.append((t, int(m.group(2)), int(m.group(3)), m.group(6), m.group(7)))
    out.sort(key=lambda e: e[0])
    return out


def field(s, name):
    m = re.search(r"\b%s[:=]\s*(\S+)" % name, s)
    return m.group(1) if m else None


def ret(s):
    """A sys_exit event's return value."""
    m = re.search(r"(0x[0-9a-f]+|-?\d+)\s*$", s)
    if not m:
        return 0
    v = int(m.group(1), 0)
    return v - (1 << 64) if v >= 1 << 63 else v


class Threads:
    """Per-thread state over time from sched_switch/sched_wakeup: on CPU,
    runnable (woken or preempted, waiting for a CPU), or asleep."""

    def __init__(self, evs, ours):
        self.ch = {t: [] for t in ours}  # tid -> [(t, state)] with state in "run", "wait", "sleep"
        for t, tid, cpu, name, f in evs:
            if name == "sched:sched_switch":
                prev, nxt = int(field(f, "prev_pid")), int(field(f, "next_pid"))
                if prev in self.ch:
                    st = field(f, "prev_state") or "S"
                    self.ch[prev].append((t, "wait" if st.startswith("R") else "sleep"))
                if nxt in self.ch:
                    self.ch[nxt].append((t, "run"))
            elif name == "sched:sched_wakeup":
                pid = int(field(f, "pid"))
                if pid in self.ch and self.ch[pid] and self.ch[pid][-1][1] == "sleep":
                    self.ch[pid].append((t, "wait"))
        self.times = {t: [x[0] for x in v] for t, v in self.ch.items()}

    def split(self, tid, a, b):
        """Microseconds of [a, b] that tid spent running, waiting, asleep."""
        out = {"run": 0.0, "wait": 0.0, "sleep": 0.0}
        ch, ts = self.ch.get(tid, []), self.times.get(tid, [])
        i = bisect.bisect_right(ts, a) - 1
        st = ch[i][1] if i >= 0 else "run"
        t = a
        i += 1
        while i < len(ch) and ch[i][0] < b:
            out[st] += (ch[i][0] - t) / 1000.0
            t, st = ch[i][0], ch[i][1]
            i += 1
        out[st] += (b - t) / 1000.0
        return out


def decompose(evs, srv, cli):
    """Cuts the trace into requests at wrk's write(); returns per-request dicts."""
    srv, cli = set(srv), set(cli)
    reqs, cur = [], None
    # The MHD workers are the threads that wait in epoll; the others' syncs
    # (the syncer's checkpoint: index fdatasync, snapshot file fdatasync,
    # rename, directory fsync) are collected as windows of background I/O.
    workers = {tid for t, tid, cpu, name, f in evs if name == "syscalls:sys_exit_epoll_wait" and tid in srv}
    bg, bg_open = [], {}
    for t, tid, cpu, name, f in evs:
        if tid in srv and tid not in workers and name.startswith("syscalls:sys_"):
            if "_enter_" in name:
                bg_open[tid] = t
            elif tid in bg_open:
                a = bg_open.pop(tid)
                if bg and a - bg[-1][1] < 5000000:
                    bg[-1][1] = t
                else:
                    bg.append([a, t])
    for t, tid, cpu, name, f in evs:
        if name.startswith("block:block_rq_"):
            if cur is not None:
                m = re.search(r"\[(.*)\]\s*$", f)
                cur["blk"].append((t, name.endswith("issue"), m.group(1) if m else ""))
            continue
        if name == "sched:sched_switch":
            nxt = int(field(f, "next_pid"))
            if cur is not None and nxt in srv:
                cur["others"].add(nxt)
            continue
        m = re.match(r"syscalls:sys_(enter|exit)_(\w+)", name)
        if not m:
            continue
        d, call = m.groups()
        if tid in cli:
            if call == "write" and d == "enter":
                cur = {"W": t, "blk": [], "others": set()}
                reqs.append(cur)
            elif cur is not None and call == "read" and d == "exit" and "C" not in cur and "sm0" in cur:
                if ret(f) > 0:
                    cur["C"] = t
                    cur["cli"] = tid
            continue
        if cur is None or tid not in srv:
            continue
        if call == "epoll_wait" and d == "exit" and "ep" not in cur:
            cur["ep"] = t
            cur["worker"] = tid
        elif call == "pwrite64":
            if d == "enter" and "pw0" not in cur:
                cur["pw0"] = t
            if d == "exit":
                cur["pw1"] = t
        elif call == "fdatasync":
            if d == "enter" and "fs0" not in cur:
                cur["fs0"] = t
            elif d == "exit" and "fs0" in cur and "fs1" not in cur:
                cur["fs1"] = t
        elif call == "sendmsg" and d == "enter" and "sm0" not in cur:
            cur["sm0"] = t
    need = ("C", "ep", "pw0", "pw1", "fs0", "fs1", "sm0")
    th = Threads(evs, srv | cli)
    out = [phases(r, th) for r in reqs if all(k in r for k in need) and r["W"] < r["ep"] < r["pw0"] < r["fs0"]]
    starts = [w[0] for w in bg]
    for p in out:
        i = bisect.bisect_right(starts, p["t"] + p["total"] * 1000) - 1
        p["bg_io"] = 1 if i >= 0 and bg[i][1] >= p["t"] else 0
    return out, bg


def phases(r, th):
    """The phases of one request, in microseconds, and where its threads were."""
    us = lambda a, b: (b - a) / 1000.0
    w, c = r["worker"], r["cli"]
    W, C, fs0, fs1 = r["W"], r["C"], r["fs0"], r["fs1"]
    p = {}
    # The request's way in: the worker sleeps in epoll until the loopback
    # delivery wakes it, then waits for a CPU.
    s = th.split(w, W, r["pw0"])
    p["req_wait"], p["req_rq"], p["parse"] = s["sleep"], s["wait"], s["run"]
    p["append"] = us(r["pw0"], r["pw1"])
    p["pre_sync"] = us(r["pw1"], fs0)
    s = th.split(w, fs0, fs1)
    p["fsync_sleep"], p["fsync_rq"], p["fsync_cpu"] = s["sleep"], s["wait"], s["run"]
    blk = [b for b in r["blk"] if fs0 <= b[0] <= fs1]
    p["fsync_ios"] = sum(1 for b in blk if b[1])
    p["foreign_ios"] = sum(1 for b in blk if b[1] and not (b[2] == "MHD-worker" or re.match(r"kworker/\d+:\d+H", b[2])))
    p["answer"] = us(fs1, r["sm0"])
    s = th.split(c, r["sm0"], C)
    p["resp_wait"], p["resp_rq"], p["resp_cpu"] = s["sleep"], s["wait"], s["run"]
    p["total"] = us(W, C)
    p["worker_rq_all"] = th.split(w, W, C)["wait"]
    p["wrk_rq_all"] = th.split(c, W, C)["wait"]
    p["other_threads"] = len(r["others"] - {w})
    p["t"] = W
    return p


def pct(v, q):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def mean(v):
    return sum(v) / len(v) if v else 0.0


def periodicity(slow):
    """Share of the slow requests whose start falls in the busiest tenth of
    a 100 ms period (about 0.1 to 0.2 when they are spread evenly)."""
    if len(slow) < 5:
        return 0.0
    bins = [0] * 10
    for p in slow:
        bins[int(p["t"] // 10000000) % 10] += 1
    return max(bins) / float(len(slow))


def report(rs, title, bg=None):
    rs = sorted(rs, key=lambda p: p["total"])
    n = len(rs)
    if n < 100:
        print("%s: only %d complete requests traced" % (title, n))
        return
    mid = rs[n // 4:3 * n // 4]
    slow = rs[n - max(1, n // 100):]
    tot = [p["total"] for p in rs]
    print("%s: %d requests, total p50 %.0f us, p90 %.0f, p99 %.0f, p99.9 %.0f, max %.0f" % (
        title, n, pct(tot, .5), pct(tot, .9), pct(tot, .99), pct(tot, .999), tot[-1]))
    print("%-14s %9s %9s %9s %9s %7s" % ("phase (us)", "median", "mid-half", "slow 1%", "excess", "share"))
    exc_total = mean([p["total"] for p in slow]) - mean([p["total"] for p in mid])
    for ph in PHASES + ["total"]:
        a = [p[ph] for p in rs]
        ex = mean([p[ph] for p in slow]) - mean([p[ph] for p in mid])
        print("%-14s %9.1f %9.1f %9.1f %9.1f %6.0f%%" % (
            ph, pct(a, .5), mean([p[ph] for p in mid]), mean([p[ph] for p in slow]), ex,
            100.0 * ex / exc_total if exc_total > 0 else 0))
    for k in EXTRA:
        if k in rs[0]:
            print("%-20s mid-half %.2f  slow 1%% %.2f" % (k, mean([p[k] for p in mid]), mean([p[k] for p in slow])))
    print("slow 1%% in the busiest tenth of a 100 ms period: %.2f" % periodicity(slow))
    if bg is not None:
        hit = [p["total"] for p in rs if p["bg_io"]]
        print("background syncs (checkpoints): %d windows, %.2f ms each on average; %d requests overlap them"
              " (%.2f %% of all, %.0f %% of the slow 1 %%), their p50 %.0f us, max %.0f" % (
                  len(bg), mean([(b[1] - b[0]) / 1e6 for b in bg]), len(hit), 100.0 * len(hit) / n,
                  100.0 * mean([p["bg_io"] for p in slow]), pct(hit, .5), max(hit) if hit else 0))


def loop_trace(args):
    """bench_storage's bare loop under the same tracepoints."""
    bs = os.path.join(args.build, "bench", "bench_storage")
    pr = subprocess.Popen(args.rt_cmd + [bs, "--dir", args.dir, "--only", "fdatasync", "--rounds", "1", "--seconds",
                           str(args.seconds + 2)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(1)
    t = tids(pr.pid)
    data = os.path.join(args.ptmp, "loop.data")
    by_pid = " || ".join("common_pid == %d" % x for x in t)
    ev = []
    for c in ("write", "fdatasync"):
        for d in ("enter", "exit"):
            ev += ["-e", "syscalls:sys_%s_%s" % (d, c), "--filter", by_pid]
    ev += ["-e", "sched:sched_wakeup", "--filter", " || ".join("pid == %d" % x for x in t),
           "-e", "sched:sched_switch", "-e", "block:block_rq_issue", "-e", "block:block_rq_complete"]
    subprocess.run(["perf", "record", "-q", "-a", "-m", "8M", "-o", data] + ev + ["--", "sleep", str(args.seconds)],
                   check=True, stderr=subprocess.DEVNULL)
    out = pr.communicate()[0]
    evs = events(data)
    th = Threads(evs, set(t))
    its, w0, f0, ios = [], None, None, 0
    for t_, tid, cpu, name, f in evs:
        if name == "block:block_rq_issue" and f0 is not None:
            ios += 1
        if tid not in t or not name.startswith("syscalls:"):
            continue
        if name == "syscalls:sys_enter_write":
            w0 = t_
        elif name == "syscalls:sys_enter_fdatasync":
            f0, ios = t_, 0
        elif name == "syscalls:sys_exit_fdatasync" and f0 is not None and w0 is not None:
            s = th.split(tid, f0, t_)
            its.append({"t": w0, "total": (t_ - w0) / 1000.0, "fsync": (t_ - f0) / 1000.0, "fsync_sleep": s["sleep"],
                        "fsync_rq": s["wait"], "fsync_cpu": s["run"], "fsync_ios": ios})
            f0 = None
    its.sort(key=lambda p: p["total"])
    n = len(its)
    if n < 100:
        print("bare loop: only %d iterations traced" % n)
        return
    tot = [p["total"] for p in its]
    print("bare loop: %d iterations, write+fdatasync p50 %.0f us, p90 %.0f, p99 %.0f, p99.9 %.0f, max %.0f" % (
        n, pct(tot, .5), pct(tot, .9), pct(tot, .99), pct(tot, .999), tot[-1]))
    mid, slow = its[n // 4:3 * n // 4], its[n - max(1, n // 100):]
    for k in ("fsync", "fsync_sleep", "fsync_rq", "fsync_cpu", "fsync_ios"):
        print("%-14s median %8.1f  mid-half %8.1f  slow 1%% %8.1f" % (
            k, pct([p[k] for p in its], .5), mean([p[k] for p in mid]), mean([p[k] for p in slow])))
    print("slow 1%% in the busiest tenth of a 100 ms period: %.2f" % periodicity(slow))
    for line in out.splitlines():
        if '"bare_' in line:
            print("  (bench_storage, untraced part included: %s)" % line.strip()[:200])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("-o", action="append", default=[], dest="opts")
    ap.add_argument("--rt", type=int, default=0, help="run pulsed, wrk and the loop under chrt -f RT")
    ap.add_argument("--cpus", help="run pulsed, wrk and the loop under taskset -c CPUS")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pulse-tail-", dir=args.dir)
    # perf's own output goes to memory: its writes to the disk under test
    # would show up in the fdatasyncs measured.
    ptmp = tempfile.mkdtemp(prefix="pulse-tail-perf-", dir="/dev/shm" if os.path.isdir("/dev/shm") else args.dir)
    args.ptmp = ptmp
    try:
        run(args, tmp, ptmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ptmp, ignore_errors=True)


def run(args, tmp, ptmp):
    """The traced run of pulsed under wrk, then the loop's."""
    port = 20000 + os.getpid() % 10000
    extra = sum((["-o", o] for o in args.opts), [])
    rt = (["taskset", "-c", args.cpus] if args.cpus else []) + (["chrt", "-f", str(args.rt)] if args.rt else [])
    args.rt_cmd = rt
    srv = subprocess.Popen(rt + [os.path.join(args.build, "pulsed"), "--data-dir", os.path.join(tmp, "data"), "--listen",
                            "127.0.0.1:%d" % port, "-o", "storage.sync-mode=every-write", "-o", "log.level=warn"]
                           + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wrk = None
    try:
        for _ in range(100):
            try:
                http(port, "/readyz")
                break
            except OSError:
                time.sleep(0.1)
        http(port, "/v1/topics", b'{"name":"ab","partitions":1}')
        env = dict(os.environ, BENCH_MODE="post", BENCH_PATH="/v1/topics/ab/records", BENCH_RECORDS="1")
        wrk = subprocess.Popen(rt + ["wrk", "-t1", "-c1", "-d%ds" % (args.seconds + 2), "--timeout", "10s", "-s",
                                os.path.join(HERE, "wrk_bench.lua"), "http://127.0.0.1:%d" % port],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        time.sleep(1)
        s_t, c_t = tids(srv.pid), tids(wrk.pid)
        data = os.path.join(ptmp, "pub.data")
        perf_record(data, args.seconds, s_t, c_t)
        wout = wrk.communicate()[0]
        wrk = None
        for line in wout.splitlines():
            if line.startswith('{"requests"'):
                print("wrk (whole run, traced part included): %s" % line)
    finally:
        if wrk is not None:
            wrk.kill()
        srv.send_signal(signal.SIGTERM)
        srv.wait()
    rs, bg = decompose(events(data), s_t, c_t)
    print("load average %s" % open("/proc/loadavg").read().split()[0])
    report(rs, "pulsed", bg)
    if args.csv:
        with open(args.csv, "w") as f:
            keys = ["t"] + PHASES + ["total"] + EXTRA
            f.write(",".join(keys) + "\n")
            for p in rs:
                f.write(",".join(str(p[k]) for k in keys) + "\n")
    if args.loop:
        loop_trace(args)


if __name__ == "__main__":
    main()
