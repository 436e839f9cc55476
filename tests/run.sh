#!/usr/bin/env bash
# run.sh -- the whole test suite (what `make test` runs once everything is built).
#
# 1. C unit tests: build/unit/test_* through tests/unit/run.sh (prints `unit: N passed, N failed`),
#    with a throwaway PostgreSQL (tests/pg/with-pg.sh) so that every store case runs on both
#    back ends.
# 2. The HTTP layer over a stub daemon (tests/http/run.sh, ASan, no VMs): its TAP lines
#    (`ok` / `not ok`) count one each (prints `http: N passed, N failed`).
# 3. pytest over tests/e2e (and tests/agent when present), results read from a JUnit XML file.
# 4. The closing line is `N passed, N failed` (totals), with `, N skipped` added when anything
#    was skipped (a unit binary or a pytest test); the exit status is nonzero if anything failed
#    or nothing ran.
#
# Environment: SPACE_TEST_TIMEOUT (seconds for the pytest run, default 2400),
# SPACE_HTTP_TIMEOUT (seconds for the HTTP stage, default 300; FUZZ_ROUNDS passes through),
# PYTEST_ARGS (extra arguments, e.g. "-k stdin -x"), SPACE_TEST_KEEP=1 keeps daemon state dirs.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
results=$root/build/test-results
mkdir -p "$results"

passed=0
failed=0
skipped=0

# ---- unit tests
shopt -s nullglob
unit_bins=(build/unit/test_*)
shopt -u nullglob
if ((${#unit_bins[@]})); then
    unit_log=$results/unit.log
    if [[ -x tests/unit/run.sh ]]; then
        with_pg=()
        [[ -x tests/pg/with-pg.sh ]] && with_pg=(tests/pg/with-pg.sh)
        "${with_pg[@]}" tests/unit/run.sh "${unit_bins[@]}" 2>&1 | tee "$unit_log"
        unit_rc=${PIPESTATUS[0]}
    else
        # No runner yet: each binary is a test; 0 passes, 77 skips (TAP convention).
        unit_rc=0
        up=0 uf=0
        for t in "${unit_bins[@]}"; do
            "$t" >"$results/$(basename "$t").log" 2>&1
            rc=$?
            if ((rc == 0)); then up=$((up + 1)); echo "ok   $t"
            elif ((rc == 77)); then echo "skip $t"
            else uf=$((uf + 1)); echo "FAIL $t (exit $rc; log $results/$(basename "$t").log)"; fi
        done
        echo "unit: $up passed, $uf failed" | tee "$unit_log"
    fi
    line=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed' "$unit_log" | tail -n 1)
    if [[ $line =~ ,\ ([0-9]+)\ skipped ]]; then
        skipped=$((skipped + BASH_REMATCH[1]))
    fi
    if [[ $line =~ ^unit:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        # A runner that crashed after its summary, or failed without counting it, still fails.
        if ((unit_rc != 0 && BASH_REMATCH[2] == 0)); then
            echo "unit: runner exited $unit_rc"
            failed=$((failed + 1))
        fi
    else
        echo "unit: no summary line from tests/unit/run.sh (exit $unit_rc)"
        failed=$((failed + 1))
    fi
else
    echo "unit: no unit test binaries in build/unit"
fi

# ---- HTTP layer: the real listeners over a stub daemon, then fuzzing (TAP)
if [[ -x tests/http/run.sh ]]; then
    http_log=$results/http.log
    timeout -k 10 "${SPACE_HTTP_TIMEOUT:-300}" tests/http/run.sh 2>&1 | tee "$http_log"
    http_rc=${PIPESTATUS[0]}
    hp=$(grep -c '^ok ' "$http_log")
    hf=$(grep -c '^not ok ' "$http_log")
    if ((http_rc == 124 || http_rc == 137)); then
        echo "http: killed after ${SPACE_HTTP_TIMEOUT:-300}s"
    fi
    echo "http: $hp passed, $hf failed"
    passed=$((passed + hp))
    failed=$((failed + hf))
    # A build failure, a crash or a timeout without a `not ok` line still fails the run;
    # so does a run that reported nothing.
    if ((http_rc != 0 && hf == 0)) || ((hp + hf == 0)); then
        echo "http: tests/http/run.sh exited $http_rc"
        failed=$((failed + 1))
    fi
else
    echo "http: tests/http/run.sh missing"
    failed=$((failed + 1))
fi

# ---- pytest
# Debian's python3-pytest lives in the system python; prefer it over another python3 on PATH.
py=
for cand in /usr/bin/python3 python3; do
    if "$cand" -c 'import pytest' >/dev/null 2>&1; then py=$cand; break; fi
done
dirs=()
for d in tests/e2e tests/agent; do
    [[ -d $d ]] && dirs+=("$d")
done
if [[ -z $py ]]; then
    echo "pytest: not installed (Debian package python3-pytest; run make deps)"
    failed=$((failed + 1))
elif ((${#dirs[@]})); then
    xml=$results/pytest.xml
    rm -f "$xml"
    # shellcheck disable=SC2086 # PYTEST_ARGS is split on purpose
    timeout -k 30 "${SPACE_TEST_TIMEOUT:-2400}" \
        "$py" -m pytest -q -rfE -p no:cacheprovider --junitxml="$xml" ${PYTEST_ARGS:-} "${dirs[@]}"
    py_rc=$?
    if ((py_rc == 124 || py_rc == 137)); then
        echo "pytest: killed after ${SPACE_TEST_TIMEOUT:-2400}s"
    fi
    counts=$("$py" - "$xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("none")
    sys.exit(0)
ok = bad = skip = 0
for case in root.iter("testcase"):
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        bad += 1
    elif "skipped" not in tags:
        ok += 1
    else:
        skip += 1
print(ok, bad, skip)
PY
)
    if [[ $counts == none ]]; then
        echo "pytest: no results (exit $py_rc)"
        failed=$((failed + 1))
    else
        read -r ok bad skip <<<"$counts"
        skipped=$((skipped + skip))
        passed=$((passed + ok))
        failed=$((failed + bad))
        # pytest failing with nothing failed in the XML (internal error, interrupted,
        # nothing collected) still counts as a failure.
        if ((py_rc != 0 && bad == 0)); then
            echo "pytest: exited $py_rc"
            failed=$((failed + 1))
        fi
    fi
else
    echo "pytest: no test directories"
fi

# A skip is never silent: it is named on the closing line (which still starts `N passed, N failed`).
if ((skipped)); then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
((failed == 0 && passed > 0))
