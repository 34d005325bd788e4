//! Lease tokens: one per acquire attempt, so only that attempt can release,
//! extend or claim what it took.

use std::cell::RefCell;
use std::fmt;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng, TryRngCore};

use crate::core::pid;

/// A lease token: 128 random bits as 32 hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

thread_local! {
    /// A ChaCha generator per thread, seeded from the OS, and the fork count it
    /// was seeded in: a getrandom() system call per token cost more than the rest
    /// of making it (twice per lock pair, with the PHP object's).
    static RNG: RefCell<Option<(u32, StdRng)>> = const { RefCell::new(None) };
}

fn os_seeded() -> StdRng {
    StdRng::try_from_os_rng().expect("the OS random number generator failed")
}

impl Token {
    /// 128 bits from this thread's generator. A forked child reseeds before its
    /// first token: a copy of its parent's state would repeat the parent's next
    /// tokens, and with them its holds.
    pub fn generate() -> Token {
        let mut bytes = [0u8; 16];
        match pid::forks() {
            Some(forks) => RNG.with_borrow_mut(|slot| {
                let rng = match slot {
                    Some((seeded, rng)) if *seeded == forks => rng,
                    _ => &mut slot.insert((forks, os_seeded())).1,
                };
                rng.fill_bytes(&mut bytes);
            }),
            // Forks go unseen (no fork handler): the OS for every token.
            None => rand::rngs::OsRng
                .try_fill_bytes(&mut bytes)
                .expect("the OS random number generator failed"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let a = Token::generate();
        let b = Token::generate();
        assert_ne!(a, b);
        assert!(Token::parse(a.as_str()).is_some(), "{}", a.as_str());
        assert!(Token::parse("0123").is_none());
    }

    /// The child's first token against the parent's next one: with the generator's
    /// state copied by fork() and not reseeded, they are the same 128 bits.
    #[test]
    fn a_forked_child_does_not_repeat_its_parents_tokens() {
        Token::generate(); // this thread's generator is seeded
        let mut fds = [0; 2];
        // SAFETY: a pipe, then fork; the child only makes a token, writes it and _exits.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let child = libc::fork();
            assert!(child >= 0);
            if child == 0 {
                let t = Token::generate();
                libc::write(fds[1], t.as_str().as_ptr().cast(), 32);
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut buf = [0u8; 32];
            assert_eq!(libc::read(fds[0], buf.as_mut_ptr().cast(), 32), 32);
            libc::close(fds[0]);
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
            let parents = Token::generate();
            assert_ne!(
                &buf[..],
                parents.as_str().as_bytes(),
                "the child repeated its parent's token"
            );
        }
    }
}
