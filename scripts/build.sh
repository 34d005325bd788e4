#!/usr/bin/env bash
# Builds target/release/libredis_lease.so against the PHP found by php-config.
set -euo pipefail
cd "$(dirname "$0")/.."
# The same PHP_CONFIG and PHP as ext/config.m4 passes, so both routes share one build.
PHP_CONFIG=$(command -v php-config)
PHP=$("$PHP_CONFIG" --php-binary)
export PHP_CONFIG PHP
cargo build --release --locked --quiet
so="${CARGO_TARGET_DIR:-$PWD/target}/release/libredis_lease.so"
# A build loaded into the other flavour of PHP (NTS/ZTS) is then refused by PHP's own check,
# naming both builds (see ext/weaken-zend.php).
"$PHP" -n ext/weaken-zend.php "$so" >/dev/null
echo "$so"
