#!/usr/bin/env bash
# Builds target/release/libredis_lease.so against the PHP found by php-config.
set -euo pipefail
cd "$(dirname "$0")/.."
# The same PHP_CONFIG and PHP as ext/config.m4 passes, so both routes share one build.
PHP_CONFIG=$(command -v php-config)
PHP=$("$PHP_CONFIG" --php-binary)
export PHP_CONFIG PHP
cargo build --release --locked --quiet
echo "$PWD/target/release/libredis_lease.so"
