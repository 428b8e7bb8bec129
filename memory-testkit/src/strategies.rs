//! Proptest strategies for identities and JSON values, biased toward the inputs canonical JSON gets
//! wrong: characters outside the Basic Multilingual Plane (which sort differently by UTF-16 units than by
//! code points against U+E000..U+FFFF), escapes, negative zero, and numbers at the edges of exact
//! representation.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};

use memory_core::canonical::MAX_SAFE_INTEGER;

/// Characters that exercise escaping and UTF-16 ordering.
const SPECIAL_CHARACTERS: &[char] = &[
    '"',
    '\\',
    '/',
    '\u{0}',
    '\u{1f}',
    '\u{7f}',
    '\u{2028}',
    '\u{e000}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10000}',
    '\u{1f600}',
    '\u{10ffff}',
    'é',
    '€',
];

/// Numbers at the edges of what RFC 8785 and JSON carry: negative zero, the smallest subnormal, the
/// largest exact integers, and the switch to exponent notation at 1e21.
pub const EDGE_NUMBERS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    1e21,
    1e-7,
    5e-324,
    -5e-324,
    9_007_199_254_740_991.0,
    -9_007_199_254_740_991.0,
    1.797_693_134_862_315_7e308,
    333_333_333.333_333_3,
];

/// Strings of up to `max_chars` characters, mixing ASCII, the special characters above and any valid
/// Unicode scalar value.
pub fn json_text(max_chars: usize) -> impl Strategy<Value = String> {
    let character = prop_oneof![
        4 => proptest::char::range('a', 'z'),
        2 => proptest::sample::select(SPECIAL_CHARACTERS),
        1 => any::<char>(),
    ];
    proptest::collection::vec(character, 0..=max_chars)
        .prop_map(|chars| chars.into_iter().collect())
}

/// Finite numbers that survive an address round trip: the edge numbers, safe integers, and any finite
/// float that RFC 8785 would not write as an integer literal beyond 2^53 - 1.
pub fn json_number() -> impl Strategy<Value = Number> {
    let max = MAX_SAFE_INTEGER as i64;
    prop_oneof![
        3 => proptest::sample::select(EDGE_NUMBERS).prop_filter_map("finite", Number::from_f64),
        2 => (-max..=max).prop_map(Number::from),
        2 => any::<f64>().prop_filter_map("representable", |float| {
            let integral_beyond_safe =
                float.fract() == 0.0 && float.abs() > MAX_SAFE_INTEGER as f64 && float.abs() < 1e21;
            if integral_beyond_safe { None } else { Number::from_f64(float) }
        }),
    ]
}

/// JSON values nesting at most `depth` containers of at most `width` entries.
pub fn json_value(depth: u32, width: usize) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        json_number().prop_map(Value::Number),
        json_text(12).prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 64, width as u32, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..=width).prop_map(Value::Array),
            proptest::collection::vec((json_text(8), inner), 0..=width)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}
