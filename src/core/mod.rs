//! The pure Rust core: no PHP types here, so all of it runs under `cargo test`.

pub mod dsn;
pub mod error;
pub mod lease;
pub mod metrics;
pub mod pool;
pub mod scripts;
pub mod session;
