//! Argument types that follow PHP's own coercion rules where ext-php-rs is stricter.

use ext_php_rs::convert::{FromZval, IntoZval, StubLiteral};
use ext_php_rs::flags::DataType;
use ext_php_rs::types::{ZendStr, Zval};

/// A `float` parameter that, like PHP's internal functions in coercive mode, also
/// takes an int or a numeric string ("1.5", " 2", "1e3").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Float(pub f64);

impl From<f64> for Float {
    fn from(v: f64) -> Self {
        Float(v)
    }
}

impl StubLiteral for Float {
    fn stub_literal(&self) -> String {
        self.0.stub_literal()
    }
}

impl FromZval<'_> for Float {
    const TYPE: DataType = DataType::Double;

    fn from_zval(zval: &Zval) -> Option<Self> {
        if let Some(v) = f64::from_zval(zval) {
            return Some(Float(v));
        }
        zval.str().and_then(numeric).map(Float)
    }
}

/// PHP's numeric strings: optional surrounding whitespace, a decimal number with an
/// optional exponent. Rust's parser alone would also take "inf" and "NaN".
fn numeric(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c| " \t\n\r\x0b\x0c".contains(c));
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

    fn from_zval(zval: &Zval) -> Option<Self> {
        zval.zend_str().map(|s| Bytes(s.as_bytes().to_vec()))
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
