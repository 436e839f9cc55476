#!/bin/bash
# run.sh -- run C unit test binaries (TAP output, see harness.h) and total their results.
#   tests/unit/run.sh build/unit/test_a build/unit/test_b ...
# Prints each failing binary's output, then `unit: N passed, N failed[, N skipped]`;
# exits 1 if anything failed.  A binary exiting 77 is skipped; one that exits non-zero
# without a `not ok` line (a crash, a sanitizer report) counts as one failure.
set -u
passed=0 failed=0 skipped=0
for bin in "$@"; do
    out=$("$bin" 2>&1)
    rc=$?
    ok=$(grep -c '^ok ' <<<"$out")
    bad=$(grep -c '^not ok ' <<<"$out")
    if ((rc == 77)); then
        skipped=$((skipped + 1))
        echo "$bin: skipped ($(grep -m1 -o 'SKIP.*' <<<"$out"))"
        continue
    fi
    if ((rc != 0 && bad == 0)); then
        bad=1
    fi
    passed=$((passed + ok))
    failed=$((failed + bad))
    if ((bad > 0)); then
        echo "--- $bin (exit $rc)"
        echo "$out"
    else
        echo "$bin: $ok passed"
    fi
done
if ((skipped)); then
    echo "unit: $passed passed, $failed failed, $skipped skipped"
else
    echo "unit: $passed passed, $failed failed"
fi
((failed == 0))
