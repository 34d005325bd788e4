//! Lease tokens: one per acquire attempt, so only that attempt can release,
//! extend or claim what it took.

use std::fmt;

use rand::TryRngCore;

/// A lease token: 128 random bits as 32 hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Fresh randomness from the OS for every token: a user-space generator seeded
    /// once would repeat itself in both processes after fork().
    pub fn generate() -> Token {
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .expect("the OS random number generator failed");
        // Lower-case hex, written out directly: twice per lock, cheaper than format!.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(32);
        for b in bytes {
            hex.push(HEX[usize::from(b >> 4)] as char);
            hex.push(HEX[usize::from(b & 15)] as char);
        }
        Token(hex)
    }

    /// A token given back by the application (a hold handed over from another
    /// process): 32 lower-case hex digits, or `None`.
    pub fn parse(s: &str) -> Option<Token> {
        let ok = s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Token(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Enough to correlate log lines, not enough to forge a release.
        write!(f, "Token({}…)", &self.0[..8])
    }
}
