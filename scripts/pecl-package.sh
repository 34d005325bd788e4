#!/usr/bin/env bash
# The PECL package: writes package.xml from the files a source release needs,
#   scripts/pecl-package.sh          regenerate package.xml
#   scripts/pecl-package.sh --check  fail if package.xml is stale, then build the
#                                    .tgz with `pecl package` and build and load the
#                                    extension from it (phpize, configure, make)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

files() {
    printf '%s\n' config.m4 ext/config.m4 ext/Makefile.frag ext/weaken-zend.php Cargo.toml Cargo.lock build.rs LICENSE README.md \
        stubs/redis_lease.stub.php bin/redis-lease docs/operators.md
    git ls-files src ops | sort
}

generate() {
    cat <<XML
<?xml version="1.0" encoding="UTF-8"?>
<package version="2.0" xmlns="http://pear.php.net/dtd/package-2.0" xmlns:tasks="http://pear.php.net/dtd/tasks-1.0" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://pear.php.net/dtd/tasks-1.0 http://pear.php.net/dtd/tasks-1.0.xsd http://pear.php.net/dtd/package-2.0 http://pear.php.net/dtd/package-2.0.xsd">
 <name>redis_lease</name>
 <channel>pecl.php.net</channel>
 <summary>Redis session locking and distributed locks (leases with fencing tokens)</summary>
 <description>A locking Redis session handler (session.save_handler = redis_lease, phpredis-compatible) and a DistributedLock class, written in Rust. Building needs cargo (Rust 1.85 or later) and libclang.</description>
 <lead>
  <name>redis_lease authors</name>
  <user>redis_lease</user>
  <email>redis_lease@users.noreply.github.com</email>
  <active>yes</active>
 </lead>
 <date>2026-11-30</date>
 <version>
  <release>$version</release>
  <api>$version</api>
 </version>
 <stability>
  <release>alpha</release>
  <api>alpha</api>
 </stability>
 <license uri="https://opensource.org/licenses/MIT">MIT</license>
 <notes>See README.md.</notes>
 <contents>
  <dir name="/">
XML
    files | while read -r f; do
        case $f in
            *.rs|*.lua|*.m4|Makefile.frag|*/Makefile.frag|ext/*.php|Cargo.*) role=src ;;
            bin/*) role=script ;;
            *.php) role=doc ;;
            *) role=doc ;;
        esac
        echo "   <file name=\"$f\" role=\"$role\"/>"
    done
    cat <<XML
  </dir>
 </contents>
 <dependencies>
  <required>
   <php>
    <min>8.2.0</min>
   </php>
   <pearinstaller>
    <min>1.10.0</min>
   </pearinstaller>
  </required>
 </dependencies>
 <providesextension>redis_lease</providesextension>
 <extsrcrelease>
  <configureoption name="enable-redis-lease-debug" default="no" prompt="Build with cargo's debug profile?"/>
 </extsrcrelease>
</package>
XML
}

if [[ ${1:-} != --check ]]; then
    generate > package.xml
    echo "wrote package.xml ($(files | wc -l) files)"
    exit 0
fi

if ! diff -u package.xml <(generate); then
    echo "package.xml is stale: run scripts/pecl-package.sh"
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files | while read -r f; do mkdir -p "$work/src/$(dirname "$f")"; cp "$f" "$work/src/$f"; done
cp package.xml "$work/src/"
(cd "$work/src" && pecl package package.xml >"$work/package.log" 2>&1) || { cat "$work/package.log"; exit 1; }
tgz=$(ls "$work"/src/redis_lease-*.tgz)
mkdir "$work/build" && tar -xzf "$tgz" -C "$work/build"
cd "$work/build/redis_lease-$version"
# Reuse the dependencies already built for this checkout.
export CARGO_TARGET_DIR=$OLDPWD/target
{ phpize && ./configure && make; } >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
# grep reads a here-string: "php | grep -q" fails under pipefail when grep stops reading early.
grep -q 'redis_lease support => enabled' <<<"$(php -n -d "extension=$PWD/modules/redis_lease.so" --ri redis_lease)"
echo "pecl package: $(basename "$tgz") builds and loads"
