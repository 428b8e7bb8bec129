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
    text.chars().map(char::len_utf16).sum()
}

/// Encodes any serializable value as RFC 8785 canonical JSON.
///
/// Fails on NaN or infinite floats, and on types JSON cannot carry (maps with non-string keys).
pub fn to_canonical_string<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json_canonicalizer::to_string(value)
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
    /// An integer outside +/-(2^53 - 1), which JSON implementations do not carry exactly.
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
                let exact_integer_too_large = number
                    .as_u64()
                    .map(|n| n > MAX_SAFE_INTEGER)
                    .or_else(|| number.as_i64().map(|n| n.unsigned_abs() > MAX_SAFE_INTEGER))
                    .unwrap_or(false);
                if exact_integer_too_large {
                    return Err(StructureViolation::UnsafeInteger);
                }
            }
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    Ok(())
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
    }

    #[test]
    fn utf16_counts_astral_characters_twice() {
        assert_eq!(utf16_len("a\u{1f600}"), 3);
    }
}
