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
//! Empty data (LZ4), or what a compressor fails on, is stored as it is; what LZF
//! cannot shrink is stored as literal runs (`lzf_literal`), as liblzf does when
//! phpredis gives it room to grow.
//! Reading takes any of the three, whatever the setting (pools set otherwise,
//! or to none, share sessions during a change). As phpredis does, data that
//! does not decode is taken as it is: a site that turns compression on still
//! reads its uncompressed sessions. Unlike phpredis, a codec that is set does
//! that only for data that looks like a session (one of PHP's serializers);
//! anything else is refused, and so is a frame that claims more than
//! `MAX_INFLATED` bytes, before anything is inflated.

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

    /// A value of phpredis's own `redis.session.compression` or
    /// `redis.session.compression_level` (`option`), as phpredis reads it, in
    /// the form `parse` takes: a name by its first letters (`lz4hc` is lz4),
    /// an unknown one none; a level by its leading digits (none: 0). A php.ini
    /// phpredis took must not fail every session start after a switch.
    pub fn as_phpredis_reads(option: &str, value: &str) -> String {
        if option == "compression_level" {
            let t = value.trim_start();
            let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
            let n = digits.bytes().take_while(u8::is_ascii_digit).count();
            let level = match &digits[..n] {
                "" => 0,
                d => d
                    .parse::<i64>()
                    .unwrap_or(i64::MAX)
                    .min(i64::from(i32::MAX)),
            };
            let level = if t.starts_with('-') { -level } else { level };
            return level.to_string();
        }
        let starts = |p: &str| {
            (value.as_bytes().get(..p.len())).is_some_and(|v| v.eq_ignore_ascii_case(p.as_bytes()))
        };
        ["none", "lzf", "zstd", "lz4"]
            .into_iter()
            .find(|p| starts(p))
            .unwrap_or("none")
            .to_string()
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

    /// The session data stored as `stored`: compressed by this codec's
    /// algorithm, or by another one's (a pool set otherwise, phpredis's handler
    /// in a rolling change, a pool set to none), or stored as it is.
    pub fn unpack<'a>(&self, stored: &'a [u8]) -> std::result::Result<Cow<'a, [u8]>, Undecodable> {
        let plain = looks_plain(stored);
        // LZ4's and zstd's headers (a checksum, a magic number) and exact sizes
        // say a frame is one, whichever algorithm is set (a pool set otherwise,
        // phpredis's handler in a rolling change, a pool set to none, which
        // handed the bytes to PHP: it failed to decode them and destroyed the
        // session). What a frame decodes to is the data, whatever it reads as
        // (the header itself may read as a session: a CRC-8 byte of 0x80
        // starts a msgpack map). Checked first: an LZ4 frame may also decode
        // as LZF, which has no header.
        let mut too_large = None;
        for headed in [Algorithm::Zstd, Algorithm::Lz4] {
            match headed.decode(stored) {
                Ok(Some(d)) => return Ok(Cow::Owned(d)),
                // Refused unread, unless LZF reads it: a zstd magic number
                // vouches for the claim to any reader; an LZ4 header only to
                // one set to LZ4, and not before LZF had its say (its 8-bit CRC
                // matches 1 in 256 LZF streams, whose text then claims hundreds
                // of MiB).
                Err(e @ Undecodable::TooLarge(_))
                    if !plain && (self.algorithm == Some(headed) || headed == Algorithm::Zstd) =>
                {
                    too_large = Some(e);
                }
                _ => {}
            }
        }
        // LZF has none: what it decodes to counts where it reads as a session,
        // or, set to LZF, where the bytes themselves do not (a plain session
        // may happen to decode; data that is no session, such as an encrypted
        // payload, is then read back only by a pool set to LZF).
        let lzf = self.algorithm == Some(Algorithm::Lzf);
        match Algorithm::Lzf.decode(stored) {
            Ok(Some(d)) if looks_plain(&d) || (lzf && !plain) => return Ok(Cow::Owned(d)),
            Err(e @ Undecodable::TooLarge(_)) if lzf && !plain => return Err(e),
            _ => {}
        }
        if let Some(e) = too_large {
            return Err(e);
        }
        // As phpredis, what does not decode is taken as it is: a site that turns
        // compression on still reads its uncompressed sessions; one that keeps
        // it off reads whatever the application stored (an encrypted payload).
        if self.algorithm.is_none() || plain {
            Ok(Cow::Borrowed(stored))
        } else {
            Err(Undecodable::Garbage)
        }
    }
}

impl Algorithm {
    fn decode(self, stored: &[u8]) -> Decoded {
        match self {
            Algorithm::Lzf => lzf_unpack(stored),
            Algorithm::Lz4 => lz4_unpack(stored),
            Algorithm::Zstd => zstd_unpack(stored),
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
    // An LZ4 block inflates at most ~255 times (a match's length grows by 255
    // per byte): a longer claim is no frame, and is not given a buffer (data
    // of a pool set to none matches the 8-bit CRC 1 time in 256).
    if len > (stored.len() - 5).saturating_mul(256) + 64 {
        return Ok(None);
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
    // A stream starts with a run of literals (a byte below 32): a back
    // reference needs output before it. Said here, a plain session (a name, or
    // `a:`) costs no buffer of twice its size.
    if stored.first().is_none_or(|&b| b >= 32) {
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

    /// Sessions of each serializer: php_serialize, php_binary, igbinary,
    /// msgpack, php.
    const PLAIN: [&[u8]; 5] = [
        b"a:1:{s:1:\"x\";i:1;}",
        b"\x04userb:1;",
        b"\x00\x00\x00\x02\x14\x01\x11\x04user\x06\x01",
        b"\x81\xa1x\x01",
        b"flash|N;",
    ];

    /// Numbers that look random, the same every run (a linear congruential
    /// generator from `seed`).
    fn numbers(mut seed: u64) -> impl FnMut() -> usize {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        }
    }

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

    /// Pools set otherwise share sessions during a change: each reads what
    /// any other wrote. Before, a pool set to none handed the compressed
    /// bytes to PHP, which failed to decode them and destroyed the session;
    /// one set to another algorithm kept it unreadable.
    #[test]
    fn each_setting_reads_what_any_other_wrote() {
        let big: Vec<u8> = SESSION.iter().copied().cycle().take(64 << 10).collect();
        for wrote in ["lzf", "lz4", "zstd"] {
            for data in [SESSION, &big[..]] {
                let packed = codec(wrote).pack(data);
                assert_ne!(&packed[..], data, "{wrote} compressed");
                for reads in ["none", "lzf", "lz4", "zstd"] {
                    assert_eq!(
                        codec(reads).unpack(&packed).map(|d| d.into_owned()),
                        Ok(data.to_vec()),
                        "{wrote} read by {reads}"
                    );
                }
            }
        }
        // phpredis's LZF (the raw stream) of many sessions, read by each
        // setting: a check that misfires 1 time in 256 (an LZ4 CRC-8 that
        // matches an LZF stream's first byte, its text then claiming hundreds
        // of MiB) shows here.
        let mut next = numbers(0x9e37_79b9_7f4a_7c15);
        for i in 0..3000 {
            let word: String = (0..4 + next() % 12)
                .map(|_| char::from(b'a' + (next() % 26) as u8))
                .collect();
            let data = format!(
                "{word}|s:{}:\"{word}{word}{word}\";n|i:{i};",
                word.len() * 3
            );
            let Ok(stored) = lzf::compress(data.as_bytes()) else {
                continue;
            };
            for reads in ["none", "lzf", "lz4", "zstd"] {
                assert_eq!(
                    codec(reads).unpack(&stored).map(|d| d.into_owned()),
                    Ok(data.clone().into_bytes()),
                    "phpredis's lzf of {data:?} read by {reads}"
                );
            }
        }
        // Plain sessions of every serializer are no other algorithm's frame.
        for plain in PLAIN.into_iter().chain([SESSION]) {
            for reads in ["none", "lzf", "lz4", "zstd"] {
                assert_eq!(
                    codec(reads).unpack(plain),
                    Ok(Cow::Borrowed(plain)),
                    "{reads}: {plain:?}"
                );
            }
        }
        // Set to none, what is neither compressed nor a session (an encrypted
        // payload) passes as it is, as before.
        let garbage = [0xF3, 0x11, 0x02, 0x99, 0x00, 0x7E, 0x13];
        assert_eq!(
            codec("none").unpack(&garbage),
            Ok(Cow::Borrowed(&garbage[..]))
        );
    }

    /// Data that is not a serialized session (an encrypted Laravel session:
    /// base64 of JSON) reads back as written. Before, what LZF could not shrink
    /// was stored as it is, which then read as neither LZF nor a session: the
    /// session was kept unreadable and every later write dropped.
    #[test]
    fn data_that_is_no_session_reads_back_as_written() {
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut next = numbers(0x2545_f491_4f6c_dd1d);
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
        for plain in PLAIN {
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

    /// phpredis matches a name by its first letters and turns an unknown one
    /// into none; it reads a level's leading digits. Its php.ini, read
    /// strictly, failed every session start after a switch.
    #[test]
    fn phpredis_settings_read_as_phpredis_reads_them() {
        for (value, name) in [
            ("lz4hc", "lz4"),
            ("LZ4", "lz4"),
            ("zstd19", "zstd"),
            ("lzfx", "lzf"),
            ("gzip", "none"),
            ("", "none"),
            (" lz4", "none"),
            ("None", "none"),
            ("lé", "none"),
            ("é", "none"),
        ] {
            assert_eq!(
                Codec::as_phpredis_reads("compression", value),
                name,
                "{value:?}"
            );
        }
        for (value, level) in [
            ("19", 19),
            ("high", 0),
            (" 7x", 7),
            ("-2", -2),
            ("", 0),
            ("99999999999", i32::MAX),
        ] {
            let read = Codec::as_phpredis_reads("compression_level", value);
            assert_eq!(read.parse::<i32>(), Ok(level), "{value:?}");
            assert!(Codec::parse("zstd", &read).is_ok());
        }
    }
}
