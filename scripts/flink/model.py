#!/usr/bin/env python3
"""Pure-Python reference for scripts/flink/keyed_windows.py.

Semantics (valid when no event is late, which the input contract guarantees:
within each partition no event is more than D behind that partition's max ts
so far): every event (ts, key, value) belongs to the tumbling window
[s, s + W) with s = ts - (ts mod W) (floor mod, so negative ts work); each
non-empty (key, window) fires exactly once with the sum of its values; a
key's windows fire in increasing window end. Output lines are sorted by key,
then window end -- the same format keyed_windows.py writes.

Usage: python3 scripts/flink/model.py --streams DIR --window W [--out DIR2]
writes DIR2/NAME.out.jsonl for each DIR/NAME.jsonl (default: print to stdout
as {"stream": NAME, ...} lines).
"""
import argparse
import json
import os
import sys


def windows(events, W):
    """events: iterable of (ts, key, value). Returns [(key, window_end, sum)]
    sorted by key, then window end."""
    sums = {}
    for ts, key, value in events:
        end = ts - ts % W + W
        sums[(key, end)] = sums.get((key, end), 0) + value
    return [(k, e, s) for (k, e), s in sorted(sums.items())]


def late_events(events, D):
    """Events (with their index) that the input contract forbids: more than D
    behind the running max of their partition. events: (ts, key, value,
    partition). Empty for valid input."""
    pmax, bad = {}, []
    for i, (ts, _key, _value, part) in enumerate(events):
        m = pmax.get(part)
        if m is not None and ts < m - D:
            bad.append(i)
        pmax[part] = ts if m is None else max(m, ts)
    return bad


def format_lines(rows):
    return [json.dumps({"key": k, "window_end": e, "sum": s}) for k, e, s in rows]


def read_stream(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description="reference model of keyed_windows.py")
    ap.add_argument("--streams", required=True)
    ap.add_argument("--window", type=int, required=True)
    ap.add_argument("--out", help="directory for NAME.out.jsonl (default: stdout)")
    a = ap.parse_args()
    names = sorted(f[:-6] for f in os.listdir(a.streams)
                   if f.endswith(".jsonl") and not f.endswith(".out.jsonl"))
    for n in names:
        evs = read_stream(os.path.join(a.streams, n + ".jsonl"))
        rows = windows([(e["ts"], e["key"], e["value"]) for e in evs], a.window)
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, n + ".out.jsonl"), "w") as f:
                f.writelines(line + "\n" for line in format_lines(rows))
        else:
            for k, e, s in rows:
                sys.stdout.write(json.dumps({"stream": n, "key": k, "window_end": e, "sum": s}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
