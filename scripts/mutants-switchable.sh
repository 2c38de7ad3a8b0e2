#!/usr/bin/env bash
# keel's own claims against deliberate bugs, switched at run time in one build (the `mutants`
# feature: engine/src/mutants.rs, scenarios/src/property/mutant.rs):
#
#   scripts/mutants-switchable.sh [--parts 1,2,3,4] [KEEL]
#
# builds keel with the feature (or takes KEEL, a binary built with it) and runs the parts
# named (default: all four, as CI does).
#
# Part 1, the controls (the correct engine and oracle): each runs a sweep that must break
# exactly one named property (exit 1, the property named in its VIOLATION line). Some need an
# engine mutant to break it at all (a recovery that succeeds with wrong windows, a fault-free
# run that disagrees with the model): the shipped protocols never do.
# Part 2, the oracle mutants (KEEL_ORACLE_MUTANT: each property switched off in turn,
# `recovers` blind to the final windows, no model mismatch ever): each must make some
# control fail. A mutant no control notices is a property nothing tests.
# Part 3, the sweep's shortcuts against engine mutants (KEEL_MUTANT): for every mutant, the
# default sweep's report must equal the report of every point run from scratch (`--naive`),
# byte for byte, on ch04 and three generated streams (incremental checkpoints and allowed
# lateness among them). A shortcut that assumes a correct recovery under-reports a buggy one.
# Part 4, the sweep against every point run on its own: for the tail-repair-short mutant, the
# failing points of the power-loss row of the sweep (append and idempotent sinks, ch04 and a
# 40-event stream, W=10, D=5, K=5) must be the points whose own `keel run --fault
# power-loss --at-step S --crash-state N` says "verdict: FAILS", counted one by one.
#
# Every check prints one line; the script ends with a summary and exits 1 if any failed
# (2 if keel could not be built or is not a mutants build).
set -u
cd "$(dirname "$0")/.." || exit 2

PARTS=1,2,3,4
if [ "${1:-}" = "--parts" ]; then
    PARTS=$2
    shift 2
fi
part() { [[ ",$PARTS," == *",$1,"* ]]; }
if [ $# -ge 1 ]; then
    KEEL=$1
else
    cargo build --quiet --release --features keel-scenarios/mutants || exit 2
    KEEL=${CARGO_TARGET_DIR:-target}/release/keel
fi
if ! KEEL_MUTANT=tail-repair-short "$KEEL" gen --events 1 2>&1 >/dev/null | grep -q "engine mutant"; then
    echo "error: $KEEL is not a build with the mutants feature (cargo build --release --features keel-scenarios/mutants)" >&2
    exit 2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/keel-mutants.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
failed=0

# --- Part 1: the controls --------------------------------------------------------------
# Each control: NAME|PROPERTY|ENGINE_MUTANT|keel arguments (ch04 unless they say otherwise).
CONTROLS=(
    "sink sync after the checkpoint loses records|no-loss||sweep --scenario ch04 --checkpoint-protocol checkpoint-before-sink-sync --sinks idempotent --faults power-loss"
    "an appending sink duplicates after a kill|no-duplicates||sweep --scenario ch04 --sinks append --faults process-crash"
    "no tail repair leaves corrupt lines|no-wrong||sweep --scenario ch04 --checkpoint-protocol no-tail-repair --sinks idempotent --faults power-loss"
    "an in-place checkpoint rolls back|no-rollback||sweep --scenario ch04 --checkpoint-protocol in-place --sinks idempotent --faults process-crash"
    "a size-only check trusts a torn checkpoint|recovers||sweep --scenario ch04 --checkpoint-protocol size-only --sinks idempotent --faults power-loss"
    "a recovery that drops a window|recovers|restore-drops-window|sweep --scenario ch04 --sinks append --faults process-crash"
    "a late sink sync shows stale windows|consistent-view||sweep --scenario ch04 --checkpoint-protocol checkpoint-before-sink-sync --sinks idempotent --faults power-loss"
    "no directory fsync leaves old checkpoints|bounded-disk||sweep --scenario ch04 --checkpoint-protocol no-dir-fsync --sinks idempotent --faults process-crash"
    "an engine that drops late updates|matches-model|late-update-dropped|sweep --scenario ch04 --sinks append --faults process-crash"
)

# run_control CONTROL [ORACLE_MUTANT]: 0 if the control breaks its property as it must.
run_control() {
    local name property mutant args
    IFS='|' read -r name property mutant args <<<"$1"
    local expect=$property
    # matches-model fails whatever is asked: ask for what the sink promises.
    [ "$property" = matches-model ] && expect=at-least-once
    # shellcheck disable=SC2086 # the arguments are words on purpose
    KEEL_MUTANT=$mutant KEEL_ORACLE_MUTANT=${2:-} "$KEEL" $args --expect "$expect" --quiet \
        >"$WORK/out" 2>&1
    local status=$?
    [ "$status" -eq 1 ] && grep -q "VIOLATION.*$property broken" "$WORK/out"
}

for control in "${CONTROLS[@]}"; do
    part 1 || break
    if run_control "$control"; then
        echo "control holds: ${control%%|*} (${control#*|}; $(echo "$control" | cut -d'|' -f2) broken)" | cut -c1-160
    else
        echo "CONTROL FAILED: ${control%%|*}: keel $(echo "$control" | cut -d'|' -f4) does not break $(echo "$control" | cut -d'|' -f2)" >&2
        failed=$((failed + 1))
    fi
done

# --- Part 2: oracle mutants ------------------------------------------------------------
ORACLE_MUTANTS=(no-loss-off no-duplicates-off no-wrong-off no-rollback-off recovers-off
    consistent-view-off bounded-disk-off recovers-ignores-final-windows no-model-mismatch)
for oracle in "${ORACLE_MUTANTS[@]}"; do
    part 2 || break
    caught=""
    for control in "${CONTROLS[@]}"; do
        if ! run_control "$control" "$oracle"; then
            caught=${control%%|*}
            break
        fi
    done
    if [ -n "$caught" ]; then
        echo "oracle mutant caught: $oracle (by: $caught)"
    else
        echo "ORACLE MUTANT SURVIVED: $oracle: every control still fails as it should" >&2
        failed=$((failed + 1))
    fi
done

# --- Part 3: default sweep = --naive, for every engine mutant ----------------------------
"$KEEL" gen --events 60 --seed 5 --out-of-orderness 4 --late-fraction 0.2 --out "$WORK/g60.jsonl"
"$KEEL" gen --events 40 --seed 11 --out-of-orderness 5 --late-fraction 0.2 --late-by-max 30 \
    --out "$WORK/g40.jsonl"
"$KEEL" gen --events 50 --seed 23 --out-of-orderness 3 --late-fraction 0.3 --late-by-max 25 \
    --value-max 9 --out "$WORK/g50.jsonl"
STREAMS=(
    "--scenario ch04"
    "--events $WORK/g60.jsonl --window 10 --out-of-orderness 4 --checkpoint-every 5"
    "--events $WORK/g40.jsonl --window 10 --out-of-orderness 5 --checkpoint-every 5 --state-backend incremental"
    "--events $WORK/g50.jsonl --window 10 --out-of-orderness 3 --checkpoint-every 2 --allowed-lateness 2 --state-backend incremental"
)
FAULTS=process-crash,power-loss,disk-error,sink-error,ack-lost,sink-unavailable,zombie,page-eviction
ENGINE_MUTANTS=(tail-repair-short restore-drops-window skip-counted-as-written
    late-update-dropped delta-omits-purged append-skips-lines-in-file)
# failing FILE: the failing points of each row of a JSON sweep report, as sink/fault=N.
failing() {
    grep -E '"(sink|fault|failing_points)"' "$1" | tr -d ' ",' | paste -d' ' - - - |
        sed -E 's/sink:([a-z]+) fault:([a-z-]+) failing_points:([0-9]+)/\1\/\2=\3/' | tr '\n' ' '
}
for mutant in "${ENGINE_MUTANTS[@]}"; do
    part 3 || break
    for stream in "${STREAMS[@]}"; do
        for how in default naive; do
            # shellcheck disable=SC2086 # a stream is several words on purpose
            KEEL_MUTANT=$mutant "$KEEL" sweep $stream --faults "$FAULTS" \
                --sinks append,idempotent,transactional --format json --quiet \
                $([ "$how" = naive ] && echo --naive) >"$WORK/$how.json" 2>"$WORK/$how.err"
        done
        label="$mutant on ${stream%% --window*}"
        label=${label//$WORK\//}
        if cmp -s "$WORK/default.json" "$WORK/naive.json"; then
            echo "default = naive: $label"
        else
            echo "DEFAULT != NAIVE: $label" >&2
            echo "  default: $(failing "$WORK/default.json")" >&2
            echo "  naive:   $(failing "$WORK/naive.json")" >&2
            failed=$((failed + 1))
        fi
    done
done

# --- Part 4: the sweep = every point run on its own ---------------------------------------
# one_by_one STREAM SINK: the failing points of keel run, one per power-loss point, and the
# sweep's, as "RUNS SWEEP".
one_by_one() {
    local stream=$1 sink=$2
    # shellcheck disable=SC2086 # a stream is several words on purpose
    "$KEEL" sites $stream --sink "$sink" | awk 'NR > 1 && $0 ~ /power-loss/ {
        for (n = 0; n < $NF; n++) print $1, n }' >"$WORK/points"
    local runs
    # shellcheck disable=SC2086
    runs=$(KEEL_MUTANT=tail-repair-short xargs -P 2 -n 2 sh -c \
        '"$0" run '"$stream"' --sink '"$sink"' --fault power-loss --at-step "$1" --crash-state "$2" | grep -c "^verdict: FAILS"' \
        "$KEEL" <"$WORK/points" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    local sweep
    # shellcheck disable=SC2086
    sweep=$(KEEL_MUTANT=tail-repair-short "$KEEL" sweep $stream --sinks "$sink" --faults power-loss \
        --format json --quiet | grep -o '"failing_points": [0-9]*' | grep -o '[0-9]*$')
    echo "$runs $sweep $(wc -l <"$WORK/points")"
}
if part 4; then
    for stream in "${STREAMS[0]}" "${STREAMS[2]% --state-backend incremental}"; do
        for sink in append idempotent; do
            read -r runs sweep points <<<"$(one_by_one "$stream" "$sink")"
            label="tail-repair-short, $sink, power-loss on ${stream%% --window*}"
            label=${label//$WORK\//}
            if [ -n "$runs" ] && [ "$runs" = "$sweep" ]; then
                echo "sweep = one by one: $label: $sweep of $points points fail either way"
            else
                echo "SWEEP != ONE BY ONE: $label: sweep $sweep, keel run one by one $runs (of $points)" >&2
                failed=$((failed + 1))
            fi
        done
    done
fi

if [ "$failed" -eq 0 ]; then
    echo "mutants (parts $PARTS): every check held"
    exit 0
fi
echo "mutants: $failed check(s) failed" >&2
exit 1
