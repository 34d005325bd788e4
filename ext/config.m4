dnl redis_lease is built by cargo. This file lets phpize, configure, make and
dnl make install (and so PIE and PECL) drive that build; see Makefile.frag.
dnl PIE builds in ext/ (composer.json's build-path); a PECL package builds in its
dnl root, whose config.m4 includes this file. Either way the crate is found by
dnl its Cargo.toml.

PHP_ARG_ENABLE([redis_lease],
  [whether to enable redis_lease],
  [AS_HELP_STRING([--enable-redis_lease], [Enable redis_lease, Redis session locking and distributed locks])],
  [yes])

PHP_ARG_ENABLE([redis-lease-debug],
  [whether to build redis_lease without optimizations],
  [AS_HELP_STRING([--enable-redis-lease-debug], [Build with cargo's debug profile])],
  [no], [no])

if test "$PHP_REDIS_LEASE" != "no"; then
  AC_PATH_PROG([CARGO], [cargo], [no], [$PATH:$HOME/.cargo/bin])
  if test "$CARGO" = "no"; then
    AC_MSG_ERROR([cargo was not found: install a Rust toolchain >= 1.85 (https://rustup.rs)])
  fi
  AC_MSG_CHECKING([for libclang, which ext-php-rs needs to read PHP's headers])
  if test -n "$LIBCLANG_PATH" || ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
    AC_MSG_RESULT([yes])
  else
    AC_MSG_ERROR([libclang not found: install libclang-dev (Debian/Ubuntu) or clang-dev (Alpine)])
  fi

  if test "$PHP_REDIS_LEASE_DEBUG" != "no"; then
    REDIS_LEASE_PROFILE=debug
    REDIS_LEASE_CARGO_FLAGS=
  else
    REDIS_LEASE_PROFILE=release
    REDIS_LEASE_CARGO_FLAGS=--release
  fi

  for dir in "$abs_srcdir" "$abs_srcdir/.."; do
    if test -f "$dir/Cargo.toml"; then
      REDIS_LEASE_CRATE=`cd "$dir" && pwd`
      break
    fi
  done
  if test -z "$REDIS_LEASE_CRATE"; then
    AC_MSG_ERROR([Cargo.toml not found beside or above $abs_srcdir])
  fi
  dnl ext-php-rs wants absolute paths to the php-config and php it builds against.
  REDIS_LEASE_PHP_CONFIG=`command -v "$PHP_CONFIG"`
  REDIS_LEASE_PHP=`"$REDIS_LEASE_PHP_CONFIG" --php-binary`
  PHP_SUBST(CARGO)
  PHP_SUBST(REDIS_LEASE_PHP_CONFIG)
  PHP_SUBST(REDIS_LEASE_PHP)
  PHP_SUBST(REDIS_LEASE_PROFILE)
  PHP_SUBST(REDIS_LEASE_CARGO_FLAGS)
  PHP_SUBST(REDIS_LEASE_CRATE)
  PHP_ADD_MAKEFILE_FRAGMENT([$REDIS_LEASE_CRATE/ext/Makefile.frag], [$abs_srcdir], [$abs_builddir])
fi
