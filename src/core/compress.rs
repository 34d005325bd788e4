//! Session data compressed as phpredis (6.1 and later) compresses it with
//! `redis.session.compression`, so that sessions move both ways between
//! phpredis's handler and ours, and a site that compresses can switch.
//!
//! The stored bytes, as phpredis's `redis_compress()` writes them:
//! - LZF: the raw LZF stream, no header;
//! - LZ4: one byte, a CRC-8 (polynomial 0x31, initial 0xFF) of the next four;
//!   the uncompressed length as a C `int` in the machine's byte order (little
//!   endian on every platform we ship); then one LZ4 block;
//! - zstd: one zstd frame (it carries its content size).
//!
//! What a compressor cannot shrink (LZF), or empty data (LZ4), is stored as it is.
//! Reading, as phpredis does, data that does not decode is taken as it is: a
//! site that turns compression on still reads its uncompressed sessions. Unlike
//! phpredis, that is only done for data that looks like a session (one of PHP's
//! serializers); anything else is refused, and so is a frame that claims more
//! than `MAX_INFLATED` bytes, before anything is inflated.

use std::borrow::Cow;

use crate::core::error::{Error, Result};

/// The most a stored session may inflate to. PHP could not hold more in a
/// request anyway (memory_limit), and a frame claiming more is refused unread.
pub const MAX_INFLATED: usize = 128 << 20;

/// phpredis's names, in `redis.session.compression`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Lzf,
    Lz4,
    Zstd,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lzf => "lzf",
            Algorithm::Lz4 => "lz4",
            Algorithm::Zstd => "zstd",
        }
    }
}

/// How session data is stored: as it is, or compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Codec {
    pub algorithm: Option<Algorithm>,
    /// phpredis's `redis.session.compression_level`: zstd below 1 is its default
    /// (3), above its maximum the maximum; LZ4 and LZF take none (any LZ4 block,
    /// fast or high-compression, reads the same).
    pub level: i32,
}

/// Why stored data could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undecodable {
    /// It claims to inflate to more than `MAX_INFLATED` bytes.
    TooLarge(u64),
    /// Neither data the algorithm decodes, nor a session in any serializer's form.
    Garbage,
}

impl Codec {
    /// From phpredis's setting names: `none` (or empty), `lzf`, `lz4`, `zstd`;
    /// `level` an integer (empty: phpredis's default, 3).
    pub fn parse(name: &str, level: &str) -> Result<Codec> {
        let algorithm = match name.trim().to_ascii_lowercase().as_str() {
            "" | "none" => None,
            "lzf" => Some(Algorithm::Lzf),
            "lz4" => Some(Algorithm::Lz4),
            "zstd" => Some(Algorithm::Zstd),
            _ => {
                return Err(Error::invalid(
                    "session option 'compression' must be none, lzf, lz4 or zstd",
                ))
            }
        };
        let level = match level.trim() {
            "" => 3,
            l => l.parse::<i32>().map_err(|_| {
                Error::invalid("session option 'compression_level' must be an integer")
            })?,
        };
        Ok(Codec { algorithm, level })
    }

    /// What to store for `data`.
    pub fn pack<'a>(&self, data: &'a [u8]) -> Cow<'a, [u8]> {
        let packed = match self.algorithm {
            None => None,
            Some(Algorithm::Lzf) => lzf::compress(data).ok(),
            Some(Algorithm::Lz4) => lz4_pack(data),
            Some(Algorithm::Zstd) => {
                let level = match self.level {
                    l if l < 1 => 3,
                    l => l.min(zstd::compression_level_range().end().to_owned()),
                };
                zstd::bulk::compress(data, level).ok()
            }
        };
        // What is stored must read back as `data`. LZF has no header, and its
        // stream may also read as a serialized session (then it would be
        // taken for one): another split of the literal runs reads otherwise.
        let reads_back = |stored: &[u8]| self.unpack(stored).is_ok_and(|d| *d == *data);
        if let Some(packed) = packed.filter(|p| reads_back(p)) {
            return Cow::Owned(packed);
        }
        if self.algorithm == Some(Algorithm::Lzf) {
            if let Some(packed) = (1..=32)
                .rev()
                .filter_map(|first| lzf_literal(data, first))
                .find(|p| reads_back(p))
            {
                return Cow::Owned(packed);
            }
        }
        // As phpredis: what could not be compressed is stored as it is.
        Cow::Borrowed(data)
    }

    /// The session data stored as `stored`.
    pub fn unpack<'a>(&self, stored: &'a [u8]) -> std::result::Result<Cow<'a, [u8]>, Undecodable> {
        let Some(algorithm) = self.algorithm else {
            return Ok(Cow::Borrowed(stored));
        };
        let decoded = match algorithm {
            Algorithm::Lzf => lzf_unpack(stored),
            Algorithm::Lz4 => lz4_unpack(stored),
            Algorithm::Zstd => zstd_unpack(stored),
        };
        // LZ4's and zstd's headers (a checksum, a magic number) and exact sizes
        // say a frame is one: what it decodes to is the data, whatever it reads
        // as (the header itself may read as a session: a CRC-8 byte of 0x80
        // starts a msgpack map).
        let headed = algorithm != Algorithm::Lzf;
        match decoded {
            // Decoded into a session: compressed data. Decoded into something else
            // while the bytes themselves read as a session (LZF has no header: a
            // plain session may happen to decode): plain data after all.
            Ok(Some(d)) if headed || looks_plain(&d) || !looks_plain(stored) => Ok(Cow::Owned(d)),
            Err(e @ Undecodable::TooLarge(_)) if !looks_plain(stored) => Err(e),
            _ if looks_plain(stored) => Ok(Cow::Borrowed(stored)),
            _ => Err(Undecodable::Garbage),
        }
    }
}

/// phpredis's CRC-8 of the LZ4 header's length.
fn crc8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0xFF, |mut crc, &b| {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x31
            } else {
                crc << 1
            };
        }
        crc
    })
}

fn lz4_pack(data: &[u8]) -> Option<Vec<u8>> {
    // As phpredis: empty data is not worth a header; more than a C int cannot
    // be said in one.
    let len = i32::try_from(data.len()).ok().filter(|&n| n > 0)?;
    let header = len.to_le_bytes();
    let mut out = Vec::with_capacity(5 + lz4_flex::block::get_maximum_output_size(data.len()));
    out.push(crc8(&header));
    out.extend_from_slice(&header);
    out.extend_from_slice(&lz4_flex::block::compress(data));
    Some(out)
}

/// `data` as an LZF stream of literal runs alone (a run of up to 32 bytes after
/// a byte saying its length less one), the first of `first` bytes: what LZF
/// stores for data it cannot shrink (liblzf, as phpredis calls it, is given
/// room to grow). phpredis reads it back; `None` for empty data.
fn lzf_literal(data: &[u8], first: usize) -> Option<Vec<u8>> {
    if data.is_empty() {
        return None;
    }
    let (head, rest) = data.split_at(first.min(data.len()));
    let mut out = Vec::with_capacity(data.len() + data.len() / 32 + 2);
    for run in std::iter::once(head).chain(rest.chunks(32)) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
    Some(out)
}

/// `Ok(None)`: not this algorithm's data.
type Decoded = std::result::Result<Option<Vec<u8>>, Undecodable>;

fn lz4_unpack(stored: &[u8]) -> Decoded {
    let (Some(&crc), Some(len)) = (stored.first(), stored.get(1..5)) else {
        return Ok(None);
    };
    if crc8(len) != crc {
        return Ok(None);
    }
    let len = i32::from_le_bytes(len.try_into().unwrap_or_default());
    let Ok(len) = usize::try_from(len) else {
        return Ok(None);
    };
    if len > MAX_INFLATED {
        return Err(Undecodable::TooLarge(len as u64));
    }
    let mut out = vec![0; len];
    match lz4_flex::block::decompress_into(&stored[5..], &mut out) {
        Ok(n) if n == len && len > 0 => Ok(Some(out)),
        _ => Ok(None),
    }
}

fn zstd_unpack(stored: &[u8]) -> Decoded {
    // A frame that does not say its size is not one phpredis wrote.
    let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(stored) else {
        return Ok(None);
    };
    if size > MAX_INFLATED as u64 {
        return Err(Undecodable::TooLarge(size));
    }
    match zstd::bulk::decompress(stored, size as usize) {
        Ok(d) if d.len() as u64 == size => Ok(Some(d)),
        _ => Ok(None),
    }
}

fn lzf_unpack(stored: &[u8]) -> Decoded {
    if stored.is_empty() {
        return Ok(None);
    }
    // LZF does not say how long its output is: as phpredis, twice the input,
    // then twice that, while the buffer is what is too small; never past the
    // bound.
    let mut size = stored.len().saturating_mul(2);
    loop {
        match lzf::decompress(stored, size.min(MAX_INFLATED)) {
            Ok(d) => return Ok(Some(d)),
            Err(lzf::LzfError::BufferTooSmall) if size < MAX_INFLATED => {
                size = size.saturating_mul(2);
            }
            Err(lzf::LzfError::BufferTooSmall) => {
                return Err(Undecodable::TooLarge(MAX_INFLATED as u64 + 1))
            }
            Err(_) => return Ok(None),
        }
    }
}

/// Whether `data` reads as a session written by one of PHP's serializers:
/// `php` (`name|value…`), `php_serialize` (`a:N:{…`), `php_binary` (a name's
/// length byte, the name, a value), igbinary (its version header) or msgpack (a
/// map). Empty data is an empty session.
pub fn looks_plain(data: &[u8]) -> bool {
    // The first byte of a value PHP's serialize() writes.
    let value = |b: Option<&u8>| {
        matches!(
            b,
            Some(b'a' | b'b' | b'd' | b'i' | b'N' | b'O' | b's' | b'C' | b'E' | b'r' | b'R')
        )
    };
    match data {
        [] => true,
        [0, 0, 0, 1 | 2, ..] => true,
        [0x80..=0x8f | 0xde | 0xdf, ..] => true,
        [b'a', b':', ..] => true,
        [n, rest @ ..] if (1..=127).contains(n) && rest.len() > usize::from(*n) => {
            let name = &rest[..usize::from(*n)];
            let php_binary = name.iter().all(|&b| b >= 0x20) && value(rest.get(usize::from(*n)));
            php_binary || php_named(data, value)
        }
        _ => php_named(data, value),
    }
}

/// The `php` serializer: a name without '|' or control characters, '|', a value.
fn php_named(data: &[u8], value: impl Fn(Option<&u8>) -> bool) -> bool {
    match data.iter().position(|&b| b == b'|') {
        Some(i) if i > 0 => data[..i].iter().all(|&b| b >= 0x20) && value(data.get(i + 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &[u8] = b"user|a:2:{s:2:\"id\";i:42;s:4:\"name\";s:5:\"alice\";}cart|a:0:{}";

    fn codec(name: &str) -> Codec {
        Codec::parse(name, "").unwrap()
    }

    #[test]
    fn each_algorithm_round_trips_and_reads_plain_data_too() {
        let big: Vec<u8> = SESSION.iter().copied().cycle().take(64 << 10).collect();
        for name in ["lzf", "lz4", "zstd"] {
            let c = codec(name);
            for data in [SESSION, &big[..]] {
                let packed = c.pack(data);
                assert_eq!(c.unpack(&packed).unwrap(), data, "{name} round trip");
                assert_eq!(c.unpack(data).unwrap(), data, "{name} reads plain data");
            }
            assert!(
                c.pack(&big).len() < big.len() / 10,
                "{name} compressed 64 KiB"
            );
            assert_eq!(c.unpack(b"").unwrap(), &b""[..], "{name}: empty is empty");
        }
        assert_eq!(codec("none").pack(SESSION), SESSION);
    }

    /// Data that is not a serialized session (an encrypted Laravel session:
    /// base64 of JSON) reads back as written. Before, what LZF could not shrink
    /// was stored as it is, which then read as neither LZF nor a session: the
    /// session was kept unreadable and every later write dropped.
    #[test]
    fn data_that_is_no_session_reads_back_as_written() {
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for name in ["lzf", "lz4", "zstd"] {
            let c = codec(name);
            let mut no_session = 0;
            for len in (1..400).step_by(7) {
                let mut data = b"eyJpdiI6".to_vec();
                data.extend((0..len).map(|_| B64[next() % 64]));
                // (Some happen to read as php_binary: a first byte that says
                // how long a name is, a type letter after it.)
                no_session += usize::from(!looks_plain(&data));
                let packed = c.pack(&data);
                assert_eq!(
                    c.unpack(&packed).map(|d| d.into_owned()),
                    Ok(data.clone()),
                    "{name}, {} bytes",
                    data.len()
                );
            }
            assert!(no_session > 40, "{name}: {no_session} of 57 no session");
            // Every byte at once: no shorter form, and no first run LZF would
            // take for a session.
            let mut data: Vec<u8> = (0..=255u8).collect();
            data.rotate_left(b'a' as usize - 31);
            assert_eq!(c.unpack(&c.pack(&data)).map(|d| d.into_owned()), Ok(data));
        }
    }

    #[test]
    fn the_lz4_header_is_phpredis_s() {
        let packed = codec("lz4").pack(SESSION);
        let len = (SESSION.len() as i32).to_le_bytes();
        assert_eq!(&packed[1..5], &len);
        assert_eq!(packed[0], crc8(&len));
        // crc8 as phpredis computes it (checked against a separate implementation).
        assert_eq!(crc8(&[0, 0, 0, 0]), 215);
        assert_eq!(crc8(&[59, 0, 0, 0]), 31);
    }

    #[test]
    fn a_frame_that_claims_too_much_is_refused_unread() {
        // LZ4: a header that claims 1 GiB, with a valid CRC.
        let len = (1i32 << 30).to_le_bytes();
        let mut bomb = vec![crc8(&len)];
        bomb.extend_from_slice(&len);
        bomb.extend_from_slice(&[0x1F, 0x00, 0x01, 0x00]);
        assert_eq!(
            codec("lz4").unpack(&bomb),
            Err(Undecodable::TooLarge(1 << 30))
        );
        // zstd: a frame whose header says 1 GiB.
        let mut frame = zstd::bulk::compress(&vec![0u8; 1 << 20], 3).unwrap();
        // Frame header descriptor: content size in 8 bytes from byte 5 on.
        let fhd = frame[4];
        assert_eq!(fhd >> 6, 2, "a 4-byte size field for 1 MiB");
        frame[5..9].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert_eq!(
            codec("zstd").unpack(&frame),
            Err(Undecodable::TooLarge(1 << 30))
        );
    }

    #[test]
    fn garbage_is_refused_and_sessions_of_every_serializer_pass() {
        let garbage = [0xF3, 0x11, 0x02, 0x99, 0x00, 0x7E, 0x13];
        for name in ["lzf", "lz4", "zstd"] {
            assert_eq!(
                codec(name).unpack(&garbage),
                Err(Undecodable::Garbage),
                "{name}"
            );
        }
        for plain in [
            &b"a:1:{s:1:\"x\";i:1;}"[..],
            b"\x04userb:1;",
            b"\x00\x00\x00\x02\x14\x01",
            b"\x81\xa1x\x01",
            b"flash|N;",
        ] {
            assert!(looks_plain(plain), "{plain:?}");
        }
        assert!(!looks_plain(&garbage));
        assert!(!looks_plain(b"|a:0:{}"));
    }

    #[test]
    fn options_parse_or_explain() {
        assert_eq!(
            Codec::parse("ZSTD", "19").unwrap(),
            Codec {
                algorithm: Some(Algorithm::Zstd),
                level: 19
            }
        );
        assert!(Codec::parse("gzip", "").is_err());
        assert!(Codec::parse("lz4", "high").is_err());
    }
}
