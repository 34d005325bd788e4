#!/usr/bin/env bash
# A PIE pre-packaged binary: builds the release .so for the PHP found by
# php-config and packs it, as redis_lease.so at the archive's root, under the
# exact name PIE looks for on a release (php/pie's PrePackagedBinaryAssetName):
#
#   php_redis_lease-<tag>_php<major.minor>-<arch>-<os>-<libc>[-debug][-zts].zip
#
#   <tag>   the release tag as written (PIE asks GitHub for the release of the
#           tag it resolved): default "v" + Cargo.toml's version
#   <arch>  x86_64 | arm64 (PIE's names: never amd64 or aarch64)
#   <os>    linux | darwin
#   <libc>  glibc | musl on Linux (PIE reads `ldd --version`), bsdlibc on macOS
#
#   scripts/package-binary.sh [--check] [tag]   prints the archive's path (in dist/)
#
# --check: also unpacks the archive into a temporary extension dir and loads it
# with `php -n -d extension_dir=... -d extension=redis_lease`, as PIE installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
if [[ ${1:-} == --check ]]; then check=true; shift; fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
tag=${1:-v$version}

php_config=$(command -v php-config) || { echo "package-binary.sh: php-config not found" >&2; exit 2; }
php_bin=$("$php_config" --php-binary)
php_mm=$("$php_bin" -n -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;')
zts=$("$php_bin" -n -r 'echo PHP_ZTS ? "-zts" : "";')
debug=$("$php_bin" -n -r 'echo PHP_DEBUG ? "-debug" : "";')
case "$(uname -m)" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "package-binary.sh: no PIE name for architecture $(uname -m)" >&2; exit 2 ;;
esac
case "$(uname -s)" in
    Linux)
        os=linux
        if grep -qi musl <<<"$(ldd --version 2>&1)"; then libc=musl; else libc=glibc; fi
        ;;
    Darwin) os=darwin libc=bsdlibc ;;
    *) echo "package-binary.sh: no PIE name for $(uname -s)" >&2; exit 2 ;;
esac
name="php_redis_lease-${tag}_php${php_mm}-${arch}-${os}-${libc}${debug}${zts}.zip"

so=$(bash scripts/build.sh)
mkdir -p dist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$so" "$work/redis_lease.so"
strip --strip-debug "$work/redis_lease.so" 2>/dev/null || true
rm -f "dist/$name"
(cd "$work" && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED).write("redis_lease.so")' "$PWD/out.zip")
mv "$work/out.zip" "dist/$name"

if $check; then
    ext_dir=$(mktemp -d)
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "dist/$name" "$ext_dir"
    loaded=$("$php_bin" -n -d "extension_dir=$ext_dir" -d extension=redis_lease -r 'echo phpversion("redis_lease");')
    rm -rf "$ext_dir"
    [[ $loaded == "$version" ]] || { echo "package-binary.sh: dist/$name did not load (got '$loaded')" >&2; exit 1; }
    echo "package-binary.sh: dist/$name unpacks and loads (redis_lease $loaded)" >&2
fi
echo "$PWD/dist/$name"
