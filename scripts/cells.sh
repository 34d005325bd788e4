#!/usr/bin/env bash
# Test cells: every test (the cargo core tests and the PHPT suite) on PHP and Redis/Valkey versions other
# than the host's (Debian 12: PHP 8.2, Redis 7.0), each in a Debian chroot made with debootstrap.
#
#   scripts/cells.sh prepare          make the chroots that are not in the cache yet (network and disk:
#                                     scripts/test.sh runs this in the background during the host tests)
#   scripts/cells.sh run [CELL...]    build the committed HEAD in each chroot, run every test per cell;
#                                     prints "cell NAME: cargo N passed N failed, PHPT N passed N failed"
#                                     per cell and ends with "cells: N passed, N failed"
#   scripts/cells.sh exec CELL [CMD]  run CMD (default: a shell) in CELL's chroot, its server first on the
#                                     PATH as redis-server, this working tree read-only at /repo
#   scripts/cells.sh list             the cells and their chroots
#   scripts/cells.sh clean            delete the cached chroots
#
# Cells (name: PHP + server, chroot):
#   php8.4+redis8.0    trixie: php8.4 and redis-server 8.0 (and Laravel 10.48, Symfony 6.4 for the bridge)
#   php8.4+valkey8.1   trixie: the same chroot and build, valkey-server 8.1 as redis-server
#   php8.5+valkey9.1   sid: php8.5 from experimental (no phpredis for it), valkey-server 9.1
#   php8.2-zts+redis7.0
#                      bookworm: a ZTS PHP 8.2 built from Debian's source (CLI, php-fpm, Apache's
#                      mod_php), redis-server 7.0; its tests also run Apache 2.4 mpm_event with
#                      mod_php, PHP in threads (php-tests/zts_*.phpt)
# A cell's name is checked against what its chroot runs: when a suite moves on, the cell fails until
# its name here is updated, so a name never claims a version that was not tested.
#
# The newest frameworks: cell php8.4+redis8.0 also runs the bridge tests (php-tests/bridge_*.phpt) on
# Debian's newest Laravel and Symfony, which trixie does not have: "sid" (Laravel 13, Symfony 7.4, as
# sid serves them) and "experimental" (the same with experimental's Symfony 8). They are pure PHP:
# their packages and dependencies (Architecture: all, as apt would install them) are unpacked into
# trees of their own, and each tree is bind-mounted over the chroot's /usr/share/php for its pass (the
# chroot's PHP 8.4, phpredis and extensions stay). Beside them, the store test cases of Symfony's
# source that its packages do not ship (Lock's test traits, Semaphore's AbstractStoreTestCase), from
# Debian's source tarball, checked against its Sources index. Cached in $CELLS_CACHE/frameworks-<hash>.
#
# Chroots are cached in $CELLS_CACHE (default /var/cache/redis_lease/cells), one per suite, under a
# name that carries a hash of its recipe (suite, packages, the steps after debootstrap): changing the
# recipe makes a new chroot, and the old one is deleted once the new one is ready. A fresh machine makes
# them from scratch (deb.debian.org, about 3 GB). Inside, the host's ~/.cargo and ~/.rustup are
# bind-mounted (toolchain and crate cache: `cargo --offline`), the repo's committed HEAD is cloned to
# /build/src, and build output is kept in /build/target between runs.
#
# Everything that runs in a chroot runs in its own mount and pid namespaces (unshare): its mounts are
# never visible outside, and the kernel ends every process left in it (redis-server, php-fpm) when
# it ends, even if this script is killed; the mounts are also unmounted in reverse order on any exit.
#
# The tests of a cell see RL_CELL=<its name> (unset on the host).
#
# Environment: CELLS (cell names, space-separated; default all; "none": skip, said loudly),
# CELLS_CACHE, CELLS_MIRROR (default http://deb.debian.org/debian), CELLS_COUNTS_FILE ("passed failed"
# is written there), CELLS_LOG (prepare: append its output there instead of stdout).
set -uo pipefail

self=$(realpath "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/.." && pwd)
cache=${CELLS_CACHE:-/var/cache/redis_lease/cells}
mirror=${CELLS_MIRROR:-http://deb.debian.org/debian}
all_cells=(php8.4+redis8.0 php8.4+valkey8.1 php8.5+valkey9.1 php8.2-zts+redis7.0)
apt_opts=(-q -o Acquire::Retries=5 -o Acquire::http::Timeout=30 -o Acquire::Check-Valid-Until=false
    -o APT::Install-Recommends=false -o Dpkg::Use-Pty=0)

log() { echo "cells: $*"; }
die() { echo "cells: $*" >&2; exit 1; }

# ---------------------------------------------------------------- recipes

cell_root() { # cell -> chroot
    case $1 in
        php8.2-zts+*) echo bookworm-zts ;;
        php8.4+*) echo trixie ;;
        php8.5+*) echo sid ;;
        *) return 1 ;;
    esac
}

cell_server() { # cell -> redis | valkey
    case $1 in
        *+redis*) echo redis ;;
        *+valkey*) echo valkey ;;
        *) return 1 ;;
    esac
}

root_suite() {
    case $1 in
        trixie) echo trixie ;;
        bookworm-zts) echo bookworm ;;
        sid) echo sid ;;
    esac
}

# What debootstrap installs (--include). What the tests need besides PHP and the servers: git (the
# clone), clang/libclang-dev (bindgen), gcc (the linker), openssl (testing/make-pki.sh), procps
# (kill, ps), util-linux (setsid, setpriv: in minbase).
root_packages() {
    local common=ca-certificates,git,procps,openssl,gcc,libc6-dev,clang,libclang-dev
    case $1 in
        trixie) echo "$common,php8.4-dev,php8.4-cli,php8.4-fpm,php8.4-redis,php8.4-igbinary,redis-server,valkey-server" ;;
        sid) echo "$common,valkey-server" ;;
        bookworm-zts) echo "$common,make,pkg-config,xz-utils,wget,redis-server" ;;
    esac
}

# The function run inside the new chroot after debootstrap (with the network), if any.
root_steps() {
    case $1 in
        trixie) echo post_install_frameworks ;;
        sid) echo post_install_php85 ;;
        bookworm-zts) echo post_install_php_zts ;;
    esac
}

# trixie's Laravel 10.48 and Symfony 6.4, the lowest versions bridge/composer.json declares, for the
# bridge_*.phpt tests (the host has Laravel 8.83 and Symfony 5.4). sid's (Laravel 13, Symfony 7.4)
# need phpredis and mbstring for PHP 8.5, which only experimental could give: the bridge tests skip
# there, saying so.
post_install_frameworks() {
    apt_update &&
        apt-get "${apt_opts[@]}" install -y php-laravel-framework php-symfony-http-foundation \
            php-symfony-http-kernel php-symfony-lock php-symfony-semaphore php8.4-mbstring php8.4-opcache
}

# PHP 8.5 is only in experimental. Its snapshot's Release files are expired (hence
# Check-Valid-Until=false in apt_opts), and asked for php8.5-* and sid's php-common at once, apt's
# solvers take experimental's php-common (2:102~), which Breaks php8.5-common (unless php-common/unstable
# happens to come last on the command line). So: sid's php-common first, held, then PHP 8.5.
post_install_php85() {
    echo "deb $mirror experimental main" >/etc/apt/sources.list.d/experimental.list
    apt_update &&
        apt-get "${apt_opts[@]}" install -y php-common/unstable &&
        apt-mark hold php-common &&
        apt-get "${apt_opts[@]}" install -y php8.5-common/experimental php8.5-cli/experimental \
            php8.5-readline/experimental php8.5-dev/experimental php8.5-fpm/experimental
}

# A thread-safe (ZTS) PHP, which no Debian suite packages: built from the orig tarball Debian's
# mirror serves for bookworm's php8.2 (its sha256 as bookworm's Sources index gives it), into
# /opt/php-zts: the CLI, php-fpm and Apache's mod_php (libphp.so, for mpm_event), with what the tests
# use (session, pcntl, posix, sockets, filter; FFI to end a thread the way a crash does). Beside it,
# Debian's NTS php8.2-cli, to check that each refuses the other's build of the extension. (The
# mirror answers 404 for trixie's and experimental's php8.4 and php8.5 orig tarballs, which their
# Sources indexes name: PHP 8.2 is the ZTS PHP this machine can build.) Everything the build needs
# is in this function (the recipe's hash covers it). About 6-10 minutes on 2 cores.
post_install_php_zts() {
    local version=8.2.32 sha256=e02aa173c236c12791696254d607da680e6d5516f8f5c2339642de7c4f944bd2
    local tarball=php8.2_$version.orig.tar.xz src=/build/php-src
    apt_update &&
        apt-get "${apt_opts[@]}" install -y apache2 apache2-dev libffi-dev php8.2-cli || return 1
    mkdir -p "$src" && cd "$src" || return 1
    if ! wget --no-verbose --tries=3 --timeout=30 -O "$tarball" "$mirror/pool/main/p/php8.2/$tarball"; then
        echo "cells: $tarball is not on the mirror any more: update post_install_php_zts to the php8.2 that" \
            "bookworm's dists/bookworm/main/source/Sources.xz names" >&2
        return 1
    fi
    echo "$sha256  $tarball" | sha256sum --check --quiet || { echo "cells: $tarball: sha256 mismatch" >&2; return 1; }
    tar -xJf "$tarball" --strip-components=1 && rm -f "$tarball" || return 1
    ./configure --quiet --prefix=/opt/php-zts --with-config-file-path=/opt/php-zts/etc --enable-zts \
        --disable-all --disable-cgi --disable-phpdbg --enable-cli --enable-fpm --with-apxs2=/usr/bin/apxs2 \
        --enable-session --enable-pcntl --enable-posix --enable-sockets --enable-filter --with-ffi >/dev/null &&
        make -j"$(nproc)" >/build/php-zts-make.log 2>&1 &&
        make install INSTALL_IT=: >>/build/php-zts-make.log 2>&1 || { tail -n 30 /build/php-zts-make.log >&2; return 1; }
    install -D -m 644 libs/libphp.so /opt/php-zts/lib/apache2/libphp.so &&
        install -D -m 644 run-tests.php /opt/php-zts/lib/php/build/run-tests.php &&
        mkdir -p /opt/php-zts/etc || return 1
    /opt/php-zts/bin/php -r 'exit(PHP_ZTS && PHP_VERSION === $argv[1] ? 0 : 1);' "$version" ||
        { echo "cells: /opt/php-zts/bin/php is not a ZTS PHP $version" >&2; return 1; }
    cd / && rm -rf "$src"
}

apt_update() { # apt-get update, three tries: it fails as a whole on one bad fetch
    local i
    for i in 1 2 3; do
        apt-get "${apt_opts[@]}" update && return 0
        echo "apt-get update failed (try $i of 3)" >&2
        sleep $((i * 10)) # a pause before asking the mirror again, not a synchronisation
    done
    return 1
}

# The hash of everything that makes a chroot: a changed recipe is a new chroot.
root_key() {
    local steps
    steps=$(root_steps "$1")
    { root_suite "$1"; root_packages "$1"
        [[ -z $steps ]] || { declare -f apt_update "$steps"; declare -p apt_opts; }; } | sha256sum | cut -c1-12
}

root_dir() { echo "$cache/$1-$(root_key "$1")"; }

# ---------------------------------------------------------------- namespaces and mounts

children=()
on_signal() {
    local pid
    for pid in "${children[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    exit 130
}

# Runs "$@" in the background in new mount and pid namespaces and waits for it. --kill-child: if
# this script dies, the kernel kills the namespace's first process, and with it every other one.
# setpriv --pdeathsig: unshare itself dies with this script.
# (In the background: this script's INT/TERM trap can then end it; CELLS_STDIN=1 keeps stdin for exec.)
in_namespaces() {
    if [[ -n ${CELLS_STDIN:-} ]]; then
        setpriv --pdeathsig KILL -- unshare --mount --pid --fork --kill-child -- "$@" <&0 &
    else
        setpriv --pdeathsig KILL -- unshare --mount --pid --fork --kill-child -- "$@" &
    fi
    local pid=$!
    children+=("$pid")
    wait "$pid"
}

# Mount points under $1 in this namespace, deepest first.
mounts_under() {
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# Unmounts whatever an older run (or a debugging session) left mounted under $1 in this namespace;
# fails if something stays mounted: deleting the directory would reach into a bind-mounted ~/.cargo.
unmount_under() {
    local m
    for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m"; done
    [[ -z $(mounts_under "$1") ]] || { echo "cells: still mounted under $1: $(mounts_under "$1" | tr '\n' ' ')" >&2; return 1; }
}

remove_dir() {
    [[ -e $1 ]] || return 0
    unmount_under "$1" && rm -rf "$1"
}

# Inside in_namespaces: mount what the chroot needs, run "$@" in it, unmount in reverse order.
enter_root() {
    local dir=$1; shift
    mounted=()
    unmount_all() {
        local i
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}"; done
        mounted=()
    }
    trap unmount_all EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mnt() { # target, mount arguments...
        local target=$1; shift
        mkdir -p "$target" && mount "$@" "$target" && mounted+=("$target")
    }
    mnt "$dir/proc" -t proc proc || return 1
    mnt "$dir/dev" --rbind /dev || return 1
    mnt "$dir/tmp" -t tmpfs -o mode=1777,size=8g tmpfs || return 1
    mnt "$dir/root/.cargo" --bind "$HOME/.cargo" || return 1
    mnt "$dir/root/.rustup" --bind "$HOME/.rustup" || return 1
    if [[ -n ${CELLS_BIND_REPO:-} ]]; then
        mnt "$dir/repo" --bind "$CELLS_BIND_REPO" && mount -o remount,bind,ro "$dir/repo" || return 1
    fi
    if [[ -n ${CELLS_FRAMEWORKS:-} ]]; then
        mnt "$dir/frameworks" --bind "$CELLS_FRAMEWORKS" && mount -o remount,bind,ro "$dir/frameworks" || return 1
    fi
    # The host's name resolution (debootstrap writes no /etc/hosts: the TLS tests connect to "localhost").
    cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null
    cp /etc/hosts "$dir/etc/hosts" || return 1
    local status=0
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb USER=root RUST_BACKTRACE=1 DEBIAN_FRONTEND=noninteractive \
        RUSTUP_AUTO_INSTALL=0 PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "$@" || status=$?
    unmount_all
    return "$status"
}

in_root() { # dir, command...: run a command in the chroot
    in_namespaces bash "$self" __enter "$@"
}

# ---------------------------------------------------------------- making chroots

check_mirror() { # suite
    local url="$mirror/dists/$1/InRelease" out
    if ! out=$(wget --no-verbose --tries=3 --timeout=20 -O /dev/null "$url" 2>&1); then
        echo "cells: the Debian mirror cannot be reached: GET $url failed: $(tail -n 1 <<<"$out")" >&2
        echo "cells: the cells need $mirror (set CELLS_MIRROR to another mirror)." >&2
        return 1
    fi
}

# Makes chroot $1 unless a ready one is cached. Holds $cache/$1.lock meanwhile, so a "run" waits for
# a "prepare" in the background instead of making it a second time.
ensure_root() {
    local root=$1 dir lock
    dir=$(root_dir "$root")
    mkdir -p "$cache"
    exec {lock}>"$cache/$root.lock"
    flock "$lock"
    if [[ -f $dir/.cells-ready ]]; then
        exec {lock}>&-
        return 0
    fi
    local t0=$SECONDS status=1 try new="$dir.new"
    command -v debootstrap >/dev/null || install_host_tools || { exec {lock}>&-; return 1; }
    log "making chroot $root ($(root_suite "$root"), recipe $(root_key "$root")) in $dir"
    # debootstrap is tried again after a failure (a download that broke off); apt-get retries its
    # own downloads (Acquire::Retries), so the steps after it are not.
    for try in 1 2; do
        remove_dir "$new" || break
        check_mirror "$(root_suite "$root")" || break
        mkdir -p "$new"
        # debootstrap mounts proc and sys in the target: in namespaces of their own, nothing stays mounted.
        if in_namespaces debootstrap --variant=minbase --include="$(root_packages "$root")" \
            "$(root_suite "$root")" "$new" "$mirror" >"$cache/$root.debootstrap.log" 2>&1; then
            log "debootstrap of $root took $((SECONDS - t0)) s"
            # No service may start in the chroot (apt's postinst scripts ask policy-rc.d).
            printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d" && chmod 755 "$new/usr/sbin/policy-rc.d"
            local steps
            steps=$(root_steps "$root")
            if [[ -z $steps ]] || in_root "$new" bash -c "$(declare -f apt_update "$steps"; declare -p apt_opts mirror)
                $steps"; then
                status=0
            else
                echo "cells: the steps after debootstrap failed for $root" >&2
            fi
            break
        fi
        echo "cells: debootstrap of $root failed (try $try of 2); the end of its log:" >&2
        tail -n 15 "$cache/$root.debootstrap.log" | sed 's/^/cells:   /' >&2
        ((try < 2)) && sleep 15 # a pause before asking the mirror again, not a synchronisation
    done
    if ((status == 0)); then
        mkdir -p "$new/build" && touch "$new/.cells-ready" && remove_dir "$dir" && mv "$new" "$dir" || status=1
    fi
    if ((status == 0)); then
        log "chroot $root made in $((SECONDS - t0)) s ($(du -sh "$dir" | cut -f1))"
        # Chroots of older recipes.
        local old
        for old in "$cache/$root"-????????????; do # the recipe hash (not bookworm-zts-* for bookworm)
            [[ $old != "$dir" && -d $old ]] && { log "deleting $old (an older recipe)"; remove_dir "$old"; }
        done
    else
        remove_dir "$new"
        echo "cells: could not make the $root chroot" >&2
    fi
    exec {lock}>&-
    return "$status"
}

install_host_tools() {
    log "installing debootstrap"
    apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

# ---------------------------------------------------------------- the newest frameworks

frameworks_cell=php8.4+redis8.0
framework_trees=(sid experimental)
framework_packages=(php-laravel-framework php-symfony-lock php-symfony-semaphore php-symfony-http-foundation
    php-symfony-http-kernel phpunit)
# Symfony's source as Debian's mirror serves it (bookworm's 5.4: the mirror keeps no newer tarball).
symfony_source=5.4.53+dfsg

frameworks_key() {
    { declare -p framework_trees framework_packages symfony_source apt_opts; declare -f make_frameworks tree_prefs; } |
        sha256sum | cut -c1-12
}

frameworks_dir() { echo "$cache/frameworks-$(frameworks_key)"; }

# apt preferences of a tree: experimental's Symfony over sid's, for every php-symfony-* package.
tree_prefs() {
    case $1 in
        sid) : ;;
        experimental) printf 'Package: php-symfony-*\nPin: release a=experimental\nPin-Priority: 990\n' ;;
    esac
}

# Makes $1 (a new directory): one tree per framework_trees entry, and store-tests/. Uses the host's apt
# with a configuration and state of its own (nothing on the host changes).
make_frameworks() {
    local out=$1 apt_dir=$1/.apt tree i
    mkdir -p "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs" || return 1
    : >"$apt_dir/state/status"
    printf 'deb %s sid main\ndeb %s experimental main\ndeb-src %s bookworm main\n' "$mirror" "$mirror" "$mirror" \
        >"$apt_dir/sources.list"
    local apt=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State=$apt_dir/state" -o "Dir::State::status=$apt_dir/state/status"
        -o "Dir::Cache=$apt_dir/cache" -o APT::Architecture=amd64 -o Dir::Etc::PreferencesParts=/dev/null
        -o APT::Sandbox::User=root "${apt_opts[@]}")
    for i in 1 2 3; do
        apt-get "${apt[@]}" -o Dir::Etc::Preferences=/dev/null update && break
        ((i < 3)) || return 1
        sleep $((i * 10)) # a pause before asking the mirror again, not a synchronisation
    done
    for tree in "${framework_trees[@]}"; do
        tree_prefs "$tree" >"$apt_dir/prefs-$tree"
        local inst p
        # What apt would install on an empty system, Architecture: all only (the PHP code).
        inst=$(apt-get "${apt[@]}" -o "Dir::Etc::Preferences=$apt_dir/prefs-$tree" -s install "${framework_packages[@]}" |
            sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*\[all\])$/\1=\2/p') || return 1
        [[ -n $inst ]] || { echo "cells: apt chose no packages for the $tree frameworks" >&2; return 1; }
        rm -f "$apt_dir"/debs/*.deb
        # shellcheck disable=SC2086 # one package=version per word
        (cd "$apt_dir/debs" && apt-get "${apt[@]}" -q download $inst) || return 1
        mkdir -p "$out/$tree"
        for p in "$apt_dir"/debs/*.deb; do
            dpkg-deb -x "$p" "$out/$tree" || return 1
        done
        tr ' ' '\n' <<<"$inst" | sort >"$out/$tree/PACKAGES"
    done
    # Symfony's store test cases, from the source tarball whose sha256 bookworm's Sources index gives.
    local tarball=symfony_$symfony_source.orig.tar.xz sum
    sum=$(apt-cache "${apt[@]}" showsrc symfony | awk -v f="$tarball" '$3 == f && length($1) == 64 { print $1; exit }')
    [[ -n $sum ]] || { echo "cells: no sha256 for $tarball in bookworm's Sources" >&2; return 1; }
    wget --no-verbose --tries=3 --timeout=30 -O "$apt_dir/$tarball" "$mirror/pool/main/s/symfony/$tarball" || return 1
    echo "$sum  $apt_dir/$tarball" | sha256sum --check --quiet || { echo "cells: $tarball: sha256 mismatch" >&2; return 1; }
    mkdir -p "$out/store-tests" &&
        tar -xJf "$apt_dir/$tarball" -C "$out/store-tests" --strip-components=4 --wildcards \
            '*/src/Symfony/Component/Lock/Tests/Store/*TestTrait.php' \
            '*/src/Symfony/Component/Semaphore/Tests/Store/AbstractStoreTestCase.php' || return 1
    rm -rf "$apt_dir"
}

ensure_frameworks() {
    local dir lock
    dir=$(frameworks_dir)
    mkdir -p "$cache"
    exec {lock}>"$cache/frameworks.lock"
    flock "$lock"
    if [[ ! -f $dir/.ready ]]; then
        local t0=$SECONDS new=$dir.new old
        log "fetching the newest frameworks (${framework_trees[*]}) into $dir"
        rm -rf "$new"
        if check_mirror sid && make_frameworks "$new" && touch "$new/.ready" && rm -rf "$dir" && mv "$new" "$dir"; then
            log "newest frameworks ready in $((SECONDS - t0)) s ($(du -sh "$dir" | cut -f1))"
            for old in "$cache"/frameworks-*; do
                [[ $old != "$dir" && -d $old ]] && rm -rf "$old"
            done
        else
            rm -rf "$new"
            echo "cells: could not fetch the newest frameworks" >&2
            exec {lock}>&-
            return 1
        fi
    fi
    exec {lock}>&-
}

# ---------------------------------------------------------------- building and testing

# Inside the chroot: the ZTS PHP of a *-zts chroot first on the PATH (Debian's NTS PHP stays at
# /usr/bin/php), with its php-fpm, run-tests.php and Apache module for the tests.
use_zts_php() {
    [[ -x /opt/php-zts/bin/php ]] || return 0
    export PATH=/opt/php-zts/bin:/opt/php-zts/sbin:$PATH PHP_FPM_BIN=/opt/php-zts/sbin/php-fpm \
        RUN_TESTS_PHP=/opt/php-zts/lib/php/build/run-tests.php RL_APACHE_LIBPHP=/opt/php-zts/lib/apache2/libphp.so
}

# Inside the chroot: build the extension and the core's tests of /build/src into /build/target.
build_in_root() {
    use_zts_php
    cd /build/src || return 1
    export CARGO_TARGET_DIR=/build/target PHP_CONFIG PHP
    PHP_CONFIG=$(command -v php-config)
    PHP=$("$PHP_CONFIG" --php-binary)
    CARGO_NET_OFFLINE=true bash scripts/build.sh >/dev/null &&
        cargo test --no-default-features --locked --offline --no-run --quiet
}

# Inside the chroot: run cell $1's tests against server $2 (redis | valkey); "cargo_passed cargo_failed
# phpt_passed phpt_failed" goes to the last line of /build/counts-$1.
# Inside the chroot: the tests start "redis-server" (and redis-cli, redis-benchmark) from the PATH:
# server $1's binaries under those names, first on the PATH.
use_server() {
    local server=$1 bin=/build/bin/$1 tool
    mkdir -p "$bin" || return 1
    for tool in server cli benchmark; do
        ln -sfn "/usr/bin/$server-$tool" "$bin/redis-$tool" || return 1
    done
    export PATH="$bin:$PATH"
}

test_in_root() {
    local cell=$1 server=$2
    cd /build/src || return 1
    use_server "$server" || return 1
    use_zts_php
    # The host's NTS build, for zts_load_mismatch.phpt (see run_cells).
    [[ ! -f /build/foreign/nts.so ]] || export RL_NTS_SO=/build/foreign/nts.so
    # RL_CELL names the cell to the tests (unset on the host), should one need to tell.
    export CARGO_TARGET_DIR=/build/target PHP_CONFIG PHP RL_CELL=$cell
    PHP_CONFIG=$(command -v php-config)
    PHP=$("$PHP_CONFIG" --php-binary)

    local want_php=${cell%%+*} want_server=${cell#*+} php_v server_v
    php_v=php$(php -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION, PHP_ZTS ? "-zts" : "";')
    server_v=$server$(redis-server --version | sed -n 's/.* v=\([0-9]*\.[0-9]*\).*/\1/p')
    echo "cell $cell: $(php -r 'echo "PHP ", PHP_VERSION;'), $(redis-server --version)"
    if [[ $php_v != "$want_php" || $server_v != "$want_server" ]]; then
        echo "cell $cell: this chroot runs $php_v and $server_v, not what the cell's name says: update scripts/cells.sh"
        echo "0 1 0 1" >"/build/counts-$cell"
        return 1
    fi

    local cargo_log=/tmp/cargo-test.log cp cf cargo_status t
    # Every test target but the model (tests/model.rs): it checks the protocol, not this cell's PHP or
    # server, and runs once, on the host.
    local targets=(--lib)
    for t in tests/*.rs; do
        t=$(basename "$t" .rs)
        [[ $t == model ]] || targets+=(--test "$t")
    done
    cargo test --no-default-features --locked --offline "${targets[@]}" 2>&1 | tee "$cargo_log"
    cargo_status=${PIPESTATUS[0]}
    read -r cp cf < <(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$cargo_log")
    if ((cargo_status != 0 && cf == 0)) || ((cp == 0)); then cf=$((cf + 1)); fi

    local counts=/tmp/phpt-counts pp pf
    PHPT_COUNTS_FILE=$counts bash scripts/run-phpt.sh /build/target/release/libredis_lease.so
    read -r pp pf <"$counts" || { pp=0; pf=1; }
    if ((pp == 0 && pf == 0)); then pf=1; fi

    # The bridge tests again on each tree of the newest frameworks (see the top of scripts/cells.sh),
    # bind-mounted over /usr/share/php in a mount namespace of the pass's own ("--propagation
    # unchanged": a chroot's / is no mount point, so unshare cannot make it private, and the chroot's
    # namespace is private already).
    local tree fp ff
    for tree in ${frameworks_trees_in_root:-}; do
        local versions
        versions="Laravel $(sed -n "s/.*const VERSION = '\(.*\)';/\1/p" "/frameworks/$tree/usr/share/php/Illuminate/Foundation/Application.php")"
        versions+=", Symfony $(sed -n 's/^php-symfony-lock=\([^+]*\).*/\1/p' "/frameworks/$tree/PACKAGES")"
        versions+=", PHPUnit $(sed -n 's/^phpunit=\([^+]*\).*/\1/p' "/frameworks/$tree/PACKAGES")"
        echo "cell $cell: the bridge tests on the $tree frameworks ($versions)"
        rm -f "$counts"
        unshare --mount --propagation unchanged -- bash -c 'mount --bind "/frameworks/$1/usr/share/php" /usr/share/php && shift && exec "$@"' _ "$tree" \
            env RL_FRAMEWORKS="$tree" SYMFONY_STORE_TESTS=/frameworks/store-tests PHPT_TESTS='bridge_*.phpt' \
            PHPT_COUNTS_FILE=$counts bash scripts/run-phpt.sh /build/target/release/libredis_lease.so
        read -r fp ff <"$counts" || { fp=0; ff=1; }
        if ((fp == 0 && ff == 0)); then ff=1; fi
        echo "cell $cell: the bridge tests on the $tree frameworks ($versions): $fp passed, $ff failed"
        pp=$((pp + fp))
        pf=$((pf + ff))
    done
    # A ZTS PHP: the php-fpm hammers again, on Apache's mod_php in threads (see testing/apache_pool.php).
    if php -r 'exit(PHP_ZTS ? 0 : 1);'; then
        echo "cell $cell: the fpm hammers again on Apache mpm_event + mod_php (threads)"
        rm -f "$counts"
        RL_PHP_SERVER=apache PHPT_TESTS='rw_fpm_hammer.phpt semaphore_fpm_weighted.phpt' PHPT_COUNTS_FILE=$counts \
            bash scripts/run-phpt.sh /build/target/release/libredis_lease.so
        read -r fp ff <"$counts" || { fp=0; ff=1; }
        if ((fp == 0 && ff == 0)); then ff=1; fi
        echo "cell $cell: the fpm hammers on Apache's threads: $fp passed, $ff failed"
        pp=$((pp + fp))
        pf=$((pf + ff))
    fi
    echo "$cp $cf $pp $pf" >"/build/counts-$cell"
}

# Clones the committed HEAD of the repo into chroot $1's /build/src.
clone_into() {
    local dir=$1 head
    head=$(git -C "$repo" rev-parse HEAD) || return 1
    rm -rf "$dir/build/src" &&
        git clone --quiet --no-checkout "$repo" "$dir/build/src" &&
        git -C "$dir/build/src" fetch --quiet "$repo" HEAD &&
        git -C "$dir/build/src" -c advice.detachedHead=false checkout --quiet --detach "$head"
}

run_cells() {
    local cells=("$@") cell root
    ((${#cells[@]})) || read -ra cells <<<"${CELLS:-${all_cells[*]}}"
    if [[ ${cells[*]} == none ]]; then
        log "SKIPPED: CELLS=none (only the host's PHP and Redis were tested)"
        report 0 0
        return 0
    fi
    for cell in "${cells[@]}"; do
        if ! cell_root "$cell" >/dev/null || ! cell_server "$cell" >/dev/null; then
            log "unknown cell '$cell' (cells: ${all_cells[*]})"
            report 0 1
            return 1
        fi
    done
    if [[ ! -d $HOME/.cargo/bin || ! -d $HOME/.rustup ]]; then
        log "the cells use the host's rustup toolchain: $HOME/.cargo/bin and $HOME/.rustup must exist"
        report 0 "${#cells[@]}"
        return 1
    fi
    # Crates for --offline in the chroots: the host's cargo fetches what Cargo.lock names (no-op when
    # the host's own build has).
    (cd "$repo" && cargo fetch --locked --quiet) || log "cargo fetch failed: the builds in the chroots may fail"
    # One run at a time per cache: runs share each chroot's /build (the clone and the build output).
    mkdir -p "$cache"
    local run_lock
    exec {run_lock}>"$cache/run.lock"
    if ! flock -n "$run_lock"; then
        log "waiting for another cells run (of this cache) to end"
        flock "$run_lock"
    fi
    if [[ -n $(git -C "$repo" status --porcelain --untracked-files=no) ]]; then
        log "note: the cells test the committed HEAD $(git -C "$repo" rev-parse --short HEAD), not the uncommitted changes"
    fi

    local passed=0 failed=0 summary=() timings=() roots_done=() roots_failed=()
    for cell in "${cells[@]}"; do
        root=$(cell_root "$cell")
        local dir t0 line
        dir=$(root_dir "$root")
        if [[ " ${roots_failed[*]} " == *" $root "* ]]; then
            line="cell $cell: NOT RUN: the $root chroot could not be made or built (1 failed)"
            summary+=("$line"); failed=$((failed + 1)); continue
        fi
        if [[ " ${roots_done[*]} " != *" $root "* ]]; then
            t0=$SECONDS
            if ! ensure_root "$root"; then
                roots_failed+=("$root")
                line="cell $cell: NOT RUN: the $root chroot could not be made (1 failed)"
                summary+=("$line"); failed=$((failed + 1)); continue
            fi
            timings+=("chroot $root ready in $((SECONDS - t0)) s")
            t0=$SECONDS
            log "building $(git -C "$repo" rev-parse --short HEAD) in the $root chroot"
            if ! clone_into "$dir" || ! in_root "$dir" bash -c "$(declare -f use_zts_php build_in_root); build_in_root"; then
                roots_failed+=("$root")
                line="cell $cell: NOT RUN: the build in the $root chroot failed (1 failed)"
                summary+=("$line"); failed=$((failed + 1)); continue
            fi
            timings+=("build in $root: $((SECONDS - t0)) s")
            roots_done+=("$root")
        fi
        t0=$SECONDS
        log "testing cell $cell"
        rm -f "$dir/build/counts-$cell"
        # A ZTS cell checks that the host's NTS build (scripts/build.sh's, when there is one) is refused.
        rm -rf "$dir/build/foreign"
        if [[ $cell == *-zts+* && -f $repo/target/release/libredis_lease.so ]]; then
            mkdir -p "$dir/build/foreign" && cp "$repo/target/release/libredis_lease.so" "$dir/build/foreign/nts.so"
        fi
        local fw_dir='' fw_trees=''
        if [[ $cell == "$frameworks_cell" ]]; then
            if ensure_frameworks; then
                fw_dir=$(frameworks_dir)
                fw_trees=${framework_trees[*]}
            else
                summary+=("cell $cell: NOT RUN: the bridge tests on the newest frameworks (could not fetch them) (1 failed)")
                failed=$((failed + 1))
            fi
        fi
        CELLS_FRAMEWORKS=$fw_dir in_root "$dir" bash -c "$(declare -f use_server use_zts_php test_in_root)
            frameworks_trees_in_root='$fw_trees' test_in_root $cell $(cell_server "$cell")"
        timings+=("tests of $cell: $((SECONDS - t0)) s")
        local cp=0 cf=1 pp=0 pf=1
        if [[ -s $dir/build/counts-$cell ]]; then
            read -r cp cf pp pf <"$dir/build/counts-$cell"
        fi
        line="cell $cell: cargo $cp passed $cf failed, PHPT $pp passed $pf failed"
        summary+=("$line")
        passed=$((passed + cp + pp))
        failed=$((failed + cf + pf))
    done
    local t
    for t in "${timings[@]}"; do log "time: $t"; done
    printf '%s\n' "${summary[@]}"
    report "$passed" "$failed"
    ((failed == 0))
}

report() {
    echo "cells: $1 passed, $2 failed"
    [[ -z ${CELLS_COUNTS_FILE:-} ]] || echo "$1 $2" >"$CELLS_COUNTS_FILE"
}

prepare() {
    local cells roots=() cell root status=0
    read -ra cells <<<"${CELLS:-${all_cells[*]}}"
    [[ ${cells[*]} == none ]] && return 0
    for cell in "${cells[@]}"; do
        root=$(cell_root "$cell") || die "unknown cell '$cell'"
        [[ " ${roots[*]} " == *" $root "* ]] || roots+=("$root")
    done
    for root in "${roots[@]}"; do
        local t0=$SECONDS
        if ensure_root "$root"; then log "chroot $root ready ($((SECONDS - t0)) s)"; else status=1; fi
    done
    if [[ " ${cells[*]} " == *" $frameworks_cell "* ]]; then
        ensure_frameworks || status=1
    fi
    return "$status"
}

# ---------------------------------------------------------------- main

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mount)"
trap on_signal INT TERM

case ${1:-} in
    __enter)
        shift
        enter_root "$@"
        ;;
    prepare)
        if [[ -n ${CELLS_LOG:-} ]]; then prepare >>"$CELLS_LOG" 2>&1; else prepare; fi
        ;;
    run)
        shift
        run_cells "$@"
        ;;
    exec)
        shift
        cell=${1:-}
        cell_root "$cell" >/dev/null || die "usage: scripts/cells.sh exec CELL [COMMAND...] (cells: ${all_cells[*]})"
        shift
        root=$(cell_root "$cell")
        ensure_root "$root" || exit 1
        ((${#@})) || set -- bash
        CELLS_STDIN=1 CELLS_BIND_REPO=$repo in_root "$(root_dir "$root")" bash -c "$(declare -f use_server use_zts_php)
            use_server $(cell_server "$cell") && use_zts_php && cd /repo && exec \"\$@\"" cells-exec "$@"
        ;;
    list)
        for c in "${all_cells[@]}"; do echo "$c ($(cell_root "$c") chroot: $(root_dir "$(cell_root "$c")"))"; done
        ;;
    clean)
        for d in "$cache"/*/; do
            [[ -d $d ]] && { log "deleting ${d%/}"; remove_dir "${d%/}" || exit 1; }
        done
        ;;
    *)
        sed -n '2,/^set -uo/p' "$self" | sed '$d; s/^# \{0,1\}//'
        exit 2
        ;;
esac
