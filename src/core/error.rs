//! Errors of the core. The PHP layer maps each variant to one exception class
//! (see `php::errors`), so a variant exists only where PHP users must be able to
//! tell the cases apart.

use crate::core::token::Token;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the caller: a PHP `ValueError`.
    #[error("{0}")]
    InvalidArgument(String),

    /// Redis could not be reached, or timed out. Never used for contention: a
    /// lock held by someone else is not an error.
    #[error("{0}")]
    Connection(String),

    /// Redis answered with an error reply (NOPERM, OOM, WRONGTYPE, READONLY...):
    /// the command changed nothing, and asking again will not help.
    #[error("{0}")]
    Reply(String),

    /// A session's lock could not be had in time (or too many requests already
    /// wait for it). Contention, not failure: the message says which.
    #[error("{0}")]
    LockTimeout(String),

    /// A command that would have taken a lease may have reached Redis before the
    /// connection failed, and the outcome could not be checked because Redis is
    /// still unreachable. The token lets the caller resolve it later instead of
    /// guessing.
    #[error("{message}")]
    Unresolved { message: String, token: Token },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}
