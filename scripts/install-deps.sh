#!/usr/bin/env bash
# Installs what building and testing redis_lease needs on Debian 12, when missing.
set -euo pipefail

packages=(php8.2-dev php8.2-cli php8.2-fpm php-pear redis-server libclang-dev clang php8.2-redis)
# debootstrap makes the chroots of scripts/cells.sh; shellcheck lints the shell scripts.
packages+=(debootstrap shellcheck)
# The frameworks the bridge (bridge/) is tested against, from Debian (no Composer registry here), each
# with its own autoloader under /usr/share/php: Laravel 8.83 (Illuminate/autoload.php, all of
# Illuminate\* and its dependencies) and Symfony 5.4 (Symfony/Component/<Name>/autoload.php for
# HttpFoundation, HttpKernel, Lock, Semaphore). The test apps load mbstring and opcache into php-fpm.
packages+=(php-laravel-framework php-symfony-http-foundation php-symfony-http-kernel php-symfony-lock
    php-symfony-semaphore php8.2-mbstring php8.2-opcache)
# Prometheus 2.42 and promtool check the alert rules and the dashboard against a real scrape
# (php-tests/ops_prometheus.phpt), which starts its own Prometheus.
packages+=(prometheus)
missing=()
for p in "${packages[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
# The packaging linters come from PyPI and npm (scripts/lint-packaging.sh).
command -v node >/dev/null || missing+=(nodejs npm)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if ((${#missing[@]})); then
    echo "Installing: ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
    $sudo apt-get update -qq
    # policy-rc.d keeps the packaged redis-server from starting: tests start their own.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
    echo "cargo not found: install a Rust toolchain >= 1.85 (https://rustup.rs) and retry." >&2
    exit 1
fi
