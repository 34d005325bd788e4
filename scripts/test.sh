#!/usr/bin/env bash
# Runs every test: formatting and lints, the Rust core against a real redis-server,
# the PHPT suite through PHP's run-tests.php, and the failover matrix. Ends with
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 1
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

if ! so=$(bash scripts/build.sh); then
    echo "build failed"
    echo "$passed passed, $((failed + 1)) failed"
    exit 1
fi

step "phpize/configure/make install route" bash scripts/test-phpize.sh
step "pecl package builds and loads" bash scripts/pecl-package.sh --check
step "PIE binary archive (PIE's asset name) unpacks and loads" bash scripts/package-binary.sh --check

# The core: cargo prints one "test result:" line per test binary.
cargo_log=$(mktemp)
cargo test --no-default-features --locked 2>&1 | tee "$cargo_log"
cargo_status=${PIPESTATUS[0]}
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

echo "$passed passed, $failed failed"
((failed == 0))
