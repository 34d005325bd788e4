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

    /// Redis answered with an error reply: the command changed nothing.
    /// `passing`: the reply tells of a state the server leaves by itself (a
    /// script running long, memory full, a master loading or demoted, a Cluster
    /// slot moving), so the same command may run later; otherwise (NOPERM,
    /// WRONGTYPE, an unknown command...) asking again will not help.
    #[error("{message}")]
    Reply { message: String, passing: bool },

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

    /// An error reply that asking again will not change.
    pub fn refused(msg: impl Into<String>) -> Self {
        Error::Reply {
            message: msg.into(),
            passing: false,
        }
    }
}

/// Whether an error reply's code tells of a state the server leaves by itself
/// (a redirect: a slot moving, or moved, past the read timeout).
pub(crate) fn passing_code(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "OOM"
                | "READONLY"
                | "LOADING"
                | "BUSY"
                | "MASTERDOWN"
                | "TRYAGAIN"
                | "CLUSTERDOWN"
                | "MOVED"
                | "ASK"
                | "NOREPLICAS"
                | "MISCONF"
        )
    )
}
