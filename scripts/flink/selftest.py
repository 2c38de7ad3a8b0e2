#!/usr/bin/env python3
"""Self-test of scripts/flink/keyed_windows.py against scripts/flink/model.py.

Generates random keyed streams (seeded), runs real Flink on them through
keyed_windows.py and checks every output file equals the model's.

  python3 scripts/flink/selftest.py                 # 20 streams, P in {1,2,3}
  python3 scripts/flink/selftest.py --ops both      # also PyFlink Python ops
  python3 scripts/flink/selftest.py --count 300 --max-events 200 --p-values 3
                                                    # timing run, one Flink job

Streams of the same P run in one keyed_windows.py invocation (one Flink job)
with that group's random W, D and M. Within each partition every event is at
most D behind the partition's max so far; about 15% of events sit exactly D
behind (the boundary), partitions may be empty, ts may be negative.
Exit 0 iff no stream differs.
"""
import argparse
import difflib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import json

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the repo
import model  # noqa: E402

KEYS = ["k%d" % i for i in range(6)]


def gen_stream(rng, P, W, D, min_events, max_events):
    n = rng.randint(min_events, max_events)
    used = list(range(P))
    if P > 1 and rng.random() < 0.25:
        used = rng.sample(used, rng.randint(1, P - 1))  # leave some partitions empty
    keys = rng.sample(KEYS, rng.randint(1, len(KEYS)))
    base = rng.randint(-300, 300)
    pmax = {}
    events = []
    for _ in range(n):
        p = rng.choice(used)
        m = pmax.get(p)
        if m is None:
            ts = base + rng.randint(-D, 3 * W)
        else:
            r = rng.random()
            if r < 0.15:
                ts = m - D                      # exactly at the disorder bound
            elif r < 0.55:
                ts = m + rng.randint(0, 2 * W)  # moves forward
            elif r < 0.60:
                ts = m + rng.randint(5 * W, 20 * W)  # gap of empty windows
            else:
                ts = rng.randint(m - D, m)      # out of order, within D
        pmax[p] = ts if m is None else max(m, ts)
        events.append({"ts": ts, "key": rng.choice(keys), "value": rng.randint(-50, 100), "partition": p})
    assert not model.late_events([(e["ts"], e["key"], e["value"], e["partition"]) for e in events], D)
    return events


def main():
    ap = argparse.ArgumentParser(description="keyed_windows.py vs model.py")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--min-events", type=int, default=5)
    ap.add_argument("--max-events", type=int, default=60)
    ap.add_argument("--p-values", default="1,2,3", help="comma list; one Flink job per value")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--ops", choices=("java", "python", "both"), default="java")
    ap.add_argument("--keep", action="store_true", help="keep the generated streams")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    p_values = [int(x) for x in a.p_values.split(",")]
    groups = {}
    for j in range(a.count):
        groups.setdefault(p_values[j % len(p_values)], []).append(j)
    root = tempfile.mkdtemp(prefix="keel-flink-selftest-")
    compared = differing = 0
    ops_list = ["java", "python"] if a.ops == "both" else [a.ops]
    try:
        for P, members in sorted(groups.items()):
            W = rng.choice([1, 2, 5, 10, 30])
            D = rng.choice([0, 1, 3, 10, 40])
            M = rng.randint(1, 3)
            d = os.path.join(root, "p%d" % P)
            os.makedirs(d)
            expected = {}
            for j in members:
                name = "s%04d" % j
                evs = gen_stream(rng, P, W, D, a.min_events, a.max_events)
                with open(os.path.join(d, name + ".jsonl"), "w") as f:
                    f.writelines(json.dumps(e) + "\n" for e in evs)
                expected[name] = model.format_lines(
                    model.windows([(e["ts"], e["key"], e["value"]) for e in evs], W))
            for ops in ops_list:
                for name in expected:
                    path = os.path.join(d, name + ".out.jsonl")
                    if os.path.exists(path):
                        os.remove(path)
                cmd = [sys.executable, os.path.join(HERE, "keyed_windows.py"), "--streams", d,
                       "--sources", str(P), "--parallelism", str(M), "--window", str(W),
                       "--out-of-orderness", str(D), "--ops", ops]
                t0 = time.time()
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                dt = time.time() - t0
                nev = sum(1 for name in expected for _ in open(os.path.join(d, name + ".jsonl")))
                print("selftest: P=%d M=%d W=%d D=%d ops=%s: %d streams, %d events, %.1fs wall (rc=%d)"
                      % (P, M, W, D, ops, len(expected), nev, dt, r.returncode))
                for ln in r.stdout.splitlines():
                    print("  " + ln)
                if r.returncode != 0:
                    sys.stderr.write(r.stderr)
                for name, want in expected.items():
                    compared += 1
                    path = os.path.join(d, name + ".out.jsonl")
                    got = [ln.rstrip("\n") for ln in open(path)] if os.path.exists(path) else None
                    if got != want:
                        differing += 1
                        print("DIFF %s (P=%d ops=%s):" % (name, P, ops))
                        for ln in list(difflib.unified_diff(want, got or [], "model", "flink", lineterm=""))[:30]:
                            print("  " + ln)
    finally:
        if a.keep:
            print("selftest: streams kept in %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print("selftest: compared %d stream outputs, %d differences" % (compared, differing))
    print("selftest: %d passed, %d failed" % (compared - differing, differing))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
