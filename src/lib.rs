//! redis_lease: Redis session locking and distributed locks for PHP.
//!
//! `core` is plain Rust (DSNs, connection pool, Lua scripts, lease engine,
//! metrics) and is tested with `cargo test --no-default-features`; `php` is the
//! thin ext-php-rs binding on top of it.
#![cfg_attr(windows, feature(abi_vectorcall))]

pub mod core;

#[cfg(feature = "php")]
pub mod php;
