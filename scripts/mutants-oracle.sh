#!/usr/bin/env bash
# The oracle's own test: sweeps and explorations on random event streams, judged only by
# the oracle (`--expect`). No pinned figures, no snapshots, no unit tests. A correct engine
# passes; `cargo mutants` (see .cargo/mutants.toml) runs this once per mutant of engine/ and
# counts a mutant as caught when it fails.
#
#   scripts/mutants-oracle.sh [KEEL_BINARY]       (default: $KEEL, else target/debug/keel)
#
#   scripts/mutants-oracle.sh --mutants [CARGO_MUTANTS_ARGS...]
#
# (MUTANTS_TIMEOUT_S, default 120, is the time one mutant's harness may take before it
# counts as a hang; raise it on a machine busy with other work.)
# The second form is the whole mutation test in one command: it builds keel, runs this
# harness on the unmutated tree (a correct engine must pass), then runs `cargo mutants` over
# engine/ with this harness as the only test (results in mutants.out/). cargo-mutants' own
# baseline is skipped because it would test the mutated package (keel-engine), which does not
# hold the harness; the baseline here takes its place.
#
# Part 0: the engine accepts exactly the documented ranges of its knobs (a sweep at each
# bound runs, one past it exits 2), and a refused events file is named by line and reason.
# Part 1 (the oracle flags a violation): on ch04 and three generated streams, every single
# fault at every step of the safe protocol (`keel sweep`) and 1,000 swarm-drawn plans of up
# to three faults (`keel explore`), each sink held to what it promises: append at-least-once,
# idempotent and transactional exactly-once. The unsafe protocols are also held to their
# promise under the faults the README says they survive (faults of the sink only).
# The sweep's shortcut (forks from snapshots, converged points stopped early) must give the
# report of every point run from scratch (`--naive`), byte for byte.
# Part 2 (negative controls, run only when part 1 passed): every unsafe protocol must still
# be flagged under the fault that breaks it; a sweep that exits 0 there means the engine no
# longer does what the protocol's name says.
#
# Exit status: 0 when every check holds, 1 otherwise. The first failing check is printed as
# `FAILED: <check>` on stderr (part 1) or `CONTROL FAILED: <check>` (part 2).
set -u

if [ "${1:-}" = "--mutants" ]; then
    shift
    cd "$(dirname "$0")/.." || exit 2
    cargo build --quiet -p keel-scenarios || exit 2
    "$0" "${CARGO_TARGET_DIR:-target}/debug/keel" || {
        echo "error: the unmutated engine fails the harness; no mutants tested" >&2
        exit 2
    }
    exec env -u CARGO_TARGET_DIR cargo mutants -p keel-engine --baseline=skip --timeout "${MUTANTS_TIMEOUT_S:-120}" --build-timeout 900 "$@"
fi

KEEL=${1:-${KEEL:-target/debug/keel}}
if [ ! -x "$KEEL" ]; then
    echo "error: no keel binary at $KEEL (cargo build, or pass its path)" >&2
    exit 2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/keel-mutants-oracle.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT

# The properties each sink promises. The appending sink duplicates by design.
APPEND_EXPECT=${APPEND_EXPECT:-at-least-once,bounded-disk}
EXACT_EXPECT=${EXACT_EXPECT:-exactly-once,bounded-disk}
EXACT_SINKS=${EXACT_SINKS:-idempotent,transactional}
FAULTS=process-crash,power-loss,disk-error,sink-error,ack-lost,sink-unavailable,zombie,page-eviction
SINK_FAULTS=sink-error,ack-lost,sink-unavailable,zombie
SEEDS=${SEEDS:-0..1000}

# A deterministic generator (a 31-bit LCG in shell arithmetic, the same on every machine):
# N events, timestamps mostly increasing by 0..STEP, about 20% of them late (up to 3
# windows behind the newest timestamp, so some land in windows that already fired), small
# values (some negative, some zero), optionally starting below zero.
rng=0
next() { # next BOUND: a number in 0..BOUND-1 in $r
    rng=$(((rng * 1103515245 + 12345) % 2147483648))
    r=$(((rng >> 8) % $1))
}
generate() { # generate FILE SEED N STEP WINDOW START
    local file=$1 n=$3 step=$4 window=$5 ts=$6 max i late value
    rng=$2
    max=$ts
    : >"$file"
    for ((i = 0; i < n; i++)); do
        next 100
        if [ "$r" -lt 20 ] && [ "$i" -gt 2 ]; then
            next $((3 * window))
            late=$((max - 1 - r))
        else
            next $((step + 1))
            ts=$((ts + r))
            late=$ts
            [ "$ts" -gt "$max" ] && max=$ts
        fi
        next 13
        value=$((r - 3))
        echo "{\"ts\": $late, \"value\": $value}" >>"$file"
    done
}

generate "$WORK/r1.jsonl" 11 40 3 10 0
generate "$WORK/r2.jsonl" 23 50 2 7 0
generate "$WORK/r3.jsonl" 37 60 4 20 -30

# The fast path of the events parser must read exactly what the full JSON parser reads: r3
# (negative timestamps) as written, and again with each line's fields swapped, which only the
# full parser takes, give the same report byte for byte (each read as `r3.jsonl` from its
# own directory, so the report names the same file).
keel_abs=$(cd "$(dirname "$KEEL")" && pwd)/$(basename "$KEEL")
mkdir -p "$WORK/plain" "$WORK/swapped"
cp "$WORK/r3.jsonl" "$WORK/plain/r3.jsonl"
sed -E 's/^\{"ts": (-?[0-9]+), "value": (-?[0-9]+)\}$/{"value": \2, "ts": \1}/' "$WORK/r3.jsonl" \
    >"$WORK/swapped/r3.jsonl"
if grep -q '^{"ts"' "$WORK/swapped/r3.jsonl"; then
    echo "FAILED: a line of r3.jsonl kept its order" >&2
    exit 1
fi
for form in plain swapped; do
    (cd "$WORK/$form" && "$keel_abs" sweep --events r3.jsonl --window 20 --out-of-orderness 8 \
        --checkpoint-every 7 --faults process-crash --sinks append --format json --quiet \
        >"../$form.json" 2>&1)
done
if ! cmp -s "$WORK/plain.json" "$WORK/swapped.json"; then
    echo "FAILED: the fast events parser reads r3.jsonl otherwise than the full parser" >&2
    exit 1
fi

# Each stream with its knobs: window, out-of-orderness, checkpoint interval.
STREAMS=(
    "--scenario ch04"
    "--events $WORK/r1.jsonl --window 10 --out-of-orderness 5 --checkpoint-every 5"
    "--events $WORK/r2.jsonl --window 7 --out-of-orderness 3 --checkpoint-every 3"
    "--events $WORK/r3.jsonl --window 20 --out-of-orderness 8 --checkpoint-every 7"
    # Allowed lateness: windows purged once the watermark passes end + L, later events
    # dropped and counted (the model checks both); r1's late events reach 3 windows back.
    "--events $WORK/r1.jsonl --window 10 --out-of-orderness 5 --checkpoint-every 4 --allowed-lateness 7"
    # Incremental checkpoints with lateness: a delta must name the windows purged since its
    # parent, or a recovery brings them back (a window purged at its end + L = 2 while
    # checkpoints come every 2 events).
    "--events $WORK/r2.jsonl --window 7 --out-of-orderness 3 --checkpoint-every 2 --allowed-lateness 2 --state-backend incremental"
    "--events $WORK/r3.jsonl --window 20 --out-of-orderness 8 --checkpoint-every 3 --allowed-lateness 0 --state-backend incremental"
)
UNSAFE=(in-place no-fsync-rename no-dir-fsync delete-then-rename size-only
    checkpoint-before-sink-sync no-tail-repair trust-page-cache-after-eio)

check() { # check ARGS...: keel must exit 0
    if ! "$KEEL" "$@" --quiet >"$WORK/out" 2>&1; then
        echo "FAILED: keel $*" >&2
        grep -E 'VIOLATION|error|panicked' "$WORK/out" | head -5 >&2
        exit 1
    fi
}

# The engine runs exactly the documented ranges of its knobs: a sweep at each bound runs
# (exit 0), one past it is refused (exit 2). A mutant that shifts a bound runs a scenario
# that must be refused or refuses one that must run.
SAFE_INT_MAX=9007199254740991
bound() { # bound STATUS ARGS...: a process-crash sweep (of ch04 unless ARGS name --events)
    local expected=$1
    shift
    "$KEEL" sweep --sinks append --faults process-crash "$@" --quiet \
        >"$WORK/out" 2>&1
    local status=$?
    if [ "$status" -ne "$expected" ]; then
        echo "FAILED (exit $status, expected $expected): keel sweep $*" >&2
        exit 1
    fi
}
bound 2 --window 0
bound 0 --window 1
bound 0 --window "$SAFE_INT_MAX"
bound 2 --window "$((SAFE_INT_MAX + 1))"
bound 2 --out-of-orderness=-1
bound 0 --out-of-orderness 0
bound 0 --out-of-orderness "$SAFE_INT_MAX"
bound 2 --out-of-orderness "$((SAFE_INT_MAX + 1))"
bound 2 --checkpoint-every 0
bound 0 --checkpoint-every 1
# The events too: a timestamp or value one past the range is refused, the bound itself runs.
for field in ts value; do
    other=$([ "$field" = ts ] && echo value || echo ts)
    echo "{\"$field\": $SAFE_INT_MAX, \"$other\": 1}" >"$WORK/edge.jsonl"
    bound 0 --events "$WORK/edge.jsonl"
    echo "{\"$field\": $((SAFE_INT_MAX + 1)), \"$other\": 1}" >"$WORK/edge.jsonl"
    bound 2 --events "$WORK/edge.jsonl"
    echo "{\"$field\": -$((SAFE_INT_MAX + 1)), \"$other\": 1}" >"$WORK/edge.jsonl"
    bound 2 --events "$WORK/edge.jsonl"
done

# Sums at the top of the range: four events of the largest value in one window, a checkpoint
# after each. Every checkpoint holds a sum no smaller input reaches, and recovery must
# restore it (a checkpoint whose checksum holds but that the engine cannot read back fails
# recovery; it is never skipped in silence).
for i in 0 1 2 3; do echo "{\"ts\": $i, \"value\": $SAFE_INT_MAX}"; done >"$WORK/big.jsonl"
check sweep --events "$WORK/big.jsonl" --window 10 --checkpoint-every 1 --sinks "$EXACT_SINKS" \
    --faults process-crash,power-loss --expect "$EXACT_EXPECT"

# The lateness bounds at equality (W=10, D=0, L=7): ts 17 makes the watermark 17 = 10 + 7, so
# window 10 is purged there (it is not among the final windows) and ts 5, for window 10
# again, is dropped; ts 11 (window 20: 27 > 17) is not. The model checks the final windows
# and the dropped count of every fault-free run, so a rule off by one at either equality
# fails every command.
printf '%s\n' '{"ts": 0, "value": 1}' '{"ts": 17, "value": 2}' '{"ts": 11, "value": 4}' \
    '{"ts": 5, "value": 8}' >"$WORK/lateness-edge.jsonl"
check sweep --events "$WORK/lateness-edge.jsonl" --window 10 --out-of-orderness 0 \
    --allowed-lateness 7 --checkpoint-every 1 --sinks "$EXACT_SINKS" \
    --faults process-crash,power-loss --expect "$EXACT_EXPECT"

# A refused events file is named with its line and its reason (the error a user acts on):
# a float is not an integer, a whole number past 2^53 is out of range, and the line counts
# blank lines as the user's editor does.
refused() { # refused TEXT CONTENT: a sweep of CONTENT exits 2 with TEXT in its error
    printf '%b' "$2" >"$WORK/bad.jsonl"
    "$KEEL" sweep --events "$WORK/bad.jsonl" --sinks append --faults process-crash --quiet \
        >"$WORK/out" 2>&1
    local status=$?
    if [ "$status" -ne 2 ] || ! grep -qF -- "$1" "$WORK/out"; then
        echo "FAILED (exit $status, expected 2 and '$1'): keel sweep --events <$2>" >&2
        exit 1
    fi
}
refused 'line 3: ts must be an integer' '{"ts": 1, "value": 1}\n\n{"ts": 1.5, "value": 1}\n'
refused 'ts must be an integer from -9007199254740991 to 9007199254740991, found 1.0' '{"ts": 1.0, "value": 1}\n'
refused 'found 9007199254740991.0' '{"ts": 9007199254740991.0, "value": 1}\n'
refused 'value 1e300 is out of range' '{"ts": 1, "value": 1e300}\n'
refused 'ts -9007199254740992.0 is out of range' '{"ts": -9007199254740992.0, "value": 1}\n'
# Integers in the plain form the fast path reads, but not JSON's or not in range: a leading
# zero is not JSON, "-0" is not an integer to the full parser (shown as written), 2^53 is past the range (in both fields: a
# line the fast path gives up on anywhere goes to the full parser whole). Each is the full
# parser's to refuse, with its reason.
refused 'line 1: not valid JSON' '{"ts": 012, "value": 1}\n'
refused 'value must be an integer from -9007199254740991 to 9007199254740991, found -0' '{"ts": 1, "value": -0}\n'
refused 'ts 9007199254740992 is out of range' '{"ts": 9007199254740992, "value": 9007199254740992}\n'

for stream in "${STREAMS[@]}"; do
    # shellcheck disable=SC2086 # a stream is several words on purpose
    set -- $stream
    check sweep "$@" --sinks append --faults "$FAULTS" --expect "$APPEND_EXPECT"
    check sweep "$@" --sinks "$EXACT_SINKS" --faults "$FAULTS" --expect "$EXACT_EXPECT"
    check explore "$@" --seeds "$SEEDS" --no-shrink --summary-only --sinks append \
        --faults "$FAULTS" --expect "$APPEND_EXPECT"
    check explore "$@" --seeds "$SEEDS" --no-shrink --summary-only --sinks "$EXACT_SINKS" \
        --faults "$FAULTS" --expect "$EXACT_EXPECT"
done
# The unsafe protocols keep their promise where the sink alone fails, and those that only a
# power loss (or a disk error) breaks keep exactly-once under a kill -9 too (not
# bounded-disk: a recovery that cannot trust its checkpoint to be durable keeps the older
# one, and a kill between a checkpoint's rename and the removal of the one before then
# leaves both for good); the recipe of each recovery is checked there (matches-model).
set -- ${STREAMS[1]}
for protocol in "${UNSAFE[@]}"; do
    check sweep "$@" --checkpoint-protocol "$protocol" --sinks "$EXACT_SINKS" \
        --faults "$SINK_FAULTS" --expect "$EXACT_EXPECT"
done
for protocol in no-fsync-rename no-dir-fsync size-only checkpoint-before-sink-sync \
    no-tail-repair trust-page-cache-after-eio; do
    check sweep "$@" --checkpoint-protocol "$protocol" --sinks "$EXACT_SINKS" \
        --faults process-crash --expect exactly-once
done

# The sweep forks points from snapshots of the fault-free run and stops a point once it has
# converged on it (`Engine::same_future_as` and the disk, the clock, the plan): a shortcut
# that must change no verdict. Every point run from scratch to its end (`--naive`) must
# give the same report, byte for byte, on ch04 and on a generated stream, every fault.
"$KEEL" gen --events 60 --seed 5 --out-of-orderness 4 --late-fraction 0.2 >"$WORK/g60.jsonl" 2>/dev/null ||
    { echo "FAILED: keel gen" >&2; exit 1; }
for stream in "--scenario ch04" \
    "--events $WORK/g60.jsonl --window 10 --out-of-orderness 4 --checkpoint-every 5"; do
    # shellcheck disable=SC2086 # a stream is several words on purpose
    set -- $stream
    for how in fork naive; do
        "$KEEL" sweep "$@" --faults "$FAULTS" --sinks append,idempotent,transactional \
            --format json --quiet $([ "$how" = naive ] && echo --naive) >"$WORK/$how.json" 2>&1
    done
    if ! cmp -s "$WORK/fork.json" "$WORK/naive.json"; then
        echo "FAILED: keel sweep $* differs from the same sweep with --naive" >&2
        exit 1
    fi
done

# Negative controls: each unsafe protocol is caught by the fault that breaks it.
control() { # control PROTOCOL FAULTS: the sweep must find a violation (exit 1)
    "$KEEL" sweep --scenario ch04 --checkpoint-protocol "$1" --sinks idempotent \
        --faults "$2" --expect "$EXACT_EXPECT" --quiet >"$WORK/out" 2>&1
    local status=$?
    if [ "$status" -ne 1 ]; then
        echo "CONTROL FAILED (exit $status, expected 1): keel sweep --checkpoint-protocol $1 --faults $2" >&2
        exit 1
    fi
    # Every failure prints the one command that reproduces it, judged as the sweep was
    # (it carries the --expect): run it, it must fail too.
    local reproduce
    reproduce=$(grep -m1 -o 'reproduce: keel .*' "$WORK/out" | sed 's/^reproduce: keel //')
    # shellcheck disable=SC2086 # the command line is words on purpose (ch04 has no paths)
    "$KEEL" $reproduce >"$WORK/reproduced" 2>&1
    status=$?
    if [ -z "$reproduce" ] || [ "$status" -ne 1 ]; then
        echo "CONTROL FAILED (exit $status, expected 1): the reproduce command of keel sweep --checkpoint-protocol $1 --faults $2: keel $reproduce" >&2
        exit 1
    fi
}
control in-place process-crash
control delete-then-rename process-crash
control no-fsync-rename power-loss
control no-dir-fsync power-loss
control size-only power-loss
control checkpoint-before-sink-sync power-loss
control no-tail-repair power-loss
# A failed fsync leaves records in clean pages the disk does not hold; a restart that trusts
# them (the idempotent sink skips replaying them) loses them when the pages go.
control trust-page-cache-after-eio disk-error
# The checksum: a torn checkpoint is rejected and recovery falls back to an older one, so
# no-fsync-rename recovers after every power loss; size-only trusts a file whose length
# matches its header, so some power loss leaves it a checkpoint it cannot read.
check sweep --scenario ch04 --checkpoint-protocol no-fsync-rename --sinks idempotent \
    --faults power-loss --expect recovers
"$KEEL" sweep --scenario ch04 --checkpoint-protocol size-only --sinks idempotent \
    --faults power-loss --expect recovers --quiet >"$WORK/out" 2>&1
status=$?
if [ "$status" -ne 1 ]; then
    echo "CONTROL FAILED (exit $status, expected 1): keel sweep --checkpoint-protocol size-only --faults power-loss --expect recovers" >&2
    exit 1
fi
# Nothing fences a zombie on a file sink: after a power loss has torn the newest records
# away, its retry can land before the replay rewrites the record before it, and the
# idempotent sink then shows a stale window (README, "Two-phase commit"; seed 2876 is one).
# A zombie that does nothing would hide it.
"$KEEL" explore --scenario ch04 --seeds 2000..3000 --sinks idempotent --faults "$FAULTS" \
    --no-shrink --summary-only --expect "$EXACT_EXPECT" --quiet >"$WORK/out" 2>&1
status=$?
if [ "$status" -ne 1 ]; then
    echo "CONTROL FAILED (exit $status, expected 1): keel explore --seeds 2000..3000 --sinks idempotent (the unfenced zombie)" >&2
    exit 1
fi
# A transaction the log aborts for staying open too long loses its records: with a timeout
# shorter than a checkpoint interval (8 events, 300 ms apart), even the first crash point
# must be flagged. This is the control that sees the simulated time pass.
"$KEEL" sweep --scenario ch04 --sinks transactional --faults process-crash \
    --transaction-timeout-ms 2000 --expect "$EXACT_EXPECT" --quiet >"$WORK/out" 2>&1
status=$?
if [ "$status" -ne 1 ]; then
    echo "CONTROL FAILED (exit $status, expected 1): keel sweep --sinks transactional --transaction-timeout-ms 2000" >&2
    exit 1
fi
echo "oracle harness: every check held"
