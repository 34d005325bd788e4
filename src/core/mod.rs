//! The pure Rust core: no PHP types here, so all of it runs under `cargo test`.
//!
//! Dependencies point one way, down: inspect -> lock/session -> lease -> watchdog
//! -> pool -> topology -> cluster/hold/sentinel -> dsn -> scripts/metrics/token (and
//! compress, under session), with pid (this process's id and its forks) under all.
//! `inspect` only reads what the floors below wrote.

pub(crate) mod cluster;
pub mod compress;
pub mod dsn;
pub mod error;
pub mod hold;
pub mod inspect;
pub mod lease;
pub mod lock;
pub mod metrics;
pub mod pending;
pub mod pid;
pub mod pool;
pub mod request;
pub mod scripts;
pub mod sentinel;
pub mod session;
pub mod token;
pub mod topology;
pub mod watchdog;
