#!/usr/bin/env bash
# `make bench`: installs the anchors from Debian (phpredis 5.3.7, Symfony Lock, Laravel 8.83),
# builds the extension and runs bench/run.php. BENCH_REPS sets the repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
missing=()
for p in php8.2-redis php-symfony-lock php-laravel-framework; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
# Symfony Semaphore 5.4 (php-symfony-semaphore), the semaphore anchor of scenarios 7 and 8.
[[ $(dpkg-query -W -f='${Status}' php-symfony-semaphore 2>/dev/null) == "install ok installed" ]] || missing+=(php-symfony-semaphore)
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
so=$(bash scripts/build.sh)
# The floor row's bare redis-rs loop (examples/floor.rs).
cargo build --release --locked --quiet --example floor
REDIS_LEASE_FLOOR=$PWD/target/release/examples/floor REDIS_LEASE_SO=$so php -n -d extension=igbinary -d extension=redis -d "extension=$so" bench/run.php
