#!/usr/bin/env python3
"""The measuring half of scripts/bench-peers: every figure's timing, the machine's load while it
ran, the markers, the row-by-row verification, the rejection of unfair rounds, and the CSV,
table and chart. Run by the driver in its venv (psycopg2 and requests come with pgsync,
matplotlib is installed beside it); never run system-wide.

  bench_peers.py snapshot --tool T --t0 EPOCH --ctx K=V...       seconds until T's indices hold every row (one CSV row)
  bench_peers.py verify --tool T [--sample N]                    count + row-by-row comparison, exit 1 on a difference
  bench_peers.py catchup --tool T                                a marker written now, waited for (untimed)
  bench_peers.py load --tool T --ctx K=V... (--bigtx N | -- PGBENCH...)  a load, then the marker's visibility (one CSV row)
  bench_peers.py sustained --ctx K=V... -- PGBENCH...            pgbench alone (no consumer): the tps PostgreSQL sustains
  bench_peers.py sampled --ctx K=V... --figure F -- CMD...       a command (make bench's goals) with the load recorded
  bench_peers.py judge --csv FILE --rounds N                     fills the rejected column; prints the figures short of N accepted rounds
  bench_peers.py report --csv FILE --png FILE --md FILE          medians and spreads, the goals, the chart

Tools: cdcmirror (indices cdcmirror-<table>, all pgbench tables; pgbench_history is keyless and
goes to the dead-letter file) and pgsync (indices pgsync-<table>, the keyed tables). Both also
mirror bench_marker (one row per measured figure, written after the load's last commit) and
bench_bulk (the one-transaction load). The environment gives PEERS_PG_DSN, PEERS_URL (the
engine's node) and PEERS_CDC_DLQ; PEERS_CSV is the CSV the rows are appended to.

Fairness: each contender runs alone (the other one stopped) while its figure is measured; the
1-minute load average (/proc/loadavg) is sampled every 0.5 s from the figure's start to its end
(mean and max in the row), and the load from OUTSIDE the measured stack is taken over the same
span (ext_cpu): the cores the machine spent (user, system and steal time, /proc/stat) less those
the stack spent (the driver and everything it started -- the contenders, pgbench, Redis, this
helper -- and the private servers with their children, /proc/PID/stat with reaped children).
A round's figure is REJECTED when the two contenders' outside loads differ by more than
max(EXT_BOUND_ABS, EXT_BOUND_REL x the larger) (defaults 0.25 cores and 0.25). The load average
counts the contender itself and the work it makes the servers do, so a tool that drives the node
harder would be measured under a higher load by its own doing; what the rule must catch is work
that is neither. Rows written before ext_cpu existed are judged by their load averages: rejected
when they differ by more than max(LOAD_BOUND_ABS, LOAD_BOUND_REL x the larger) (1.0 and 0.25).
"""
import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

import psycopg2
import requests

TABLES = {  # table -> (key column, compared column)
    "pgbench_accounts": ("aid", "abalance"),
    "pgbench_tellers": ("tid", "tbalance"),
    "pgbench_branches": ("bid", "bbalance"),
}
TOOLS = ("cdcmirror", "pgsync")
COLUMNS = ["commit", "machine", "engine", "scale", "round", "position", "figure", "tool", "rows", "seconds",
           "docs_per_s", "offered_tps", "achieved_tps", "marker_s", "behind_at_marker", "equal_s", "ratio",
           "load_mean", "load_max", "rejected", "note", "ext_cpu"]
LOAD_BOUND_ABS = float(os.environ.get("BENCH_PEERS_LOAD_BOUND_ABS", "1.0"))
LOAD_BOUND_REL = float(os.environ.get("BENCH_PEERS_LOAD_BOUND_REL", "0.25"))
EXT_BOUND_ABS = float(os.environ.get("BENCH_PEERS_EXT_BOUND_ABS", "0.25"))
EXT_BOUND_REL = float(os.environ.get("BENCH_PEERS_EXT_BOUND_REL", "0.25"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL = 0.005  # the marker's point read, every 5 ms (a GET by id: cheap beside either tool's work)
_local = threading.local()


def http():
    if not hasattr(_local, "s"):
        _local.s = requests.Session()
    return _local.s


def url():
    return os.environ["PEERS_URL"].rstrip("/")


def pg(readonly=True):
    c = psycopg2.connect(os.environ["PEERS_PG_DSN"])
    c.set_session(readonly=readonly, autocommit=True)
    return c


def index_of(tool, table):
    return f"{tool}-{table}"


def os_count(index, refresh=False):
    if refresh:
        http().post(f"{url()}/{index}/_refresh", timeout=120)
    r = http().get(f"{url()}/{index}/_count", timeout=60)
    if r.status_code in (404, 503):  # not created yet, or its shard not yet started
        return -1
    r.raise_for_status()
    return r.json()["count"]


def os_refresh(index):
    http().post(f"{url()}/{index}/_refresh", timeout=120).raise_for_status()


def os_has(index, doc_id):
    """The marker's point read: a realtime GET by _id (no refresh needed)."""
    r = http().get(f"{url()}/{index}/_doc/{doc_id}", params={"_source": "false"}, timeout=30)
    return r.status_code == 200 and r.json().get("found", False)


def pg_counts(conn):
    with conn.cursor() as cur:
        out = {}
        for t in TABLES:
            cur.execute(f"SELECT count(*) FROM {t}")
            out[t] = cur.fetchone()[0]
        return out


def pg_values(conn, table, keys=None):
    key, col = TABLES[table]
    with conn.cursor() as cur:
        if keys is None:
            cur.execute(f"SELECT {key}, {col} FROM {table}")
        else:
            cur.execute(f"SELECT {key}, {col} FROM {table} WHERE {key} = ANY(%s)", (list(keys),))
        return {int(k): int(v) for k, v in cur.fetchall()}


def os_mget(index, col, keys):
    """{key: value or None (missing)} for keys, by realtime GET (what the index holds)."""
    out = {}
    keys = list(keys)
    for i in range(0, len(keys), 5000):
        chunk = keys[i:i + 5000]
        r = http().post(f"{url()}/{index}/_mget", params={"_source_includes": col},
                        json={"ids": [str(k) for k in chunk]}, timeout=120)
        if r.status_code == 404:
            return {k: None for k in keys}
        r.raise_for_status()
        for d in r.json()["docs"]:
            v = d.get("_source", {}).get(col) if d.get("found") else None
            out[int(d["_id"])] = None if v is None else int(v)
    return out


def os_scan(index, table):
    key, col = TABLES[table]
    os_refresh(index)
    out, after = {}, None
    while True:
        body = {"size": 10000, "sort": [{key: "asc"}], "_source": [key, col], "track_total_hits": False}
        if after is not None:
            body["search_after"] = after
        r = http().post(f"{url()}/{index}/_search", json=body, timeout=300)
        r.raise_for_status()
        hits = r.json()["hits"]["hits"]
        if not hits:
            return out
        for h in hits:
            out[int(h["_source"][key])] = int(h["_source"][col])
        after = hits[-1]["sort"]


def proc_stat(pid):
    """(ppid, clock ticks of the process and of its reaped children) from /proc/PID/stat; None
    when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    f = s[s.rindex(")") + 2:].split()  # f[0] is field 3 (state): ppid is field 4, utime..cstime 14-17
    return int(f[1]), sum(int(x) for x in f[11:15])


def stack_roots():
    """The measured stack's roots: the driver (PEERS_DRIVER_PID: the contenders, pgbench, Redis
    and this helper descend from it), this helper, and the private servers (their pid files
    under TRIBUTARY_TESTENV_HOME, kept only when the process's command line names that home)."""
    roots = {os.getpid()}
    if os.environ.get("PEERS_DRIVER_PID", "").isdigit():
        roots.add(int(os.environ["PEERS_DRIVER_PID"]))
    home = os.environ.get("TRIBUTARY_TESTENV_HOME", "")
    run = os.path.join(home, "run")
    for srv in (os.listdir(run) if home and os.path.isdir(run) else []):
        try:
            with open(os.path.join(run, srv, srv + ".pid")) as f:
                pid = int(f.read().split()[0])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if home.encode() in f.read():
                    roots.add(pid)
        except (OSError, ValueError, IndexError):
            pass
    return roots


def cpu_ticks():
    """(the machine's busy clock ticks: user, nice, system, steal; the stack's: its roots and
    every descendant, each with its reaped children -- a process that ended meanwhile is in its
    parent's)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    machine = v[0] + v[1] + v[2] + v[7]  # guest time is inside user; idle, iowait, irq, softirq are not
    procs = {}
    for e in os.listdir("/proc"):
        if e.isdigit() and (st := proc_stat(e)):
            procs[int(e)] = st
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    seen, todo = set(), [r for r in stack_roots() if r in procs]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(children.get(p, []))
    return machine, sum(procs[p][1] for p in seen)


class Load:
    """The machine's 1-minute load average, sampled every 0.5 s while a figure runs, and the
    cores spent outside the measured stack over the same span (ext_cpu)."""

    def __init__(self):
        self.samples, self._stop = [], threading.Event()
        self._t0, self._ticks0 = time.time(), cpu_ticks()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while True:
            with open("/proc/loadavg") as f:
                self.samples.append(float(f.read().split()[0]))
            if self._stop.wait(0.5):
                return

    def stop(self):
        self._stop.set()
        self._t.join()
        (m0, s0), (m1, s1) = self._ticks0, cpu_ticks()
        secs = max(time.time() - self._t0, 1e-3)
        ext = max((m1 - m0) - (s1 - s0), 0) / CLK_TCK / secs
        return {"load_mean": round(statistics.fmean(self.samples), 2), "load_max": max(self.samples),
                "ext_cpu": round(ext, 2)}


class Profile:
    """cdcmirror's CPU profile (BENCH_PEERS_PROFILE): N seconds from start(), fetched from its
    pprof endpoint in the background -- started when the measured work starts (the snapshot's
    process start, the load's first statement, the big transaction's COMMIT), not before."""

    def __init__(self, a):
        self.url, self.secs, self.out = getattr(a, "profile_url", None), getattr(a, "profile_secs", 0), \
            getattr(a, "profile_out", None)
        self._t = None

    def start(self):
        if not (self.url and self.secs and self.out):
            return
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        deadline = time.time() + 15  # a snapshot's process may not listen yet
        while True:
            try:
                r = requests.get(f"{self.url}/debug/pprof/profile", params={"seconds": self.secs},
                                 timeout=self.secs + 30)
                r.raise_for_status()
                with open(self.out, "wb") as f:
                    f.write(r.content)
                return
            except requests.RequestException as e:
                if time.time() > deadline:
                    print(f"bench-peers: no CPU profile: {e}", file=sys.stderr)
                    return
                time.sleep(0.1)

    def wait(self):
        if self._t:
            self._t.join()


def ctx_of(a):
    return dict(kv.split("=", 1) for kv in (a.ctx or []))


def emit(row):
    path = os.environ["PEERS_CSV"]
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})
    print(json.dumps(row))


def cmd_snapshot(a):
    """Started by the driver just before the tool; the load is sampled until the snapshot is in."""
    load = Load()
    prof = Profile(a)
    prof.start()
    conn = pg()
    want = pg_counts(conn)
    total = sum(want.values())
    deadline = a.t0 + a.timeout
    while True:
        have = {t: os_count(index_of(a.tool, t)) for t in TABLES}
        now = time.time()
        if all(have[t] >= want[t] for t in TABLES):
            secs = now - a.t0
            emit({**ctx_of(a), "tool": a.tool, "rows": total, "seconds": round(secs, 3),
                  "docs_per_s": round(total / secs, 1), **load.stop()})
            prof.wait()
            return 0
        if now > deadline:
            emit({**ctx_of(a), "tool": a.tool, "rows": total, "note": "snapshot not complete", **load.stop()})
            print(f"bench-peers: {a.tool}: snapshot not complete after {a.timeout}s: {have} of {want}",
                  file=sys.stderr)
            return 1
        time.sleep(0.25)


def cmd_verify(a):
    conn = pg()
    bad = 0
    for t in TABLES:
        idx = index_of(a.tool, t)
        os_refresh(idx)
        want_n = pg_counts(conn)[t]
        have_n = os_count(idx)
        if want_n != have_n:
            print(f"bench-peers: verify {a.tool} {t}: index has {have_n} documents, table {want_n} rows",
                  file=sys.stderr)
            bad += 1
        if a.sample and t == "pgbench_accounts" and want_n > a.sample:
            keys = random.Random(want_n).sample(range(1, want_n + 1), a.sample)
            want, have, how = pg_values(conn, t, keys), os_mget(idx, TABLES[t][1], keys), f"sample of {a.sample}"
        else:
            want, have, how = pg_values(conn, t), os_scan(idx, t), "every row"
        diff = [k for k in want if have.get(k) != want[k]] + [k for k in have if k not in want]
        if diff:
            print(f"bench-peers: verify {a.tool} {t}: {len(diff)} rows differ ({how}), e.g. keys {sorted(diff)[:5]}",
                  file=sys.stderr)
            bad += 1
        else:
            print(f"bench-peers: verify {a.tool} {t}: {have_n} documents, {len(want)} rows equal ({how})",
                  file=sys.stderr)
    return 1 if bad else 0


def write_marker(conn=None):
    """A marker row committed now, on conn (a connection opened before the load, so that its set-up
    is not timed) or a new one; its id (the _id both tools give its document)."""
    mid = time.time_ns() // 1000
    c = conn or pg(readonly=False)
    with c.cursor() as cur:
        cur.execute("INSERT INTO bench_marker (id, at) VALUES (%s, now())", (mid,))
    if conn is None:
        c.close()
    return mid


def wait_marker(tool, mid, deadline, poll=POLL):
    idx = index_of(tool, "bench_marker")
    while time.time() < deadline:
        try:
            if os_has(idx, mid):
                return time.time()
        except requests.RequestException:
            pass
        time.sleep(poll)
    return None


def cmd_catchup(a):
    """Untimed: the marker, and then (a tool may let the marker overtake earlier changes) every
    account the last pgbench run changed, every teller and branch, and bench_bulk's count equal."""
    mid = write_marker()
    t0 = time.time()
    deadline = t0 + a.timeout
    seen = wait_marker(a.tool, mid, deadline, poll=0.1)  # untimed: no need to poll hard
    conn = pg()
    _, want = behind_pgbench(conn, a.tool, 0)
    while seen is not None and time.time() < deadline:
        n, have = bulk_counts(conn, a.tool)
        if have >= n and count_behind(a.tool, want) == 0:
            print(f"bench-peers: {a.tool} caught up in {time.time() - t0:.1f} s (marker {seen - t0:.1f} s)",
                  file=sys.stderr)
            return 0
        time.sleep(0.5)
    print(f"bench-peers: {a.tool} did not catch up within {a.timeout}s", file=sys.stderr)
    return 1


def behind_pgbench(conn, tool, since):
    """Rows whose value in the tool's index differs from the table's (the accounts the load
    changed, every teller and branch): (behind, want) -- want is reused by the verification."""
    with conn.cursor() as cur:
        cur.execute("SELECT DISTINCT aid FROM pgbench_history WHERE mtime >= to_timestamp(%s)", (since,))
        aids = [r[0] for r in cur.fetchall()]
    want = {"pgbench_accounts": pg_values(conn, "pgbench_accounts", aids),
            "pgbench_tellers": pg_values(conn, "pgbench_tellers"),
            "pgbench_branches": pg_values(conn, "pgbench_branches")}
    return count_behind(tool, want), want


def count_behind(tool, want):
    n = 0
    for t, vals in want.items():
        have = os_mget(index_of(tool, t), TABLES[t][1], vals)
        n += sum(1 for k in vals if have.get(k) != vals[k])
    return n


def bulk_counts(conn, tool):
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM bench_bulk")
        n = cur.fetchone()[0]
    return n, max(os_count(index_of(tool, "bench_bulk"), refresh=True), 0)


def cmd_load(a):
    """The load (a pgbench run, or one transaction of N new rows), then the marker written last:
    seconds from the load's last commit until the marker is visible in the tool's index, the rows
    behind at that moment, then the verification (outside the timing)."""
    ctx = ctx_of(a)
    conn = pg()
    marker_conn = pg(readonly=False)
    load = Load()
    prof = Profile(a)
    t_start = time.time()
    row = {**ctx, "tool": a.tool}
    if a.bigtx:
        with pg(readonly=False) as w, w.cursor() as cur:
            cur.execute("SELECT coalesce(max(id), 0) FROM bench_bulk")
            base = cur.fetchone()[0]
            cur.execute("BEGIN")
            cur.execute("INSERT INTO bench_bulk (id, v) SELECT g, g * 7 FROM generate_series(%s, %s) g",
                        (base + 1, base + a.bigtx))
            cur.execute("COMMIT")
        prof.start()  # the tool sees nothing of the transaction before its COMMIT
        row["rows"] = a.bigtx
    else:
        prof.start()
        with open(a.log, "w") as logf:
            rc = subprocess.run(a.pgbench, stdout=logf, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            print(f"bench-peers: pgbench exited {rc} (see {a.log})", file=sys.stderr)
            load.stop()
            return 2
        with open(a.log) as f:
            for line in f:
                if line.startswith("tps = "):
                    row["achieved_tps"] = round(float(line.split()[2]), 1)
                    break
    t_end = time.time()  # the load's last commit is behind us
    mid = write_marker(marker_conn)
    seen = wait_marker(a.tool, mid, t_end + a.timeout)
    row.update(load.stop())
    row["seconds"] = round(t_end - t_start, 2)
    if seen is None:
        row["note"] = f"marker not visible within {a.timeout:.0f}s"
    else:
        row["marker_s"] = round(seen - t_end, 3)
    # the rows behind at the marker's visibility, then the verification: outside the timing
    if a.bigtx:
        n, have = bulk_counts(conn, a.tool)
        row["behind_at_marker"] = n - have
        deadline = time.time() + a.timeout
        while have < n and time.time() < deadline:
            time.sleep(0.5)
            n, have = bulk_counts(conn, a.tool)
        ok = have == n
        if ok:  # values of a sample of the rows
            with conn.cursor() as cur:
                cur.execute("SELECT id, v FROM bench_bulk ORDER BY random() LIMIT 2000")
                want = {int(k): int(v) for k, v in cur.fetchall()}
            got = os_mget(index_of(a.tool, "bench_bulk"), "v", want)
            ok = all(got.get(k) == v for k, v in want.items())
    else:
        behind, want = behind_pgbench(conn, a.tool, t_start - 1)
        row["behind_at_marker"] = behind
        row["rows"] = len(want["pgbench_accounts"])
        deadline = time.time() + a.timeout
        while behind and time.time() < deadline:
            time.sleep(0.25)
            behind = count_behind(a.tool, want)
        ok = behind == 0
    row["equal_s"] = round(time.time() - t_end, 2) if ok else ""
    if not ok:
        row["note"] = (row.get("note", "") + " index not equal to the table").strip()
    emit(row)
    prof.wait()
    return 0 if ok and seen is not None else 1


def cmd_sustained(a):
    """pgbench with no consumer running: the tps this machine's PostgreSQL sustains."""
    load = Load()
    t0 = time.time()
    out = subprocess.run(a.pgbench, capture_output=True, text=True)
    tps = None
    for line in out.stdout.splitlines():
        if line.startswith("tps = "):
            tps = round(float(line.split()[2]), 1)
            break
    if out.returncode != 0 or tps is None:
        print(out.stdout + out.stderr, file=sys.stderr)
        return 2
    emit({**ctx_of(a), "tool": "postgres", "seconds": round(time.time() - t0, 1), "achieved_tps": tps, **load.stop()})
    return 0


def cmd_sampled(a):
    """A command (one of make bench's goal benchmarks) run with the load recorded; its ratios are
    read from its output by the patterns given as NAME=REGEX (first group)."""
    import re
    load = Load()
    t0 = time.time()
    out = subprocess.run(a.command, capture_output=True, text=True)
    sys.stderr.write(out.stdout[-4000:] + out.stderr[-2000:])
    if a.tee:
        with open(a.tee, "w") as f:
            f.write(out.stdout + out.stderr)
    ld = load.stop()
    rc = out.returncode
    for spec in a.ratio:
        name, rx = spec.split("=", 1)
        vals = []
        for line in out.stdout.splitlines():
            m = re.search(rx, line)
            if m:  # the benchmark's name (engine, shape) beside its ratio
                vals.append((float(m.group(1)), line.split()[0] if line.startswith("Benchmark") else line.split(":")[0]))
        for i, (v, where) in enumerate(vals):
            emit({**ctx_of(a), "figure": name, "tool": "cdcmirror", "round": i + 1, "ratio": v,
                  "seconds": round(time.time() - t0, 1), "note": where, **ld})
        if not vals:
            emit({**ctx_of(a), "figure": name, "tool": "cdcmirror", "note": f"no figure (exit {rc})", **ld})
    return 0


# --- judging and reporting -----------------------------------------------------------------------
def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def bound(a, b):
    return max(LOAD_BOUND_ABS, LOAD_BOUND_REL * max(a, b))


def unfair(c, p):
    """Whether two contenders' rows of a round's figure were measured under loads too different:
    their outside loads (ext_cpu), or for rows without it their load averages."""
    ce, pe = fnum(c.get("ext_cpu")), fnum(p.get("ext_cpu"))
    if ce is not None and pe is not None:
        return abs(ce - pe) > max(EXT_BOUND_ABS, EXT_BOUND_REL * max(ce, pe))
    cl, pl = fnum(c["load_mean"]) or 0, fnum(p["load_mean"]) or 0
    return abs(cl - pl) > bound(cl, pl)


def rule_text(rows):
    """The rejection rule the rows were judged by, for the report's header."""
    if any(fnum(r.get("ext_cpu")) is not None for r in rows):
        return (f"A round's figure is rejected when the load from outside the measured stack (ext_cpu: the "
                f"cores the machine spent less those of the contenders, pgbench, Redis and the servers) "
                f"differs between the contenders by more than max({EXT_BOUND_ABS} cores, {EXT_BOUND_REL} × the "
                f"larger); the 1-min load averages are shown beside it")
    return (f"A round's figure is rejected when the contenders' mean 1-min load averages differ by more "
            f"than max({LOAD_BOUND_ABS}, {LOAD_BOUND_REL} × the larger)")


def pairs(rows):
    """(engine, scale, round, figure) -> {tool: row} for the contenders' rows."""
    out = {}
    for r in rows:
        if r["tool"] in TOOLS and r["round"] and not r["figure"].startswith("goal:"):
            out.setdefault((r["engine"], r["scale"], r["round"], r["figure"]), {})[r["tool"]] = r
    return out


def cmd_judge(a):
    rows = read_rows(a.csv)
    for key, by in pairs(rows).items():
        if len(by) == 2:
            rej = "1" if unfair(by["cdcmirror"], by["pgsync"]) else "0"
        else:
            rej = "0"  # one contender (pgsync cannot target the engine): nothing to be unfair to
        for r in by.values():
            r["rejected"] = rej
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    short = {}
    for (eng, scale, rnd, fig), by in pairs(rows).items():
        if a.engine and eng != a.engine or a.scale and scale != a.scale:
            continue
        k = (eng, scale, fig)
        short.setdefault(k, 0)
        if all(r["rejected"] == "0" for r in by.values()):
            short[k] += 1
    missing = [f"{e}/s{s}/{f}: {n} accepted" for (e, s, f), n in sorted(short.items()) if n < a.rounds]
    print(len(missing))
    for m in missing:
        print(m, file=sys.stderr)
    return 0


def fnum(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def spread(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1], "n": len(vals)}


def fmt(s, unit="", digits=1):
    if not s:
        return "n/a"
    return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}–{s['max']:.{digits}f}] (n={s['n']})"


GOALS = {  # figure -> (metric, goal text, the goal's bound (the chart's line), test)
    "snapshot": ("docs/s ratio cdcmirror/pgsync", "≥ 5×", 5, lambda r: r >= 5),
    "marker@max": ("marker s ratio pgsync/cdcmirror", "≥ 10× and cdcmirror ≤ 2 s", 10, lambda r: r >= 10),
    "goal:runner/ceiling": ("runner/raw _bulk", "≥ 0.9", 0.9, lambda r: r >= 0.9),
    "goal:coalesced/explicit": ("explicit ns / single ns", "≥ 0.8", 0.8, lambda r: r >= 0.8),
    "goal:fresh/reused": ("fresh VM / reused VM time", "≤ 1.25", 1.25, lambda r: r <= 1.25),
}


def converged(r, never):
    """A load figure's convergence: the marker's visibility when nothing was behind it then; else
    (the tool let the marker overtake earlier changes) the time the verification found the index
    equal -- the later of the two, and marked."""
    m, b, e = fnum(r["marker_s"]), fnum(r["behind_at_marker"]), fnum(r["equal_s"])
    if m is None:
        return never, True
    if b:
        return (e if e is not None else never), True
    return m, False


def load_cell(cell, tool):
    """A contender's load averages, and (rows that have it) its outside load in cores."""
    ext = cell.get(tool + "_ext")
    return fmt(cell.get(tool + "_load"), "", 1) + (f"; outside {fmt(ext, '', 2)}" if ext else "")


def summarize(rows, never):
    """The table: one line per (engine, scale, figure) with medians and spreads of accepted rounds."""
    lines = []
    chart = {"snap": [], "marker": [], "goals": [], "never": never}
    figs = {}
    for (eng, scale, rnd, fig), by in pairs(rows).items():
        figs.setdefault((eng, int(scale or 0), fig), []).append(by)
    for (eng, scale, fig), rounds in sorted(figs.items()):
        acc = [by for by in rounds if all(r.get("rejected") != "1" for r in by.values())]
        rej = len(rounds) - len(acc)
        cell = {}
        snap = fig == "snapshot"
        for t in TOOLS:
            rs = [by[t] for by in acc if t in by]
            if not rs:
                continue
            if snap:
                cell[t] = spread([fnum(r["docs_per_s"]) for r in rs])
            else:
                conv = [converged(r, never) for r in rs]
                cell[t] = spread([c for c, _ in conv])
                cell[t + "_overtaken"] = sum(1 for _, o in conv if o)
            cell[t + "_load"] = spread([fnum(r["load_mean"]) for r in rs])
            cell[t + "_ext"] = spread([fnum(r.get("ext_cpu")) for r in rs])
            cell[t + "_behind"] = spread([fnum(r["behind_at_marker"]) for r in rs])
            cell[t + "_tps"] = spread([fnum(r["achieved_tps"]) for r in rs])
        ratios = []
        for by in acc:
            if len(by) == 2:
                c, p = by["cdcmirror"], by["pgsync"]
                if snap and fnum(c["docs_per_s"]) and fnum(p["docs_per_s"]):
                    ratios.append(fnum(c["docs_per_s"]) / fnum(p["docs_per_s"]))
                elif not snap:
                    ratios.append(converged(p, never)[0] / max(converged(c, never)[0], POLL))
        rs = spread(ratios)
        goal = ""
        if snap and scale in (5, 20) and rs:
            goal = "met" if rs["median"] >= 5 else "MISSED"
            goal = f"≥5×: {goal}"
        if fig.endswith("@max") and "cdcmirror" in cell and cell["cdcmirror"]:
            ok2 = cell["cdcmirror"]["median"] <= 2
            ok10 = rs is not None and rs["median"] >= 10
            goal = f"≤2 s: {'met' if ok2 else 'MISSED'}" + (f"; ≥10×: {'met' if ok10 else 'MISSED'}" if rs else "")
        unit = " docs/s" if snap else " s"

        def val(t):
            if t not in cell:
                return "— (every round rejected)" if any(t in by for by in rounds) else "— (not run)"
            o = cell.get(t + "_overtaken")
            return fmt(cell.get(t), unit, 0 if snap else 3) + (f" ({o} overtaken*)" if o else "")
        lines.append((eng, scale, fig, val("cdcmirror"), val("pgsync"),
                      fmt(rs, "×", 2), load_cell(cell, "cdcmirror"), load_cell(cell, "pgsync"),
                      fmt(cell.get("cdcmirror_behind"), "", 0), fmt(cell.get("pgsync_behind"), "", 0),
                      fmt(cell.get("cdcmirror_tps"), "", 0), rej, goal))
        entry = (eng, scale, fig, cell, rs)
        (chart["snap"] if snap else chart["marker"]).append(entry)
    goals = {}  # (goal, the benchmark's case: engine, shape, rtt) -> its rounds
    for r in rows:
        if r["figure"].startswith("goal:") and fnum(r["ratio"]) is not None:
            case = r["note"].rstrip(":").split("-")[0] if r["note"] else ""
            d = goals.setdefault((r["figure"], case), {"vals": [], "load": []})
            d["vals"].append(fnum(r["ratio"]))
            d["load"].append(fnum(r["load_mean"]))
    glines = []
    for (g, case), d in sorted(goals.items()):
        s = spread(d["vals"])
        met = GOALS[g][3](s["median"]) if g in GOALS else None
        glines.append((g, case, GOALS.get(g, ("", ""))[1], fmt(s, "", 2), fmt(spread(d["load"]), "", 1),
                       "" if met is None else ("met" if met else "MISSED")))
        chart["goals"].append((g, s, case))
    return lines, glines, chart


def cmd_report(a):
    rows = read_rows(a.csv)
    lines, glines, chart = summarize(rows, a.never)
    meta = {r["commit"] for r in rows if r["commit"]}, {r["machine"] for r in rows if r["machine"]}
    out = []
    out.append(f"# bench-peers: {a.title}\n")
    out.append(f"Commit {', '.join(sorted(meta[0]))}; machine {', '.join(sorted(meta[1]))}. Generated by "
               f"scripts/bench-peers from {os.path.basename(a.csv)} (never edited by hand). Cells: median "
               f"[min–max] (n = accepted rounds). {rule_text(rows)}.\n")
    out.append("| engine | scale | figure | cdcmirror | pgsync | ratio | load cdcmirror (1-min average; outside the stack: cores) | load pgsync | "
               "behind at marker (cdcmirror) | behind (pgsync) | achieved tps (cdcmirror run) | rejected | goal |")
    out.append("|" + "---|" * 13)
    for ln in lines:
        out.append("| " + " | ".join(str(x) for x in ln) + " |")
    out.append("\nsnapshot: documents/s until the tool's indices hold every row (pgsync: bootstrap included); "
               "ratio cdcmirror/pgsync. Loads: seconds from the load's last commit until the marker row written "
               "after it is visible by GET in the tool's index; ratio pgsync/cdcmirror. *overtaken: in that many "
               "rounds the marker was visible while rows of the load were still behind (the tool does not keep "
               "commit order); there the figure is the time the untimed verification found the index equal "
               "(`equal_s`, its own reading time included), and \"behind at marker\" says how many rows the marker "
               "overtook.\n")
    sus = {}
    for r in rows:
        if r["tool"] == "postgres" and fnum(r["achieved_tps"]) is not None:
            sus.setdefault((r["engine"], int(r["scale"]), r["figure"]), []).append(r)
    if sus:
        out.append("| engine | scale | PostgreSQL alone (no consumer), unthrottled: the @max loads' offered rate | tps | load |")
        out.append("|---|---|---|---|---|")
        for (e, sc, f), rs in sorted(sus.items()):
            out.append(f"| {e} | {sc} | {f} | {fmt(spread([fnum(r['achieved_tps']) for r in rs]), '', 0)} | "
                       f"{fmt(spread([fnum(r['load_mean']) for r in rs]), '', 1)} |")
        out.append("")
    if glines:
        out.append("| goal benchmark (make bench) | case | goal | ratio | load | |")
        out.append("|---|---|---|---|---|---|")
        for g in glines:
            out.append("| " + " | ".join(str(x) for x in g) + " |")
    if a.profiles and os.path.isdir(a.profiles):
        tops = sorted(f for f in os.listdir(a.profiles) if f.endswith(".top.txt"))
        if tops:
            out.append("\n## cdcmirror CPU profiles (BENCH_PEERS_PROFILE), top entries\n")
        for f in tops:
            with open(os.path.join(a.profiles, f)) as fh:
                lines_ = fh.read().splitlines()
            head = [ln for ln in lines_ if ln.startswith(("Duration", "Showing nodes"))]
            body = [ln for ln in lines_ if ln.strip() and ln.strip()[0].isdigit()][:12]
            out.append(f"{f[:-8]}: " + "; ".join(head) + "\n\n```\n" + "\n".join(body) + "\n```")
    text = "\n".join(out) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.png:
        chart_png(chart, a.png, a.title)
    return 0


def chart_png(chart, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    gl = chart["goals"]
    panels = [1, 2] + ([1] if gl else [])  # no goal benchmarks in the run: no empty panel
    fig, axes = plt.subplots(1, len(panels), figsize=(5.7 * len(panels), 5.6), gridspec_kw={"width_ratios": panels})
    colors = {"cdcmirror": "tab:blue", "pgsync": "tab:orange"}
    short = {"opensearch": "OpenSearch", "elasticsearch": "Elasticsearch"}

    def bars(ax, entries, ylabel, label_fmt, w=0.38):
        present = [t for t in TOOLS if any(t in cell for _, _, _, cell, _ in entries)]
        for i, tool in enumerate(present):  # side by side around the tick; one contender centred on it
            xs, ys, lo, hi = [], [], [], []
            for x, (_, _, _, cell, _) in enumerate(entries):
                s = cell.get(tool)
                if s:
                    xs.append(x + (i - (len(present) - 1) / 2) * w)
                    ys.append(s["median"])
                    lo.append(s["median"] - s["min"])
                    hi.append(s["max"] - s["median"])
            b = ax.bar(xs, ys, w, yerr=[lo, hi], capsize=3, label=tool, color=colors[tool])
            ax.bar_label(b, labels=[label_fmt(y) for y in ys], fontsize=7, padding=2)
        ax.set_ylabel(ylabel, fontsize=8)

    snap = chart["snap"]
    bars(axes[0], snap, "documents per second (median; bars: min–max)", lambda y: f"{y:,.0f}")
    axes[0].set_xticks(range(len(snap)), [f"{short.get(e, e)}\nscale {s}" + (f"\ncdcmirror {rs['median']:.1f}× pgsync" if rs else "")
                                          for e, s, _, _, rs in snap], fontsize=8)
    axes[0].set_title("Initial snapshot (goal: ≥ 5× pgsync)", fontsize=9)
    axes[0].set_xlim(-0.6, len(snap) - 0.4)
    for x, (e, s, _, cell, _) in enumerate(snap):
        if not any(t in cell for t in TOOLS):
            axes[0].text(x, 0.5, "every round rejected", ha="center", va="center", fontsize=8,
                         transform=axes[0].get_xaxis_transform())
        p = cell.get("pgsync")
        if p and s in (5, 20):
            axes[0].hlines(5 * p["median"], x - 0.4, x + 0.4, colors="green", linestyles="--", linewidth=1,
                           label="goal: 5× pgsync" if x == 0 else None)
    if axes[0].get_legend_handles_labels()[0]:  # every round rejected: no bars, no legend
        axes[0].legend(fontsize=8)
    mk = chart["marker"]
    # A log scale from 10 ms: cdcmirror's markers (tens of ms) and pgsync's (seconds to never) both show.
    bars(axes[1], mk, "seconds from the load's last commit until the marker is visible (log)",
         lambda y: "never" if y >= chart["never"] else f"{y:.3f}" if y < 1 else f"{y:.3g}")
    axes[1].set_yscale("log")
    axes[1].set_ylim(0.01, 3e4)  # room above "never" (the timeout) for the legend
    axes[1].axhline(2, color="green", linestyle="--", linewidth=1, label="goal at the sustained rate (@max): ≤ 2 s")
    for x, (e, s, f, cell, _) in enumerate(mk):
        p = cell.get("pgsync")
        if f.endswith("@max") and p:
            axes[1].hlines(p["median"] / 10, x - 0.4, x + 0.4, colors="red", linestyles=":", linewidth=1,
                           label="goal at @max: ≤ pgsync / 10" if not any(ff.endswith("@max") for _, _, ff, _, _ in mk[:x]) else None)
    axes[1].set_xticks(range(len(mk)), [f"{short.get(e, e)} s{s}\n{f}" + (f"\n(pgsync {o} overtaken)" if (o := cell.get("pgsync_overtaken")) else "")
                                        for e, s, f, cell, _ in mk], fontsize=7)
    axes[1].set_title("Convergence: marker row visible by GET (polled every 5 ms); where pgsync's marker\n"
                      "overtook rows of the load, its figure is the time its index was found equal", fontsize=9)
    axes[1].legend(fontsize=7, loc="upper left", ncol=2)
    if gl:
        ax = axes[2]
        for x, (g, s, case) in enumerate(gl):
            met = GOALS[g][3](s["median"]) if g in GOALS else True
            ax.bar([x], [s["median"]], 0.6, yerr=[[s["median"] - s["min"]], [s["max"] - s["median"]]], capsize=3,
                   color="tab:blue" if met else "tab:red")
            ax.text(x, s["max"], f"{s['median']:.2f}", ha="center", va="bottom", fontsize=8)
            if g in GOALS:
                ax.hlines(GOALS[g][2], x - 0.4, x + 0.4, colors="green", linestyles="--", linewidth=1)
        labels = []
        for g, _, case in gl:
            c = case.replace("Benchmark", "").replace("RunnerVsCeiling/", "").replace("Coalescing/", "")
            c = c.replace("elasticsearch", "ES").replace("opensearch", "OS").replace("MergeRatios", "")
            labels.append(f"{g[5:]}\n{c}\ngoal {GOALS[g][1] if g in GOALS else ''}".rstrip())
        ax.set_xticks(range(len(gl)), labels, fontsize=6, rotation=35, ha="right")
        ax.set_title("make bench goals, same run (red: missed; dashed: the goal)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=100)
    print(f"bench-peers: wrote {path}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("--tool", choices=TOOLS, required=True)
    s.add_argument("--t0", type=float, required=True)
    s.add_argument("--timeout", type=float, default=3600)
    s.add_argument("--ctx", nargs="*")
    v = sub.add_parser("verify")
    v.add_argument("--tool", choices=TOOLS, required=True)
    v.add_argument("--sample", type=int, default=0)
    c = sub.add_parser("catchup")
    c.add_argument("--tool", choices=TOOLS, required=True)
    c.add_argument("--timeout", type=float, default=1800)
    ld = sub.add_parser("load")
    ld.add_argument("--tool", choices=TOOLS, required=True)
    ld.add_argument("--timeout", type=float, default=600)
    ld.add_argument("--log", default="/dev/null")
    ld.add_argument("--bigtx", type=int, default=0)
    ld.add_argument("--ctx", nargs="*")
    for sp in (s, ld):  # cdcmirror's CPU profile of the measured work (BENCH_PEERS_PROFILE)
        sp.add_argument("--profile-url")
        sp.add_argument("--profile-secs", type=int, default=0)
        sp.add_argument("--profile-out")
    ld.add_argument("pgbench", nargs=argparse.REMAINDER)
    su = sub.add_parser("sustained")
    su.add_argument("--ctx", nargs="*")
    su.add_argument("pgbench", nargs=argparse.REMAINDER)
    sa = sub.add_parser("sampled")
    sa.add_argument("--ctx", nargs="*")
    sa.add_argument("--ratio", action="append", default=[])
    sa.add_argument("--tee")
    sa.add_argument("command", nargs=argparse.REMAINDER)
    j = sub.add_parser("judge")
    j.add_argument("--csv", required=True)
    j.add_argument("--rounds", type=int, default=3)
    j.add_argument("--engine")
    j.add_argument("--scale")
    r = sub.add_parser("report")
    r.add_argument("--csv", required=True)
    r.add_argument("--png")
    r.add_argument("--md")
    r.add_argument("--title", default="cdcmirror vs pgsync")
    r.add_argument("--profiles", help="a directory of `go tool pprof -top` outputs (*.top.txt)")
    r.add_argument("--never", type=float, default=600, help="the figure of a marker never seen")
    a = p.parse_args()
    for name in ("pgbench", "command"):
        if hasattr(a, name):
            v = getattr(a, name)
            setattr(a, name, v[1:] if v[:1] == ["--"] else v)
    return {"snapshot": cmd_snapshot, "verify": cmd_verify, "catchup": cmd_catchup, "load": cmd_load,
            "sustained": cmd_sustained, "sampled": cmd_sampled, "judge": cmd_judge,
            "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
