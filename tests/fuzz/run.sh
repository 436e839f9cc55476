#!/bin/bash
# run.sh -- runs libFuzzer targets one after the other (what `make fuzz` does once they are built).
#   FUZZ_SECONDS=60 tests/fuzz/run.sh req qmp ...   (default: every build/fuzz/fuzz_* target)
# Each starts from its checked-in corpus tests/fuzz/corpus/<target> (read, never written: new
# inputs go to build/fuzz/corpus/<target>) with tests/fuzz/<target>.dict when present. A crash,
# leak, timeout or out-of-memory stops the run and fails it; the reproducer is written to
# build/fuzz/crashes/<target>/ (copy it to tests/fuzz/regressions/<target>/ once fixed).
# Prints one summary line per target: executions per second and the coverage reached.
# FUZZ_JOBS is not offered: one fuzzer at a time, single-threaded (a shared build machine).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${BUILD:-build}/fuzz
secs=${FUZZ_SECONDS:-60}
targets=("$@")
if ((${#targets[@]} == 0)); then
    for b in "$build"/fuzz_*; do targets+=("${b##*/fuzz_}"); done
fi
rc=0
for t in "${targets[@]}"; do
    bin=$build/fuzz_$t
    [[ -x $bin ]] || { echo "fuzz: $t: $bin is not built (make fuzz-build)"; rc=1; continue; }
    mkdir -p "$build/corpus/$t" "$build/crashes/$t"
    dict=()
    [[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")
    log=$build/$t.log
    "$bin" "$build/corpus/$t" "tests/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$secs" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$t/" >"$log" 2>&1
    code=$?
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
    eps=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1)
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1)
    if ((code != 0)); then
        echo "fuzz: $t: FAILED (exit $code) after ${runs:-?} runs; see $log and $build/crashes/$t/"
        grep -E -m1 -A12 '^==[0-9]+==ERROR|runtime error|^fuzz_' "$log"
        rc=1
    else
        echo "fuzz: $t: ${runs:-?} runs in ${secs}s, ${eps:-?} exec/s, ${cov:-no coverage line}"
    fi
done
exit $rc
