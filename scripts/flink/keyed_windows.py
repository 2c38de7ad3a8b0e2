#!/usr/bin/env python3
"""Run real Apache Flink (PyFlink) per-key tumbling event-time windows over
keyed event streams and write what the windows fire ("Flink differential").

Usage:
  python3 scripts/flink/keyed_windows.py --streams DIR --sources P \
      --parallelism M --window W --out-of-orderness D [--ops java|python]

Input: DIR/NAME.jsonl (files ending in .out.jsonl are outputs, skipped), one
event per line: {"ts": int, "key": str, "value": int, "partition": 0..P-1}.
Within a partition, lines are in the order that partition's source reads them.
Output: DIR/NAME.out.jsonl, one line per fired window
{"key": str, "window_end": int, "sum": int}, sorted stably by key (so the
lines of one key keep Flink's firing order). Errors: "FILE:LINE: message" on
stderr and exit 2. Exit 3: PyFlink missing or the Flink job failed / dropped
a late record (which the input contract rules out; --allow-late skips the
up-front disorder check, for debugging only).

The Flink job (one job per invocation, all streams batched into it):
  source            P subtasks of a bounded parallel source; subtask p reads
                    partition p's file in file order and stamps ts (ms) as the
                    record timestamp.
  watermarks        assignTimestampsAndWatermarks(
                      WatermarkStrategy.for_bounded_out_of_orderness(
                        Duration.of_millis(D))), parallelism P, forward-connected
                    (chained) to the source: each source subtask has its own
                    generator that sees one partition only, wm = max_ts - D - 1.
  key_by(key)       hash shuffle to M subtasks; each window subtask's watermark
                    is the min over its P input channels (Flink's own logic).
  window            TumblingEventTimeWindows.of(W), allowed lateness 0,
                    reduce(sum) + ProcessWindowFunction emitting
                    (key, window.end, sum); late data goes to a side output
                    that is collected and reported (must be empty).
  end of input      each source emits the final MAX watermark, which fires
                    every remaining window; the job then finishes.
With --ops java (default) the key selector, reduce and window function are
small Java classes (java/keel/flink/KeelFlink.java, compiled on first use
against the Flink jars of the pip package) and the window operator is Flink's
Java WindowOperator. With --ops python they are PyFlink Python functions and
the window runs in PyFlink's Python window operator (slower; a cross-check).
The source is Java in both modes: PyFlink has no Python sources, and the
FLIP-27 FileSource hands splits to whichever reader asks first, so one reader
could read two partitions and mix their watermarks; our source pins
partition p to subtask p.

Why batching all streams into one job gives each stream exactly the result it
would get alone (Flink jobs take seconds to start; one job per stream would
take far too long for 300 streams):
  * Stream i (streams in file-name order, i = 0, 1, ...) gets ts' = ts + i*B,
    where B is a multiple of W and larger than the spread (max ts - min ts)
    of all input timestamps (B >= 10^9). Each key k of stream i becomes a
    fresh key id, distinct from every other stream's keys, mapped back after.
  * Inside each partition file, stream 0's events come first (in their
    order), then stream 1's, and so on. Every event of stream i+1 has a
    larger ts' than every event of stream i, so the concatenation still
    satisfies "no event is more than D behind its partition's max so far".
  * Hence no record is ever late, under any timing of watermarks: a record
    with ts arrives while its partition's wm <= max - D - 1 < ts, and the
    operator wm is the min over partitions, so the record's window (whose max
    timestamp end-1 >= ts) has not fired yet. (The job checks this: late
    records are side-outputted and reported; there have been none.)
  * With no late record and allowed lateness 0, every window fires exactly
    once (at the first watermark >= end-1, at the latest the final MAX
    watermark) and contains every record of its key and range. Timers of a
    key fire in timestamp order, so each key's output is its non-empty
    windows in increasing window_end with the full sums - which depends only
    on the key's own events, not on other keys, other streams, watermark
    timing, or which of the M subtasks the key hashes to.
  * Window assignment is translation invariant by multiples of W: Flink 2.x
    computes start = ts - floormod(ts, W) (TimeWindow.getWindowStartWithOffset,
    correct for negative ts too), so ts + i*B lands in window [s + i*B,
    e + i*B) exactly when ts lands in [s, e); we subtract i*B from window_end.
  So per key, the fired sequence equals running the stream alone. What is
  not preserved is the interleaving between keys and the exact wall-clock
  moment of firing, neither of which the output contract records.
Determinism: outputs are a function of the input only (argued above); the
watermark interval (--watermark-interval-ms, default 1 ms so that windows
also fire mid-stream, not only at the final watermark) changes only when
windows fire, not what they contain.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JAVA_SRC = os.path.join(HERE, "java", "keel", "flink", "KeelFlink.java")
DEFAULT_VENV = os.path.expanduser(os.environ.get("KEEL_FLINK_VENV", "~/.keel-flink-venv"))
TS_LIMIT = 10 ** 12  # accepted |ts|; the contract promises |ts| < 10^6


def reexec_in_flink_venv():
    """If pyflink is not importable here, re-run this script under the venv
    made by scripts/flink/install.sh (or $KEEL_FLINK_PYTHON)."""
    try:
        import pyflink  # noqa: F401
        return
    except ImportError:
        pass
    cand = os.environ.get("KEEL_FLINK_PYTHON") or os.path.join(DEFAULT_VENV, "bin", "python")
    if os.path.exists(cand) and not os.environ.get("KEEL_FLINK_REEXEC"):
        os.environ["KEEL_FLINK_REEXEC"] = "1"
        os.execv(cand, [cand, os.path.abspath(__file__)] + sys.argv[1:])
    sys.stderr.write("keyed_windows.py: pyflink is not installed; run scripts/flink/install.sh "
                     "(or pip install apache-flink==2.3.0, or set KEEL_FLINK_PYTHON)\n")
    sys.exit(3)


class InputError(Exception):
    pass


def parse_stream(path, P, D, check_disorder=True):
    """Returns the events of one file as (partition, ts, key, value) in file
    order. Checks the input contract, including the per-partition disorder
    bound (an event more than D behind its partition's max would be late)."""
    events = []
    pmax = {}
    with open(path, "r", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = "%s:%d" % (path, lineno)
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise InputError("%s: malformed JSON: %s" % (where, e))
            if not isinstance(obj, dict):
                raise InputError("%s: line is not a JSON object" % where)
            extra = set(obj) - {"ts", "key", "value", "partition"}
            if extra:
                raise InputError("%s: unknown field(s) %s" % (where, ", ".join(sorted(extra))))
            for field in ("ts", "value", "partition"):
                v = obj.get(field)
                if not isinstance(v, int) or isinstance(v, bool):
                    raise InputError("%s: field %r must be an integer, got %r" % (where, field, v))
            if not isinstance(obj.get("key"), str):
                raise InputError("%s: field 'key' must be a string, got %r" % (where, obj.get("key")))
            ts, key, value, part = obj["ts"], obj["key"], obj["value"], obj["partition"]
            if not 0 <= part < P:
                raise InputError("%s: partition %d out of range 0..%d" % (where, part, P - 1))
            if abs(ts) >= TS_LIMIT or abs(value) >= 2 ** 40:
                raise InputError("%s: ts or value out of range" % where)
            m = pmax.get(part)
            if check_disorder and m is not None and ts < m - D:
                raise InputError("%s: ts %d is more than D=%d behind partition %d's max %d "
                                 "(the event could be late)" % (where, ts, D, part, m))
            pmax[part] = ts if m is None else max(m, ts)
            events.append((part, ts, key, value))
    return events


def java_helpers_jar():
    """Compiles KeelFlink.java against the pip package's Flink jars, cached by
    the hash of the source and the Flink version."""
    import pyflink
    from pyflink.version import __version__ as flink_version
    lib = os.path.join(os.path.dirname(pyflink.__file__), "lib")
    with open(JAVA_SRC, "rb") as f:
        digest = hashlib.sha256(f.read() + flink_version.encode()).hexdigest()[:16]
    cache = os.path.expanduser(os.environ.get("KEEL_FLINK_CACHE", "~/.cache/keel-flink"))
    jar = os.path.join(cache, "keel-flink-%s.jar" % digest)
    if os.path.exists(jar):
        return jar
    os.makedirs(cache, exist_ok=True)
    build = tempfile.mkdtemp(prefix="keel-flink-build-")
    try:
        cp = os.pathsep.join(os.path.join(lib, j) for j in sorted(os.listdir(lib)) if j.endswith(".jar"))
        r = subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", build, JAVA_SRC],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("javac failed:\n" + r.stdout)
        tmp_jar = jar + ".tmp%d" % os.getpid()
        subprocess.run(["jar", "cf", tmp_jar, "-C", build, "."], check=True)
        os.replace(tmp_jar, jar)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return jar


def run_flink(workdir, P, M, W, D, ops, wm_interval_ms, out_path):
    from pyflink.common import Configuration, Duration, Types, WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment, RuntimeExecutionMode
    from pyflink.java_gateway import get_gateway

    jar = java_helpers_jar()
    config = Configuration()
    config.set_string("pipeline.auto-watermark-interval", "%dms" % wm_interval_ms)
    config.set_string("restart-strategy.type", "none")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(M)
    env.add_jars("file://" + jar)
    gw = get_gateway()
    jvm = gw.jvm
    KF = jvm.keel.flink.KeelFlink
    j_env = env._j_stream_execution_environment

    src = j_env.addSource(KF.source(workdir, P), "keel-partitions", KF.eventType()).setParallelism(P)
    wms = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(D))
    stamped = src.assignTimestampsAndWatermarks(wms._j_watermark_strategy)
    stamped.setParallelism(P).name("watermarks (per source subtask)")
    late_tag_j = KF.lateTag()

    if ops == "java":
        windows = (stamped.keyBy(KF.keyOf(), jvm.org.apache.flink.api.common.typeinfo.Types.LONG)
                   .window(jvm.org.apache.flink.streaming.api.windowing.assigners
                           .TumblingEventTimeWindows.of(jvm.java.time.Duration.ofMillis(W)))
                   .allowedLateness(jvm.java.time.Duration.ZERO)
                   .sideOutputLateData(late_tag_j))
        fired = windows.reduce(KF.sum(), KF.emitWindow(), KF.outType()).setParallelism(M)
        late = fired.getSideOutput(late_tag_j).map(KF.lateRecord(), KF.outType())
    else:
        from pyflink.common.time import Time
        from pyflink.datastream import DataStream, OutputTag
        from pyflink.datastream.functions import ProcessWindowFunction
        from pyflink.datastream.window import TumblingEventTimeWindows

        env.set_python_executable(sys.executable)
        ev_type = Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()])
        out_type = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), Types.LONG()])

        MAX_WATERMARK = 2 ** 63 - 1

        class EmitWindow(ProcessWindowFunction):
            def process(self, key, context, elements):
                for e in elements:
                    kind = 2 if context.current_watermark() == MAX_WATERMARK else 0
                    yield kind, key, context.window().end, e[2]

        late_tag = OutputTag("late", ev_type)
        fired = (DataStream(stamped)
                 .key_by(lambda e: e[1], key_type=Types.LONG())
                 .window(TumblingEventTimeWindows.of(Time.milliseconds(W)))
                 .allowed_lateness(0)
                 .side_output_late_data(late_tag)
                 .reduce(lambda a, b: (max(a[0], b[0]), a[1], a[2] + b[2]),
                         window_function=EmitWindow(), output_type=out_type))
        late = fired.get_side_output(late_tag).map(
            lambda e: (1, e[1], e[0], e[2]), output_type=out_type)._j_data_stream
        fired = fired._j_data_stream

    others = gw.new_array(jvm.org.apache.flink.streaming.api.datastream.DataStream, 1)
    others[0] = late
    every = fired.union(others)
    it = every.executeAndCollect("keel keyed windows")
    return KF.drain(it, out_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", required=True, help="directory of NAME.jsonl files")
    ap.add_argument("--sources", type=int, required=True, help="P: source partitions/subtasks")
    ap.add_argument("--parallelism", type=int, required=True, help="M: window operator subtasks")
    ap.add_argument("--window", type=int, required=True, help="W: tumbling window size (ms)")
    ap.add_argument("--out-of-orderness", type=int, required=True, help="D: bounded out-of-orderness (ms)")
    ap.add_argument("--ops", choices=("java", "python"), default="java",
                    help="key selector/reduce/window function in Java (default) or PyFlink Python")
    ap.add_argument("--watermark-interval-ms", type=int, default=1,
                    help="pipeline.auto-watermark-interval (default 1 ms)")
    ap.add_argument("--allow-late", action="store_true",
                    help="skip the disorder-bound check (debugging only: records Flink then drops as "
                         "late are reported and the exit code is 3; outputs become timing dependent)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temp dir of the Flink job")
    a = ap.parse_args()
    P, M, W, D = a.sources, a.parallelism, a.window, a.out_of_orderness
    for name, v, lo in (("--sources", P, 1), ("--parallelism", M, 1), ("--window", W, 1),
                        ("--out-of-orderness", D, 0), ("--watermark-interval-ms", a.watermark_interval_ms, 1)):
        if v < lo:
            sys.stderr.write("keyed_windows.py: %s must be >= %d\n" % (name, lo))
            return 2
    if not os.path.isdir(a.streams):
        sys.stderr.write("keyed_windows.py: %s is not a directory\n" % a.streams)
        return 2
    names = sorted(f[:-len(".jsonl")] for f in os.listdir(a.streams)
                   if f.endswith(".jsonl") and not f.endswith(".out.jsonl"))
    streams = []
    try:
        for n in names:
            streams.append(parse_stream(os.path.join(a.streams, n + ".jsonl"), P, D, not a.allow_late))
    except InputError as e:
        sys.stderr.write("%s\n" % e)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        sys.stderr.write("keyed_windows.py: %s\n" % e)
        return 2

    reexec_in_flink_venv()

    all_ts = [ev[1] for s in streams for ev in s]
    spread = (max(all_ts) - min(all_ts)) if all_ts else 0
    B = max(10 ** 9, spread + 1)
    B = -(-B // W) * W
    key_ids = {}   # (stream index, key) -> id
    key_of = []    # id -> (stream index, key)
    work = tempfile.mkdtemp(prefix="keel-flink-")
    t0 = time.time()
    nevents = 0
    try:
        files = [open(os.path.join(work, "part-%d.tsv" % p), "w") for p in range(P)]
        for i, s in enumerate(streams):
            for part, ts, key, value in s:
                kid = key_ids.get((i, key))
                if kid is None:
                    kid = key_ids[(i, key)] = len(key_of)
                    key_of.append((i, key))
                files[part].write("%d %d %d\n" % (ts + i * B, kid, value))
                nevents += 1
        for f in files:
            f.close()
        out_path = os.path.join(work, "fired.txt")
        if nevents == 0:
            open(out_path, "w").close()  # nothing to fire; skip starting Flink
        else:
            try:
                run_flink(work, P, M, W, D, a.ops, a.watermark_interval_ms, out_path)
            except Exception as e:  # py4j / Flink job failure
                sys.stderr.write("keyed_windows.py: Flink job failed: %s\n" % e)
                return 3
        per_stream = [dict() for _ in streams]  # key -> [(window_end, sum)] in firing order
        late = []
        nfired = nfinal = 0
        with open(out_path) as f:
            for line in f:
                kind, kid, x, y = (int(v) for v in line.split())
                i, key = key_of[kid]
                if kind == 1:
                    late.append((names[i], key, x - i * B, y))
                    continue
                per_stream[i].setdefault(key, []).append((x - i * B, y))
                nfired += 1
                nfinal += kind == 2
        for i, n in enumerate(names):
            with open(os.path.join(a.streams, n + ".out.jsonl"), "w") as f:
                for key in sorted(per_stream[i]):
                    for end, total in per_stream[i][key]:
                        f.write(json.dumps({"key": key, "window_end": end, "sum": total}) + "\n")
    finally:
        if a.keep_work:
            sys.stderr.write("keyed_windows.py: work dir kept: %s\n" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("keyed_windows: %d streams, %d events, %d windows fired (%d of them by the final watermark), "
          "P=%d M=%d W=%d D=%d ops=%s, flink %.1fs"
          % (len(streams), nevents, nfired, nfinal, P, M, W, D, a.ops, time.time() - t0))
    if late:
        for s, key, ts, value in late[:20]:
            sys.stderr.write("keyed_windows.py: Flink dropped a late record: stream %s key %r ts %d value %d\n"
                             % (s, key, ts, value))
        sys.stderr.write("keyed_windows.py: %d late records (outputs written, but incomplete)\n" % len(late))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
