//! Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and the structural limits checked on
//! untrusted JSON before it is canonicalized.
//!
//! Canonicalization is delegated to `serde_json_canonicalizer`, which sorts object members by UTF-16 code
//! units, formats numbers the ECMAScript way and refuses NaN and infinities; the tests pin it to RFC 8785's
//! published examples.

use serde::Serialize;
use serde_json::Value;

/// The largest integer magnitude a JSON number carries exactly in every implementation (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Length of a string in UTF-16 code units, the unit the specification's text limits use.
pub fn utf16_len(text: &str) -> usize {
    // Every character is one unit except those outside the Basic Multilingual Plane, which are two and
    // are exactly the ones whose UTF-8 form starts with a byte of 0xF0 or more. Limits are checked on
    // 16 MiB texts, so both counts avoid per-character work: `chars().count()` runs std's optimized
    // counter, and lead bytes are counted eight at a time.
    text.chars().count() + count_four_byte_leads(text.as_bytes())
}

fn count_four_byte_leads(bytes: &[u8]) -> usize {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact(8);
    let mut count = 0_usize;
    for chunk in &mut chunks {
        let mut word = [0_u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Bit 7 of each byte survives only where bits 7, 6, 5 and 4 of that byte are all set; the
        // shifts carry bits across bytes only into bit positions the mask then clears.
        let leads = word & (word << 1) & (word << 2) & (word << 3) & HIGH_BITS;
        count += leads.count_ones() as usize;
    }
    count
        + chunks
            .remainder()
            .iter()
            .filter(|byte| **byte >= 0xF0)
            .count()
}

/// Encodes any serializable value as RFC 8785 canonical JSON.
///
/// Fails on NaN or infinite floats, and on types JSON cannot carry (maps with non-string keys).
pub fn to_canonical_string<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    // The canonicalizer refuses a non-finite float only at the top level: nested ones go through
    // serde_json, which writes them as `null`. A float-only pass refuses them wherever they are.
    if finite::holds_non_finite_float(value) {
        return Err(serde::ser::Error::custom(
            "NaN and +/-Infinity are not permitted in JSON",
        ));
    }
    serde_json_canonicalizer::to_string(value)
}

/// A serializer that only looks at floats, to find NaN and infinities anywhere in a value.
mod finite {
    use std::fmt;

    use serde::Serialize;
    use serde::ser::{self, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant};
    use serde::ser::{SerializeTuple, SerializeTupleStruct, SerializeTupleVariant};

    pub(super) fn holds_non_finite_float<T: Serialize + ?Sized>(value: &T) -> bool {
        matches!(value.serialize(FloatCheck), Err(Found::NonFinite))
    }

    /// Why the walk stopped: a non-finite float, or an error of the value's own `Serialize` (left for
    /// the canonical encoder to report).
    #[derive(Debug)]
    pub(super) enum Found {
        NonFinite,
        Other,
    }

    impl fmt::Display for Found {
        fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str(match self {
                Self::NonFinite => "non-finite float",
                Self::Other => "serialization error",
            })
        }
    }

    impl std::error::Error for Found {}

    impl ser::Error for Found {
        fn custom<T: fmt::Display>(_message: T) -> Self {
            Self::Other
        }
    }

    pub(super) struct FloatCheck;

    type Checked = Result<(), Found>;

    macro_rules! accept {
        ($($method:ident: $type:ty),* $(,)?) => {
            $(fn $method(self, _value: $type) -> Checked { Ok(()) })*
        };
    }

    impl ser::Serializer for FloatCheck {
        type Ok = ();
        type Error = Found;
        type SerializeSeq = Self;
        type SerializeTuple = Self;
        type SerializeTupleStruct = Self;
        type SerializeTupleVariant = Self;
        type SerializeMap = Self;
        type SerializeStruct = Self;
        type SerializeStructVariant = Self;

        accept!(
            serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
            serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
            serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
            serialize_str: &str, serialize_bytes: &[u8], serialize_unit_struct: &'static str,
        );

        fn serialize_f32(self, value: f32) -> Checked {
            if value.is_finite() {
                Ok(())
            } else {
                Err(Found::NonFinite)
            }
        }

        fn serialize_f64(self, value: f64) -> Checked {
            if value.is_finite() {
                Ok(())
            } else {
                Err(Found::NonFinite)
            }
        }

        fn serialize_none(self) -> Checked {
            Ok(())
        }

        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Checked {
            value.serialize(self)
        }

        fn serialize_unit(self) -> Checked {
            Ok(())
        }

        fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Checked {
            Ok(())
        }

        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Checked {
            value.serialize(self)
        }

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            value: &T,
        ) -> Checked {
            value.serialize(self)
        }

        fn serialize_seq(self, _: Option<usize>) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_tuple(self, _: usize) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_map(self, _: Option<usize>) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Found> {
            Ok(self)
        }

        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self, Found> {
            Ok(self)
        }
    }

    impl SerializeSeq for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeTuple for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeTupleStruct for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeTupleVariant for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeMap for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Checked {
            key.serialize(FloatCheck)
        }
        fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeStruct for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            _: &'static str,
            value: &T,
        ) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }

    impl SerializeStructVariant for FloatCheck {
        type Ok = ();
        type Error = Found;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            _: &'static str,
            value: &T,
        ) -> Checked {
            value.serialize(FloatCheck)
        }
        fn end(self) -> Checked {
            Ok(())
        }
    }
}

/// Structural limits on a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructureLimits {
    /// Most nested containers (an array or object counts one level; scalars count none).
    pub max_depth: usize,
    /// Most entries in one array or object.
    pub max_entries: usize,
}

/// What [`check_structure`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StructureViolation {
    /// Containers nest deeper than allowed; `depth` is the first level past the limit.
    TooDeep {
        /// The first depth past the limit.
        depth: usize,
    },
    /// A container holds too many entries.
    TooManyEntries {
        /// The container's entry count.
        entries: usize,
    },
    /// An integer outside +/-(2^53 - 1), or a float RFC 8785 writes as one; JSON implementations do not
    /// carry these exactly.
    UnsafeInteger,
}

/// Checks depth, entry counts and integer range of a parsed JSON value, iteratively (no recursion, so no
/// input can exhaust the stack).
pub fn check_structure(value: &Value, limits: StructureLimits) -> Result<(), StructureViolation> {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((node, depth)) = stack.pop() {
        match node {
            Value::Array(items) => {
                let depth = depth + 1;
                if depth > limits.max_depth {
                    return Err(StructureViolation::TooDeep { depth });
                }
                if items.len() > limits.max_entries {
                    return Err(StructureViolation::TooManyEntries {
                        entries: items.len(),
                    });
                }
                stack.extend(items.iter().map(|item| (item, depth)));
            }
            Value::Object(members) => {
                let depth = depth + 1;
                if depth > limits.max_depth {
                    return Err(StructureViolation::TooDeep { depth });
                }
                if members.len() > limits.max_entries {
                    return Err(StructureViolation::TooManyEntries {
                        entries: members.len(),
                    });
                }
                stack.extend(members.values().map(|item| (item, depth)));
            }
            Value::Number(number) => {
                if is_unsafe_integer(number) {
                    return Err(StructureViolation::UnsafeInteger);
                }
            }
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    Ok(())
}

/// Whether a number is, or canonicalizes to, an integer literal outside +/-(2^53 - 1).
///
/// RFC 8785 writes a float with an integral value below 1e21 as a plain integer literal, so the float
/// 2^53 becomes `9007199254740992` and would be read back as an unsafe integer: such floats are refused
/// too, which keeps encode, decode and restore in agreement. From 1e21 on the form has an exponent and
/// reads back as the same float.
fn is_unsafe_integer(number: &serde_json::Number) -> bool {
    const EXPONENT_FORM_FROM: f64 = 1e21;
    if let Some(unsigned) = number.as_u64() {
        return unsigned > MAX_SAFE_INTEGER;
    }
    if let Some(signed) = number.as_i64() {
        return signed.unsigned_abs() > MAX_SAFE_INTEGER;
    }
    number.as_f64().is_some_and(|float| {
        float.fract() == 0.0
            && float.abs() > MAX_SAFE_INTEGER as f64
            && float.abs() < EXPONENT_FORM_FROM
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 8785 section 3.2.2 and appendix B examples.
    #[test]
    fn rfc8785_published_examples() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let value: Value = serde_json::from_str(input).expect("valid JSON");
        assert_eq!(
            to_canonical_string(&value).expect("canonical"),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        // Appendix B: IEEE 754 to ECMAScript number serialization.
        for (bits, expected) in [
            (0x0000_0000_0000_0000_u64, "0"),
            (0x8000_0000_0000_0000, "0"),
            (0x0000_0000_0000_0001, "5e-324"),
            (0x8000_0000_0000_0001, "-5e-324"),
            (0x7fef_ffff_ffff_ffff, "1.7976931348623157e+308"),
            (0xffef_ffff_ffff_ffff, "-1.7976931348623157e+308"),
            (0x4340_0000_0000_0000, "9007199254740992"),
            (0xc340_0000_0000_0000, "-9007199254740992"),
            (0x4430_0000_0000_0000, "295147905179352830000"),
            (0x44b5_2d02_c7e1_4af5, "9.999999999999997e+22"),
            (0x44b5_2d02_c7e1_4af6, "1e+23"),
            (0x44b5_2d02_c7e1_4af7, "1.0000000000000001e+23"),
            (0x444b_1ae4_d6e2_ef4e, "999999999999999700000"),
            (0x444b_1ae4_d6e2_ef4f, "999999999999999900000"),
            (0x444b_1ae4_d6e2_ef50, "1e+21"),
            (0x3eb0_c6f7_a0b5_ed8c, "9.999999999999997e-7"),
            (0x3eb0_c6f7_a0b5_ed8d, "0.000001"),
            (0x41b3_de43_5555_5553, "333333333.3333332"),
            (0x41b3_de43_5555_5554, "333333333.33333325"),
            (0x41b3_de43_5555_5555, "333333333.3333333"),
            (0x41b3_de43_5555_5556, "333333333.3333334"),
            (0x41b3_de43_5555_5557, "333333333.33333343"),
            (0xbecb_f647_612f_3696, "-0.0000033333333333333333"),
            (0x4314_3ff3_c1cb_0959, "1424953923781206.2"),
        ] {
            let number = f64::from_bits(bits);
            assert_eq!(
                to_canonical_string(&number).expect("finite"),
                expected,
                "bits {bits:#x}"
            );
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(to_canonical_string(&bad).is_err());
            // Nested, where serde_json alone would write `null`.
            assert!(to_canonical_string(&vec![(1.0_f64, Some(bad))]).is_err());
            assert!(to_canonical_string(&std::collections::BTreeMap::from([("k", bad)])).is_err());
            assert!(to_canonical_string(&[bad as f32]).is_err());
        }
    }

    /// RFC 8785 section 3.2.3: members sorted by UTF-16 code units, not by UTF-8 bytes.
    #[test]
    fn rfc8785_sorting_example_uses_utf16_order() {
        let value = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{0080}": "Control",
            "\u{00f6}": "Latin Small Letter O With Diaeresis"
        });
        let canonical = to_canonical_string(&value).expect("canonical");
        let order: Vec<&str> = [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small Letter O With Diaeresis",
            "Euro Sign",
            "Emoji: Grinning Face",
            "Hebrew Letter Dalet With Dagesh",
        ]
        .to_vec();
        let positions: Vec<usize> = order
            .iter()
            .map(|name| canonical.find(name).expect("member present"))
            .collect();
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{canonical}"
        );
    }

    #[test]
    fn structure_limits_name_the_violation() {
        let limits = StructureLimits {
            max_depth: 2,
            max_entries: 2,
        };
        assert_eq!(check_structure(&json!([[1]]), limits), Ok(()));
        assert_eq!(
            check_structure(&json!([[[1]]]), limits),
            Err(StructureViolation::TooDeep { depth: 3 })
        );
        assert_eq!(
            check_structure(&json!({"a": 1, "b": 2, "c": 3}), limits),
            Err(StructureViolation::TooManyEntries { entries: 3 })
        );
        assert_eq!(
            check_structure(&json!(9_007_199_254_740_992_u64), limits),
            Err(StructureViolation::UnsafeInteger)
        );
        assert_eq!(
            check_structure(&json!(-9_007_199_254_740_991_i64), limits),
            Ok(())
        );
        for float in [9_007_199_254_740_992.0_f64, -1e20] {
            assert_eq!(
                check_structure(&json!(float), limits),
                Err(StructureViolation::UnsafeInteger),
                "{float}"
            );
        }
        for float in [9_007_199_254_740_991.0_f64, 1e21, 0.5, 1e25] {
            assert_eq!(check_structure(&json!(float), limits), Ok(()), "{float}");
        }
    }

    #[test]
    fn utf16_counts_astral_characters_twice() {
        assert_eq!(utf16_len("a\u{1f600}"), 3);
        assert_eq!(utf16_len(""), 0);
    }

    #[test]
    fn utf16_len_agrees_with_the_standard_encoder_at_every_alignment() {
        let alphabet = [
            'a',
            '\u{7f}',
            '\u{80}',
            '\u{7ff}',
            '\u{800}',
            '\u{ffff}',
            '\u{10000}',
            '\u{10ffff}',
        ];
        let mut text = String::new();
        for round in 0..64 {
            text.push(alphabet[(round * 5 + round / 8) % alphabet.len()]);
            for start in 0..text.len() {
                if let Some(suffix) = text.get(start..) {
                    assert_eq!(
                        utf16_len(suffix),
                        suffix.encode_utf16().count(),
                        "{suffix:?}"
                    );
                }
            }
        }
    }
}
