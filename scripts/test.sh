#!/usr/bin/env bash
# Runs every test: formatting and lints, the Rust core against a real redis-server,
# the PHPT suite through PHP's run-tests.php and the failover matrix, on the host (PHP 8.2,
# Redis 7.0), then the cargo and PHPT tests again in each cell of scripts/cells.sh (PHP 8.4 and 8.5,
# Redis 8, Valkey 8.1 and 9.1). Ends with "N passed, N failed".
# CELLS="php8.4+redis8.0 ..." picks cells; CELLS=none skips them (and says so).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash scripts/install-deps.sh || exit 1

# The cells' chroots are made (or found in their cache) in the background meanwhile: that is network
# and disk work, run at idle CPU and I/O priority so the host's timed tests keep the machine.
cells_log=$(mktemp)
setpriv --pdeathsig TERM -- chrt --idle 0 nice -n 19 ionice -c 3 \
    bash scripts/cells.sh prepare >"$cells_log" 2>&1 &
cells_prepare=$!
trap '[[ -z $cells_prepare ]] || { kill "$cells_prepare" 2>/dev/null; wait "$cells_prepare" 2>/dev/null; }; rm -f "$cells_log"' EXIT
# One PHP_CONFIG/PHP for every cargo call here, as scripts/build.sh and ext/config.m4 use:
# ext-php-rs rebuilds when they change.
PHP_CONFIG=$(command -v php-config)
PHP=$("$PHP_CONFIG" --php-binary)
export PHP_CONFIG PHP
passed=0
failed=0

step() { # name, command...: a check that counts as one test
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); echo "PASS $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}

step "cargo fmt --check" cargo fmt --check
step "cargo clippy (extension)" cargo clippy --release --locked --quiet -- -D warnings
step "cargo clippy (core and tests)" cargo clippy --no-default-features --tests --locked --quiet -- -D warnings
step "php -l stubs" php -l stubs/redis_lease.stub.php
step "hadolint + actionlint" bash scripts/lint-packaging.sh
step "shellcheck (warnings)" shellcheck --severity=warning scripts/*.sh .ci/run testing/*.sh

if ! so=$(bash scripts/build.sh); then
    echo "build failed (the cells were not run)"
    echo "$passed passed, $((failed + 1)) failed"
    exit 1
fi

step "phpize/configure/make install route" bash scripts/test-phpize.sh
step "pecl package builds and loads" bash scripts/pecl-package.sh --check
step "PIE binary archive (PIE's asset name) unpacks and loads" bash scripts/package-binary.sh --check

# The core: cargo prints one "test result:" line per test binary. The model (tests/model.rs) runs on its
# own, printing each configuration's state count and time and the first line of each reverted fix's
# counterexample (the traces themselves: cargo test --test model -- --nocapture).
cargo_log=$(mktemp)
targets=(--lib)
for t in tests/*.rs; do
    t=$(basename "$t" .rs)
    [[ $t == model ]] || targets+=(--test "$t")
done
cargo test --no-default-features --locked "${targets[@]}" 2>&1 | tee "$cargo_log"
cargo_status=${PIPESTATUS[0]}
cargo test --no-default-features --locked --test model -- --nocapture 2>&1 |
    grep --line-buffered -E '^(test |test result:|counterexample to|violated:|never reached:|.*: [0-9]+ states \()' |
    tee -a "$cargo_log"
((PIPESTATUS[0] == 0)) || cargo_status=1
read -r cp cf < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$cargo_log")
rm -f "$cargo_log"
if ((cargo_status != 0 && cf == 0)); then cf=1; fi
echo "cargo test: $cp passed, $cf failed"
passed=$((passed + cp))
failed=$((failed + cf))

# PHPT through run-tests.php.
counts=$(mktemp)
PHPT_COUNTS_FILE=$counts bash scripts/run-phpt.sh "$so"
read -r pp pf < "$counts" || { pp=0; pf=1; }
rm -f "$counts"
passed=$((passed + pp))
failed=$((failed + pf))
# The failover matrix (testing/failover/matrix.php): php-fpm under load through
# Sentinel and Cluster failovers, one test per cell and wait_replicas value.
counts=$(mktemp)
MATRIX_COUNTS_FILE=$counts REDIS_LEASE_SO="$so" "$PHP" testing/failover/matrix.php
read -r mp mf < "$counts" || { mp=0; mf=1; }
rm -f "$counts"
echo "failover matrix: $mp passed, $mf failed"
passed=$((passed + mp))
failed=$((failed + mf))
echo "host (PHP $(php -r 'echo PHP_VERSION;'), $(redis-server --version | cut -d' ' -f1-3)): $passed passed, $failed failed"
host_seconds=$SECONDS

# The cells: the cargo and PHPT tests again on other PHP and server versions. The run does not wait
# for the background job: it takes each chroot as soon as that one is ready (a lock per chroot).
counts=$(mktemp)
CELLS_COUNTS_FILE=$counts bash scripts/cells.sh run
read -r xp xf < "$counts" || { xp=0; xf=1; }
rm -f "$counts"
wait "$cells_prepare"
prepare_status=$?
cells_prepare=
if ((prepare_status == 0)); then
    grep '^cells:' "$cells_log" | sed 's/^cells:/cells (background):/'
else
    echo "cells: making the chroots in the background failed (the run above tried again); its output:"
    cat "$cells_log"
fi
passed=$((passed + xp))
failed=$((failed + xf))

echo "time: host ${host_seconds} s, cells $((SECONDS - host_seconds)) s, in all $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "$passed passed, $failed failed"
((failed == 0))
