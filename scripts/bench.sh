#!/usr/bin/env bash
# `make bench`: installs the anchors from Debian (phpredis 5.3.7, Symfony Lock),
# builds the extension and runs bench/run.php. BENCH_REPS sets the repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
missing=()
for p in php8.2-redis php-symfony-lock; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
so=$(bash scripts/build.sh)
REDIS_LEASE_SO=$so php -n -d extension=igbinary -d extension=redis -d "extension=$so" bench/run.php
