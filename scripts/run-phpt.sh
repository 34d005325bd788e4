#!/usr/bin/env bash
# Run the PHPT suite in php-tests/ against the built extension.
#
#   scripts/run-phpt.sh [path/to/libredis_lease.so]
#
# PHPT_TESTS (file names in php-tests/, globs allowed, space-separated) runs those only.
# Prints run-tests' own report (with diffs of failures), then a final line
#   PHPT: N passed, N failed
# If PHPT_COUNTS_FILE is set, "passed failed" is also written there.
# FAIL, BORK and LEAK (and tests that never reported a result) count as
# failed; SKIP counts as neither. Exits non-zero if anything failed or if no
# test ran at all.
set -u

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
so="${1:-$repo_root/target/release/libredis_lease.so}"
# php8.x-dev ships run-tests.php beside the extension directory (/usr/lib/php/<api>/build).
run_tests="${RUN_TESTS_PHP:-$(php-config --extension-dir 2>/dev/null)/build/run-tests.php}"
tests_dir="$repo_root/php-tests"
if [ -n "${PHPT_TESTS:-}" ]; then
    tests=()
    for t in $PHPT_TESTS; do
        for f in "$tests_dir"/$t; do
            [ -f "$f" ] && tests+=("$f")
        done
    done
else
    tests=("$tests_dir")
fi

report() {
    # $1 passed, $2 failed
    echo "PHPT: $1 passed, $2 failed"
    if [ -n "${PHPT_COUNTS_FILE:-}" ]; then
        echo "$1 $2" > "$PHPT_COUNTS_FILE"
    fi
}

if [ "${#tests[@]}" -eq 0 ]; then
    echo "run-phpt: PHPT_TESTS ($PHPT_TESTS) names no test in $tests_dir" >&2
    report 0 1
    exit 1
fi

php_bin="$(command -v php || true)"
if [ -z "$php_bin" ]; then
    echo "run-phpt: php not found in PATH" >&2
    report 0 1
    exit 1
fi
if [ ! -f "$run_tests" ]; then
    echo "run-phpt: $run_tests not found (install php8.2-dev)" >&2
    report 0 1
    exit 1
fi
if [ ! -f "$so" ]; then
    echo "run-phpt: extension not found: $so" >&2
    report 0 1
    exit 1
fi
# run-tests needs an absolute path for -d extension=.
so="$(cd "$(dirname "$so")" && pwd)/$(basename "$so")"

# Fail early and clearly if the library does not load as a PHP extension;
# otherwise every test would fail with the same startup warning.
if ! load_out="$("$php_bin" -n -d "extension=$so" -r 'exit(extension_loaded("redis_lease") ? 0 : 1);' 2>&1)"; then
    echo "run-phpt: $so does not load as the redis_lease extension:" >&2
    echo "$load_out" >&2
    report 0 1
    exit 1
fi

# run-tests leaves .diff/.out/.exp/.log/.php/.sh files beside failed tests;
# drop stale ones from an earlier run so they cannot be mistaken for new.
find "$tests_dir" -maxdepth 1 -type f \( -name '*.diff' -o -name '*.out' -o -name '*.exp' \
    -o -name '*.log' -o -name '*.php' -o -name '*.sh' -o -name '*.mem' \) -delete

results="$(mktemp)"
# Checks that failed, from every attempt (see rl_ok in php-tests/inc/redis.inc).
RL_FAILURE_LOG="$(mktemp)"
export RL_FAILURE_LOG
trap 'rm -f "$results" "$RL_FAILURE_LOG"' EXIT

# run-tests reads these; TEST_PHP_EXECUTABLE is also what tests use to start
# child PHP processes (together with TEST_PHP_EXTRA_ARGS, set per test).
export NO_INTERACTION=1
export TEST_PHP_EXECUTABLE="$php_bin"
unset TEST_PHP_ARGS || true

"$php_bin" -n "$run_tests" \
    -n -d "extension=$so" \
    -q --no-color --no-progress --show-diff --show-slow 5000 -j2 \
    -W "$results" \
    "${tests[@]}"
rt_status=$?

# -W lines look like "PASSED<TAB>/abs/path/test.phpt".
passed=0
failed=0
while IFS=$'\t' read -r status file; do
    case "$status" in
        PASSED|WARNED|XFAILED|XLEAKED) passed=$((passed + 1)) ;;
        SKIPPED) ;;
        *) failed=$((failed + 1)); echo "run-phpt: $status $file" ;;
    esac
done < "$results"

# A test that crashed a worker never reports; count it as failed.
expected="$(find "${tests[@]}" -name '*.phpt' | wc -l)"
reported="$(wc -l < "$results")"
if [ "$reported" -lt "$expected" ]; then
    missing=$((expected - reported))
    echo "run-phpt: $missing test(s) reported no result" >&2
    failed=$((failed + missing))
fi

if [ -s "$RL_FAILURE_LOG" ]; then
    echo "run-phpt: checks that failed in some attempt (run-tests.php retries a failed test once"
    echo "run-phpt: when it uses sleep() or microtime(); a retried test that passed counts as passed):"
    sed -n '1,50s/^/run-phpt:   /p' "$RL_FAILURE_LOG"
fi

report "$passed" "$failed"
if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    exit 1
fi
if [ "$rt_status" -ne 0 ]; then
    echo "run-phpt: run-tests.php exited with status $rt_status" >&2
    exit 1
fi
exit 0
