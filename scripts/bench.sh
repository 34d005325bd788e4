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
# valgrind: the client's instructions per lock pair (bench/client_instructions.php).
[[ $(dpkg-query -W -f='${Status}' valgrind 2>/dev/null) == "install ok installed" ]] || missing+=(valgrind)
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
# Session compression (issue 29): on this host (redis_lease only: Debian 12's phpredis 5.3 has no session
# compression), then in the trixie cell beside phpredis 6.2 when its chroot is made (scripts/cells.sh).
REDIS_LEASE_SO=$so php -n bench/compression.php --json=bench/results/compression-host.json
if bash scripts/cells.sh list | grep -q '^php8.4+redis8.0' && [[ -d $(bash scripts/cells.sh list | sed -n 's/^php8.4+redis8.0 (trixie chroot: \(.*\))$/\1/p') ]]; then
    bash scripts/cells.sh exec php8.4+redis8.0 bash -c '
        CARGO_TARGET_DIR=/build/target-bench PHP_CONFIG=$(command -v php-config) cargo build --release --offline --quiet &&
        REDIS_LEASE_SO=/build/target-bench/release/libredis_lease.so php -n bench/compression.php --json=/tmp/compression.json &&
        cat /tmp/compression.json' | tee /dev/stderr | sed -n '/^{/,$p' >bench/results/compression-php8.4.json
fi
# Threads (issue 32): the contended session and the lock loop on Apache's mod_php in threads beside php-fpm,
# both on the ZTS PHP of the php8.2-zts cell, when its chroot is made.
if bash scripts/cells.sh list | grep -q '^php8.2-zts+redis7.0' && [[ -d $(bash scripts/cells.sh list | sed -n 's/^php8.2-zts+redis7.0 (bookworm-zts chroot: \(.*\))$/\1/p') ]]; then
    bash scripts/cells.sh exec php8.2-zts+redis7.0 bash -c '
        export CARGO_TARGET_DIR=/build/target-bench CARGO_NET_OFFLINE=true
        so=$(bash scripts/build.sh) &&
        REDIS_LEASE_SO=$so php -n -d "extension=$so" bench/threads.php --json=/tmp/threads.json &&
        cat /tmp/threads.json' | tee /dev/stderr | sed -n '/^{/,$p' >bench/results/threads-php8.2-zts.json
fi
