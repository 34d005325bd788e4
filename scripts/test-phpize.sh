#!/usr/bin/env bash
# The PECL/PIE route: phpize, configure, make, make install into a temporary root,
# then load the installed extension. Reuses target/ when it is already built.
set -euo pipefail
cd "$(dirname "$0")/../ext"
root=$(mktemp -d)
trap 'rm -rf "$root"; phpize --clean >/dev/null 2>&1 || true' EXIT
phpize --clean >/dev/null 2>&1 || true
log=$root/build.log
run() { "$@" >>"$log" 2>&1 || { cat "$log"; echo "failed: $*"; exit 1; }; }
run phpize
run ./configure
run make
run make install INSTALL_ROOT="$root"
so=$(find "$root" -name redis_lease.so)
test -n "$so" || { echo "make install put no redis_lease.so under $root"; exit 1; }
# grep reads a here-string: "php | grep -q" fails under pipefail when grep stops reading early.
grep -q 'redis_lease support => enabled' <<<"$(php -n -d "extension=$so" --ri redis_lease)"
echo "phpize route: installed and loaded $(basename "$so")"
