//! Argument types that follow PHP's own coercion rules where ext-php-rs is stricter.

use ext_php_rs::convert::{FromZval, IntoZval, StubLiteral};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendStr, Zval};

/// A `float` parameter that, like PHP's internal functions in coercive mode, also
/// takes an int, a bool or a numeric string ("1.5", " 2", "1e3").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Float(pub f64);

impl From<f64> for Float {
    fn from(v: f64) -> Self {
        Float(v)
    }
}

impl StubLiteral for Float {
    /// ext-php-rs makes each default's literal on every call of a method that
    /// declares one: `{:?}` of an f64 was a sixth of a constructor's cost.
    fn stub_literal(&self) -> String {
        match self.0 {
            v if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}.0", v as i64),
            v => v.stub_literal(),
        }
    }
}

impl FromZval<'_> for Float {
    const TYPE: DataType = DataType::Double;

    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(v) = f64::from_zval(zval) {
            return Some(Float(v));
        }
        if let Some(b) = zval.bool() {
            return Some(Float(if b { 1.0 } else { 0.0 }));
        }
        zval.str().and_then(numeric).map(Float)
    }
}

/// An `int` parameter that, like PHP's internal functions in coercive mode, also
/// takes a float with no fractional part, a bool, or a numeric string of a whole
/// number ("3", " 3", "3.0"); a fraction, which PHP truncates with a deprecation,
/// is a TypeError here. Review, stop 58: `new DistributedSemaphore($k,
/// getenv('LIMIT'))` was a TypeError.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Int(pub i64);

impl From<i64> for Int {
    fn from(v: i64) -> Self {
        Int(v)
    }
}

impl StubLiteral for Int {
    fn stub_literal(&self) -> String {
        self.0.to_string()
    }
}

impl FromZval<'_> for Int {
    const TYPE: DataType = DataType::Long;

    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(v) = zval.long() {
            return Some(Int(v));
        }
        if let Some(b) = zval.bool() {
            return Some(Int(i64::from(b)));
        }
        // A whole number's digits exactly (an f64 would round past 2^53).
        let text = zval.str();
        if let Some(v) = text.and_then(|t| php_trim(t).parse().ok()) {
            return Some(Int(v));
        }
        let v = zval.double().or_else(|| text.and_then(numeric))?;
        // Whole and within i64 (2^63 itself is not: `as` would saturate).
        (v.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v))
            .then_some(Int(v as i64))
    }
}

/// A `bool` parameter that, like PHP's internal functions in coercive mode, also
/// takes an int, a float or a string ("", "0": false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bool(pub bool);

impl From<bool> for Bool {
    fn from(v: bool) -> Self {
        Bool(v)
    }
}

impl StubLiteral for Bool {
    fn stub_literal(&self) -> String {
        self.0.to_string()
    }
}

impl FromZval<'_> for Bool {
    const TYPE: DataType = DataType::Bool;

    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(b) = zval.bool() {
            return Some(Bool(b));
        }
        if let Some(v) = zval.long() {
            return Some(Bool(v != 0));
        }
        if let Some(v) = zval.double() {
            return Some(Bool(v != 0.0));
        }
        zval.str().map(|s| Bool(!s.is_empty() && s != "0"))
    }
}

/// `s` without the whitespace PHP allows around a numeric string.
fn php_trim(s: &str) -> &str {
    s.trim_matches(|c| " \t\n\r\x0b\x0c".contains(c))
}

/// PHP's numeric strings: optional surrounding whitespace, a decimal number with an
/// optional exponent. Rust's parser alone would also take "inf" and "NaN".
fn numeric(s: &str) -> Option<f64> {
    let t = php_trim(s);
    let ok = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
        && t.bytes().any(|b| b.is_ascii_digit());
    if ok {
        t.parse().ok()
    } else {
        None
    }
}

/// A scalar option value (bool, int, float or string), kept as the text form that
/// ini settings use too, so both are parsed by the same code.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionValue(pub String);

impl StubLiteral for OptionValue {
    fn stub_literal(&self) -> String {
        self.0.stub_literal()
    }
}

impl FromZval<'_> for OptionValue {
    const TYPE: DataType = DataType::Mixed;

    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(b) = zval.bool() {
            return Some(OptionValue(if b { "1" } else { "0" }.into()));
        }
        if let Some(n) = zval.long() {
            return Some(OptionValue(n.to_string()));
        }
        if let Some(f) = zval.double() {
            return Some(OptionValue(f.to_string()));
        }
        zval.str().map(|s| OptionValue(s.to_string()))
    }
}

/// A PHP string as bytes: keys may be any binary string, not only UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl FromZval<'_> for Bytes {
    const TYPE: DataType = DataType::String;

    /// Like a `string` parameter of PHP's internal functions in coercive mode: a
    /// string, or an int, float, bool or Stringable object converted to one.
    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(s) = zval.zend_str() {
            return Some(Bytes(s.as_bytes().to_vec()));
        }
        if zval.is_bool() {
            return Some(Bytes(if zval.bool()? {
                b"1".to_vec()
            } else {
                Vec::new()
            }));
        }
        if let Some(n) = zval.long() {
            return Some(Bytes(n.to_string().into_bytes()));
        }
        if let Some(f) = zval.double() {
            return Some(Bytes(php_float_string(f).into_bytes()));
        }
        let text = zval.object()?.try_call_method("__toString", vec![]).ok()?;
        text.zend_str().map(|s| Bytes(s.as_bytes().to_vec()))
    }
}

impl IntoZval for Bytes {
    const TYPE: DataType = DataType::String;
    const NULLABLE: bool = false;

    fn set_zval(self, zv: &mut Zval, _persistent: bool) -> ext_php_rs::error::Result<()> {
        zv.set_zend_string(ZendStr::new(self.0, false));
        Ok(())
    }
}

impl Bytes {
    /// The bytes as text, invalid UTF-8 replaced (for values checked afterwards,
    /// like session ids against PHP's id alphabet).
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// The bytes as text, for values that must be UTF-8 (DSNs).
    pub fn into_utf8(self, what: &str) -> crate::core::error::Result<String> {
        String::from_utf8(self.0)
            .map_err(|_| crate::core::error::Error::invalid(format!("{what} is not valid UTF-8")))
    }
}

/// A float as PHP writes it in string context: shortest round-trip digits,
/// "1.0E+25" style exponents, INF/NAN.
fn php_float_string(f: f64) -> String {
    if f.is_nan() {
        return "NAN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "INF" } else { "-INF" }.into();
    }
    let plain = format!("{f}");
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return format!("{f:.0}");
    }
    if f.abs() >= 1e15 || (f != 0.0 && f.abs() < 1e-4) {
        let e = format!("{f:e}"); // e.g. 1.5e25
        let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        return format!(
            "{mantissa}E{}{}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    plain
}

/// The `$options` array: any array converts, and each entry is checked by name
/// later, so a bad entry is a ValueError naming the option rather than a TypeError
/// for the whole argument.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options(pub Vec<(String, std::result::Result<String, String>)>);

impl StubLiteral for Options {
    fn stub_literal(&self) -> String {
        "[]".into()
    }
}

impl FromZval<'_> for Options {
    const TYPE: DataType = DataType::Array;

    fn from_zval(zval: &Zval) -> Option<Self> {
        let mut out = Vec::new();
        // next_zval, not the iterator: it panics on a key that is not UTF-8.
        let mut entries = ext_php_rs::types::array::Iter::new(zval.array()?);
        while let Some((key, value)) = entries.next_zval() {
            let name = match key.long() {
                Some(n) => n.to_string(),
                None => String::from_utf8_lossy(key.zend_str().map_or(&[][..], |s| s.as_bytes()))
                    .into_owned(),
            };
            let text = match OptionValue::from_zval(value) {
                Some(v) => Ok(v.0),
                None if value.zend_str().is_some() => {
                    Err("a string that is not valid UTF-8".to_string())
                }
                None => Err(format!("{:?}", value.get_type()).to_lowercase()),
            };
            out.push((name, text));
        }
        Some(Options(out))
    }
}
