#!/usr/bin/env bash
# The main job: installs what is missing, builds the extension, and runs the demo
# against a private redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
so=$(bash scripts/build.sh)
export REDIS_LEASE_SO=$so
echo "== Sessions: the seeds' race on php-fpm =="
php -n -d "extension=$so" demo/session_demo.php
echo
echo "== DistributedLock: processes contending for one lock =="
php -n -d "extension=$so" demo/lock_demo.php
