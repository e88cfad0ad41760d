#!/usr/bin/env python3
"""The measuring half of scripts/bench-peers: snapshot timing, row-by-row comparison, time to
converge after a load, and the CSV and chart. Run by the driver in its venv (psycopg2 and
requests come with pgsync, matplotlib is installed beside it); never run system-wide.

  bench_peers.py snapshot --tool T --t0 EPOCH [--timeout S]   seconds until T's indices hold every row
  bench_peers.py verify --tool T [--sample N]                 count + row-by-row comparison, exit 1 on a difference
  bench_peers.py converge --log F [--timeout S] -- PGBENCH... the load, then both tools polled at once until each equals the table
  bench_peers.py report --csv FILE --png FILE                 ratios on stdout, the chart from the CSV

Tools: cdcmirror (indices cdcmirror-<table>, all four pgbench tables; pgbench_history is keyless
and goes to the dead-letter file, one line per row) and pgsync (indices pgsync-<table>, the three
keyed tables). The environment gives PEERS_PG_DSN, PEERS_OS_URL and PEERS_CDC_DLQ.

Equality is checked on the values the loads change: abalance per aid, tbalance per tid, bbalance
per bid, plus the document count of every index. Verify reads every document (search_after on
the key) or a random sample of N keys (mget); converge re-reads, on every poll, the keys that
still differ and, once none does, every key pgbench_history names (the accounts any load
touched) and the whole tellers and branches tables, so a tool is equal only when a full pass
over everything that changed finds no difference.
"""
import argparse
import csv
import json
import os
import random
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
_local = threading.local()


def http():
    """A requests session per thread (converge polls the tools from two threads)."""
    if not hasattr(_local, "s"):
        _local.s = requests.Session()
    return _local.s


def os_url():
    return os.environ["PEERS_OS_URL"].rstrip("/")


def pg():
    c = psycopg2.connect(os.environ["PEERS_PG_DSN"])
    c.set_session(readonly=True, autocommit=True)
    return c


def index_of(tool, table):
    return f"{tool}-{table}"


def os_count(index):
    r = http().get(f"{os_url()}/{index}/_count", timeout=60)
    if r.status_code in (404, 503):  # not created yet, or its shard not yet started
        return -1
    r.raise_for_status()
    return r.json()["count"]


def os_refresh(index):
    http().post(f"{os_url()}/{index}/_refresh", timeout=120).raise_for_status()


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


def os_mget(index, table, keys):
    """{key: value or None (missing)} for keys, by realtime GET (what the index holds)."""
    _, col = TABLES[table]
    out = {}
    keys = list(keys)
    for i in range(0, len(keys), 5000):
        chunk = keys[i:i + 5000]
        r = http().post(f"{os_url()}/{index}/_mget", params={"_source_includes": col},
                      json={"ids": [str(k) for k in chunk]}, timeout=120)
        r.raise_for_status()
        for d in r.json()["docs"]:
            v = d.get("_source", {}).get(col) if d.get("found") else None
            out[int(d["_id"])] = None if v is None else int(v)
    return out


def os_scan(index, table):
    """Every document's (key, value), by search_after on the key, after a refresh."""
    key, col = TABLES[table]
    os_refresh(index)
    out, after = {}, None
    while True:
        body = {"size": 10000, "sort": [{key: "asc"}], "_source": [key, col], "track_total_hits": False}
        if after is not None:
            body["search_after"] = after
        r = http().post(f"{os_url()}/{index}/_search", json=body, timeout=300)
        r.raise_for_status()
        hits = r.json()["hits"]["hits"]
        if not hits:
            return out
        for h in hits:
            out[int(h["_source"][key])] = int(h["_source"][col])
        after = hits[-1]["sort"]


def dlq_history_lines():
    """Dead letters of pgbench_history in cdcmirror's dead-letter file (JSON lines)."""
    path = os.environ.get("PEERS_CDC_DLQ", "")
    n = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if "pgbench_history" in line:
                    n += 1
    except FileNotFoundError:
        pass
    return n


def tables_of(tool):
    return list(TABLES)


def cmd_snapshot(a):
    conn = pg()
    want = pg_counts(conn)
    total = sum(want.values())
    deadline = a.t0 + a.timeout
    while True:
        have = {t: os_count(index_of(a.tool, t)) for t in TABLES}
        now = time.time()
        if all(have[t] >= want[t] for t in TABLES):
            secs = now - a.t0
            print(json.dumps({"tool": a.tool, "rows": total, "seconds": round(secs, 3),
                              "docs_per_s": round(total / secs, 1)}))
            return 0
        if now > deadline:
            print(f"bench-peers: {a.tool}: snapshot not complete after {a.timeout}s: {have} of {want}",
                  file=sys.stderr)
            return 1
        time.sleep(0.5)


def cmd_verify(a):
    conn = pg()
    bad = 0
    for t in tables_of(a.tool):
        idx = index_of(a.tool, t)
        os_refresh(idx)
        want_n = pg_counts(conn)[t]
        have_n = os_count(idx)
        if want_n != have_n:
            print(f"bench-peers: verify {a.tool} {t}: index has {have_n} documents, table {want_n} rows",
                  file=sys.stderr)
            bad += 1
        if a.sample and t == "pgbench_accounts" and want_n > a.sample:
            keys = random.Random(want_n).sample(range(1, want_n + 1), a.sample)  # aid runs 1..rows
            want, have, how = pg_values(conn, t, keys), os_mget(idx, t, keys), f"sample of {a.sample}"
        else:
            want, have, how = pg_values(conn, t), os_scan(idx, t), "every row"
        diff = [k for k in want if have.get(k) != want[k]] + [k for k in have if k not in want]
        if diff:
            print(f"bench-peers: verify {a.tool} {t}: {len(diff)} rows differ ({how}), e.g. keys {sorted(diff)[:5]}",
                  file=sys.stderr)
            bad += 1
        else:
            print(f"bench-peers: verify {a.tool} {t}: {have_n} documents, {len(want)} rows equal ({how})")
    return 1 if bad else 0


class Tracker:
    """One tool's convergence: the keys still differing, per table."""

    def __init__(self, tool, want, counts, history):
        self.tool, self.want, self.counts, self.history = tool, want, counts, history
        self.pending = {t: set(want[t]) for t in want}
        self.behind_at_end = None
        self.equal_after = None
        self.polls = 0
        self.confirm_s = None

    def poll(self):
        """One pass; True when a full pass over every changed key (and the counts) found no
        difference. confirm_s is the length of that last pass: the index was equal at its end,
        and perhaps already up to confirm_s earlier (the time's resolution)."""
        self.polls += 1
        started = time.time()
        full = all(len(self.pending[t]) == len(self.want[t]) for t in self.want)
        for t, keys in self.pending.items():
            if keys:
                have = os_mget(index_of(self.tool, t), t, keys)
                self.pending[t] = {k for k in keys if have.get(k) != self.want[t][k]}
        behind = sum(len(k) for k in self.pending.values())
        if self.behind_at_end is None:
            self.behind_at_end = behind
        if behind:
            return False
        if not full:  # the keys that differed now agree: read every changed key once more
            started = time.time()
            for t in self.want:
                have = os_mget(index_of(self.tool, t), t, self.want[t])
                self.pending[t] = {k for k in self.want[t] if have.get(k) != self.want[t][k]}
            if any(self.pending.values()):
                return False
        for t in self.want:
            idx = index_of(self.tool, t)
            if os_count(idx) != self.counts[t]:
                os_refresh(idx)
                if os_count(idx) != self.counts[t]:
                    return False
        if self.tool == "cdcmirror" and dlq_history_lines() < self.history:
            return False
        self.confirm_s = time.time() - started
        return True


def cmd_converge(a):
    """Runs the load (the pgbench command after --), then polls both tools, each in its own
    thread, until each equals the table; seconds are counted from pgbench's exit."""
    conn = pg()
    deadline = None
    with open(a.log, "w") as logf:
        rc = subprocess.run(a.pgbench, stdout=logf, stderr=subprocess.STDOUT).returncode
    t_end = time.time()
    if rc != 0:
        print(f"bench-peers: pgbench exited {rc} (see {a.log})", file=sys.stderr)
        return 2
    with conn.cursor() as cur:
        cur.execute("SELECT DISTINCT aid FROM pgbench_history")
        aids = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT count(*) FROM pgbench_history")
        history = cur.fetchone()[0]
    want = {"pgbench_accounts": pg_values(conn, "pgbench_accounts", aids),
            "pgbench_tellers": pg_values(conn, "pgbench_tellers"),
            "pgbench_branches": pg_values(conn, "pgbench_branches")}
    counts = pg_counts(conn)
    read_s = time.time() - t_end
    trackers = [Tracker(t, want, counts, history) for t in TOOLS]
    deadline = t_end + a.timeout

    def follow(tr):
        try:
            while time.time() < deadline:
                if tr.poll():
                    tr.equal_after = time.time() - t_end
                    return
                time.sleep(0.05)
        except Exception as e:  # reported, the other tool goes on
            tr.error = repr(e)

    threads = [threading.Thread(target=follow, args=(tr,)) for tr in trackers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out = {"pg_read_s": round(read_s, 2), "changed_accounts": len(aids), "history_rows": history}
    for tr in trackers:
        out[tr.tool] = {"time_to_equal_s": None if tr.equal_after is None else round(tr.equal_after, 2),
                        "behind_rows_at_first_poll": tr.behind_at_end, "polls": tr.polls,
                        "confirm_pass_s": None if tr.confirm_s is None else round(tr.confirm_s, 2)}
        if getattr(tr, "error", None):
            out[tr.tool]["error"] = tr.error
    print(json.dumps(out))
    return 0 if all(tr.equal_after is not None for tr in trackers) else 1


def cmd_report(a):
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    snaps = {}
    for r in rows:
        if r["phase"] == "snapshot":
            snaps.setdefault(int(r["scale"]), {})[r["tool"]] = float(r["docs_per_s"])
    print("bench-peers: snapshot docs/s (cdcmirror/pgsync, goal >= 5x):")
    for s in sorted(snaps):
        c, p = snaps[s].get("cdcmirror"), snaps[s].get("pgsync")
        ratio = f"{c / p:.2f}x" if c and p else "n/a"
        print(f"  scale {s:>3}: cdcmirror {c} docs/s, pgsync {p} docs/s, ratio {ratio}")
    print("bench-peers: time to equal after each load (goal: cdcmirror <= 2 s):")
    loads = {}
    for r in rows:
        if r["phase"] != "snapshot":
            loads.setdefault((int(r["scale"]), r["phase"], r["load_rate"]), {})[r["tool"]] = r
    for (s, ph, rate), by in sorted(loads.items()):
        c, p = by.get("cdcmirror", {}), by.get("pgsync", {})
        ct, pt = c.get("time_to_equal_s") or "never", p.get("time_to_equal_s") or "never"
        print(f"  scale {s:>3} {ph:<6} -R {rate:>4} (achieved {c.get('achieved_tps')} tps, load avg "
              f"{c.get('loadavg1')}): cdcmirror {ct} s (behind {c.get('behind_rows_at_first_poll')} rows at the first poll), "
              f"pgsync {pt} s (behind {p.get('behind_rows_at_first_poll')} rows)")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
        scales = sorted(snaps)
        w = 0.38
        for i, tool in enumerate(TOOLS):
            vals = [snaps[s].get(tool, 0) for s in scales]
            bars = ax1.bar([x + (i - 0.5) * w for x in range(len(scales))], vals, w, label=tool)
            ax1.bar_label(bars, fmt="%.0f", fontsize=8)
        ax1.set_xticks(range(len(scales)), [f"scale {s}\n({rows_of(rows, s):,} docs)" for s in scales])
        ax1.set_ylabel("documents per second")
        ax1.set_title("Snapshot of pgbench tables")
        ax1.legend()
        keys = sorted(loads)
        for i, tool in enumerate(TOOLS):
            vals = []
            for k in keys:
                v = loads[k].get(tool, {}).get("time_to_equal_s")
                vals.append(float(v) if v else float(a.never))
            bars = ax2.bar([x + (i - 0.5) * w for x in range(len(keys))], vals, w, label=tool)
            ax2.bar_label(bars, fmt="%.1f", fontsize=8)
        ax2.axhline(2, color="grey", linestyle="--", linewidth=1)
        ax2.set_xticks(range(len(keys)), [f"s{s} {ph}\n-R {r}" for s, ph, r in keys], fontsize=8)
        ax2.set_ylabel("seconds from the load's end until index = table")
        ax2.set_title("Time to equal after a fixed-rate pgbench load")
        ax2.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"bench-peers: wrote {a.png}")
    return 0


def rows_of(rows, scale):
    for r in rows:
        if r["phase"] == "snapshot" and int(r["scale"]) == scale:
            return int(r["rows"])
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("--tool", choices=TOOLS, required=True)
    s.add_argument("--t0", type=float, required=True)
    s.add_argument("--timeout", type=float, default=3600)
    v = sub.add_parser("verify")
    v.add_argument("--tool", choices=TOOLS, required=True)
    v.add_argument("--sample", type=int, default=0)
    c = sub.add_parser("converge")
    c.add_argument("--timeout", type=float, default=600)
    c.add_argument("--log", required=True, help="pgbench's output")
    c.add_argument("pgbench", nargs=argparse.REMAINDER, help="-- the pgbench command line")
    r = sub.add_parser("report")
    r.add_argument("--csv", required=True)
    r.add_argument("--png")
    r.add_argument("--never", type=float, default=0, help="bar height for a tool that never converged")
    a = p.parse_args()
    if a.cmd == "converge":
        a.pgbench = a.pgbench[1:] if a.pgbench[:1] == ["--"] else a.pgbench
    return {"snapshot": cmd_snapshot, "verify": cmd_verify, "converge": cmd_converge, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
