#!/usr/bin/env bash
# Builds target/release/libredis_lease.so against the PHP found by php-config.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
echo "$PWD/target/release/libredis_lease.so"
