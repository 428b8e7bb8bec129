//! Namespaces and addresses (SPEC §2.1): round trips, every limit at its boundary, the three ways
//! `restore` refuses an address, and parsers fed arbitrary text.

use memory_core::canonical::utf16_len;
use memory_core::namespace::{
    MAX_ADDRESS_BYTES, MAX_DECODE_INPUT_BYTES, MAX_IDENTITY_DEPTH, MAX_IDENTITY_ENTRIES,
    MAX_NAME_UTF16_UNITS,
};
use memory_core::{AddressError, MemoryWrite, Namespace, NamespaceAddress, NamespaceDefinition};
use memory_testkit::proptest_config;
use memory_testkit::strategies::{EDGE_NUMBERS, json_text, json_value};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct UserIdentity {
    tenant: String,
    user: String,
}

struct UserConversations;
impl NamespaceDefinition for UserConversations {
    const NAME: &'static str = "user-conversations";
    const VERSION: u64 = 1;
    type Identity = UserIdentity;
}

/// Same name, next version.
struct UserConversationsV2;
impl NamespaceDefinition for UserConversationsV2 {
    const NAME: &'static str = "user-conversations";
    const VERSION: u64 = 2;
    type Identity = UserIdentity;
}

/// Another name, same identity type.
struct TeamNotes;
impl NamespaceDefinition for TeamNotes {
    const NAME: &'static str = "team-notes";
    const VERSION: u64 = 1;
    type Identity = UserIdentity;
}

/// Any JSON value as identity, for round trips on random trees.
struct AnyIdentity;
impl NamespaceDefinition for AnyIdentity {
    const NAME: &'static str = "any-identity";
    const VERSION: u64 = 1;
    type Identity = Value;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Measurement {
    value: f64,
}

struct Measurements;
impl NamespaceDefinition for Measurements {
    const NAME: &'static str = "measurements";
    const VERSION: u64 = 1;
    type Identity = Measurement;
}

struct NamelessDefinition;
impl NamespaceDefinition for NamelessDefinition {
    const NAME: &'static str = "";
    const VERSION: u64 = 1;
    type Identity = UserIdentity;
}

struct VersionZero;
impl NamespaceDefinition for VersionZero {
    const NAME: &'static str = "version-zero";
    const VERSION: u64 = 0;
    type Identity = UserIdentity;
}

fn user(tenant: &str, name: &str) -> UserIdentity {
    UserIdentity {
        tenant: tenant.to_owned(),
        user: name.to_owned(),
    }
}

fn users(tenant: &str, name: &str) -> Namespace<UserConversations> {
    Namespace::make(user(tenant, name)).expect("a small identity is valid")
}

/// Asserts a refusal that names `limit`, both in the variant and in the message.
#[track_caller]
fn assert_limit(result: Result<NamespaceAddress, AddressError>, limit: &str, actual: u64) {
    match result {
        Err(error @ AddressError::LimitExceeded { .. }) => {
            let AddressError::LimitExceeded {
                limit: named,
                actual: seen,
                ..
            } = &error
            else {
                unreachable!()
            };
            assert_eq!(*named, limit);
            assert_eq!(*seen, actual);
            assert!(error.to_string().contains(limit), "{error}");
        }
        other => panic!("expected the {limit} limit, got {other:?}"),
    }
}

#[test]
fn typed_address_is_the_compact_canonical_array() {
    let namespace = users("acme", "ada");
    assert_eq!(
        namespace.address().as_str(),
        r#"[1,"user-conversations",1,{"tenant":"acme","user":"ada"}]"#
    );
    let restored = Namespace::<UserConversations>::restore(namespace.address().as_str())
        .expect("a made address restores");
    assert_eq!(restored.identity(), &user("acme", "ada"));
    assert_eq!(restored, namespace);
}

#[test]
fn identity_keys_sort_by_utf16_units_not_code_points() {
    // U+1F600 is D83D DE00 in UTF-16, which sorts before U+E000; by code point it sorts after.
    let address = NamespaceAddress::encode(
        "any-identity",
        1,
        &json!({"\u{e000}": 1, "\u{1f600}": 2, "a": 3}),
    )
    .expect("valid");
    assert_eq!(
        address.as_str(),
        "[1,\"any-identity\",1,{\"a\":3,\"\u{1f600}\":2,\"\u{e000}\":1}]"
    );
}

#[test]
fn edge_numbers_survive_the_round_trip_in_ecmascript_form() {
    for (number, canonical) in [
        (-0.0, "0"),
        (1e21, "1e+21"),
        (5e-324, "5e-324"),
        (9_007_199_254_740_991.0, "9007199254740991"),
        (-9_007_199_254_740_991.0, "-9007199254740991"),
        (1e-7, "1e-7"),
        (0.1, "0.1"),
    ] {
        let namespace = Namespace::<Measurements>::make(Measurement { value: number })
            .expect("a finite number is valid");
        let expected = format!(r#"[1,"measurements",1,{{"value":{canonical}}}]"#);
        assert_eq!(namespace.address().as_str(), expected, "{number:e}");
        let restored = Namespace::<Measurements>::restore(&expected).expect("restores");
        assert_eq!(restored.address(), namespace.address());
    }
}

#[test]
fn negative_zero_becomes_zero() {
    let negative = Namespace::<Measurements>::make(Measurement { value: -0.0 }).expect("valid");
    let positive = Namespace::<Measurements>::make(Measurement { value: 0.0 }).expect("valid");
    assert_eq!(negative.address(), positive.address());
    let untyped = NamespaceAddress::decode_untyped("any-identity", 1, "[-0.0, -0]").expect("valid");
    assert_eq!(untyped.as_str(), r#"[1,"any-identity",1,[0,0]]"#);
}

#[test]
fn non_finite_numbers_are_refused() {
    for number in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let error = Namespace::<Measurements>::make(Measurement { value: number })
            .expect_err("not representable");
        assert!(
            matches!(error, AddressError::UnrepresentableNumber { .. }),
            "{number}: {error:?}"
        );
    }
}

#[test]
fn integers_beyond_two_to_the_53_are_refused() {
    let safe = 9_007_199_254_740_991_u64;
    for valid in [json!(safe), json!(-(safe as i64))] {
        NamespaceAddress::encode("any-identity", 1, &valid).expect("a safe integer is valid");
    }
    for unsafe_number in [
        json!(safe + 1),
        json!(-(safe as i64) - 1),
        json!(u64::MAX),
        // A float at 2^53 is written as the integer literal 9007199254740992, which would not read back.
        json!(9_007_199_254_740_992.0_f64),
        json!(1e20),
    ] {
        let error = NamespaceAddress::encode("any-identity", 1, &unsafe_number)
            .expect_err("outside the exact range");
        assert!(
            matches!(&error, AddressError::UnrepresentableNumber { detail } if detail.contains("2^53")),
            "{unsafe_number}: {error:?}"
        );
        let text = unsafe_number.to_string();
        assert!(
            NamespaceAddress::decode_untyped("any-identity", 1, &text).is_err(),
            "{text}"
        );
        let stored = format!(r#"[1,"any-identity",1,{text}]"#);
        assert!(
            matches!(
                Namespace::<AnyIdentity>::restore(&stored),
                Err(AddressError::UnrepresentableNumber { .. })
            ),
            "{stored}"
        );
    }
}

#[test]
fn name_length_is_counted_in_utf16_units() {
    let identity = user("t", "u");
    let astral_256: String = "\u{1f600}".repeat(MAX_NAME_UTF16_UNITS / 2);
    let accented_256: String = "\u{e9}".repeat(MAX_NAME_UTF16_UNITS);
    for name in [&astral_256, &accented_256, &"n".to_owned()] {
        NamespaceAddress::encode(name, 1, &identity).expect("at most 256 units");
    }
    for (name, units) in [
        (format!("{astral_256}a"), 257),
        ("\u{1f600}".repeat(MAX_NAME_UTF16_UNITS / 2 + 1), 258),
        ("n".repeat(MAX_NAME_UTF16_UNITS + 1), 257),
        (String::new(), 0),
    ] {
        let error = NamespaceAddress::encode(&name, 1, &identity).expect_err("refused");
        assert_eq!(error, AddressError::InvalidName { units });
        assert!(error.to_string().contains("256 UTF-16"), "{error}");
    }
    assert_eq!(
        Namespace::<NamelessDefinition>::make(identity),
        Err(AddressError::InvalidName { units: 0 })
    );
}

#[test]
fn version_must_be_between_one_and_two_to_the_53_minus_one() {
    let identity = user("t", "u");
    let max = (1_u64 << 53) - 1;
    NamespaceAddress::encode("n", max, &identity).expect("2^53 - 1 is valid");
    NamespaceAddress::encode("n", 1, &identity).expect("1 is valid");
    for version in [0, max + 1, u64::MAX] {
        let error = NamespaceAddress::encode("n", version, &identity).expect_err("refused");
        assert_eq!(error, AddressError::InvalidVersion { version });
        assert!(error.to_string().contains("2^53 - 1"), "{error}");
    }
    assert_eq!(
        Namespace::<VersionZero>::make(identity),
        Err(AddressError::InvalidVersion { version: 0 })
    );
}

#[test]
fn address_is_at_most_4096_bytes() {
    let overhead = users("", "u").address().as_str().len();
    // Astral characters are four bytes each: fill with them, then pad with ASCII to the exact size.
    let fill = MAX_ADDRESS_BYTES - overhead;
    let tenant = format!("{}{}", "\u{1f600}".repeat(fill / 4), "t".repeat(fill % 4));
    let at_limit = Namespace::<UserConversations>::make(user(&tenant, "u")).expect("4096 bytes");
    assert_eq!(at_limit.address().as_str().len(), MAX_ADDRESS_BYTES);
    Namespace::<UserConversations>::restore(at_limit.address().as_str()).expect("restores");
    NamespaceAddress::parse(at_limit.address().as_str()).expect("parses");

    let over = format!("{tenant}t");
    let error = Namespace::<UserConversations>::make(user(&over, "u")).expect_err("4097 bytes");
    assert_limit(Err(error), "address bytes", 4_097);
    // Stored text over the limit is refused by its size alone, before it is parsed.
    let garbage = "x".repeat(MAX_ADDRESS_BYTES + 1);
    assert_limit(NamespaceAddress::parse(&garbage), "address bytes", 4_097);
    assert_limit(
        Namespace::<UserConversations>::restore(&garbage)
            .map(|namespace| namespace.address().clone()),
        "address bytes",
        4_097,
    );
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Null, |inner, _| Value::Array(vec![inner]))
}

#[test]
fn identity_nests_at_most_16_containers() {
    let at_limit = nested(MAX_IDENTITY_DEPTH);
    let address = NamespaceAddress::encode("any-identity", 1, &at_limit).expect("16 levels");
    Namespace::<AnyIdentity>::restore(address.as_str()).expect("restores");
    let over = nested(MAX_IDENTITY_DEPTH + 1);
    assert_limit(
        NamespaceAddress::encode("any-identity", 1, &over),
        "identity depth",
        17,
    );
    assert_limit(
        NamespaceAddress::decode_untyped("any-identity", 1, &over.to_string()),
        "identity depth",
        17,
    );
    let stored = format!(r#"[1,"any-identity",1,{over}]"#);
    assert_limit(NamespaceAddress::parse(&stored), "identity depth", 17);
    let object_over = (0..=MAX_IDENTITY_DEPTH).fold(json!(1), |inner, _| json!({ "k": inner }));
    assert_limit(
        NamespaceAddress::encode("any-identity", 1, &object_over),
        "identity depth",
        17,
    );
}

#[test]
fn identity_containers_hold_at_most_128_entries() {
    let array = |entries: usize| Value::Array(vec![json!(0); entries]);
    let object = |entries: usize| {
        Value::Object(
            (0..entries)
                .map(|index| (format!("k{index}"), json!(0)))
                .collect(),
        )
    };
    for build in [array, object] {
        NamespaceAddress::encode("any-identity", 1, &build(MAX_IDENTITY_ENTRIES))
            .expect("128 entries");
        assert_limit(
            NamespaceAddress::encode("any-identity", 1, &build(MAX_IDENTITY_ENTRIES + 1)),
            "identity container entries",
            129,
        );
        let nested_over = json!({ "outer": build(MAX_IDENTITY_ENTRIES + 1) });
        assert_limit(
            NamespaceAddress::decode_untyped("any-identity", 1, &nested_over.to_string()),
            "identity container entries",
            129,
        );
    }
}

#[test]
fn oversized_decode_input_is_refused_before_parsing() {
    let not_even_json = "{".repeat(MAX_DECODE_INPUT_BYTES + 1);
    let expected = (MAX_DECODE_INPUT_BYTES + 1) as u64;
    assert_limit(
        NamespaceAddress::decode_untyped("any-identity", 1, &not_even_json),
        "identity JSON bytes",
        expected,
    );
    assert_limit(
        Namespace::<UserConversations>::decode(&not_even_json)
            .map(|namespace| namespace.address().clone()),
        "identity JSON bytes",
        expected,
    );
    // Whitespace may make valid input larger than its address; up to the bound it is accepted.
    let unpadded = r#"{"tenant":"t","user":"u"}"#;
    let padded = format!(
        "{}{}",
        " ".repeat(MAX_DECODE_INPUT_BYTES - unpadded.len()),
        unpadded
    );
    assert_eq!(padded.len(), MAX_DECODE_INPUT_BYTES);
    let decoded = Namespace::<UserConversations>::decode(&padded).expect("within the bound");
    assert_eq!(decoded, users("t", "u"));
}

#[test]
fn restore_tells_not_canonical_from_other_definition_from_unsupported_format() {
    let canonical = users("acme", "ada");
    let text = canonical.address().as_str();
    for not_canonical in [
        r#"[1, "user-conversations",1,{"tenant":"acme","user":"ada"}]"#.to_owned(),
        r#"[1,"user-conversations",1,{"user":"ada","tenant":"acme"}]"#.to_owned(),
        r#"[1,"user-conversations",1.0,{"tenant":"acme","user":"ada"}]"#.to_owned(),
        r#"[1,"user-conversations",1e0,{"tenant":"acme","user":"ada"}]"#.to_owned(),
        r#"[1,"user-conversations",1,{"tenant":"\u0061cme","user":"ada"}]"#.to_owned(),
        r#"[1,"user\u002dconversations",1,{"tenant":"acme","user":"ada"}]"#.to_owned(),
        r#"[1,"user-conversations",1,{"tenant":"acme","user":"ada","extra":0}]"#.to_owned(),
        format!("{text} "),
        format!("\n{text}"),
    ] {
        assert_eq!(
            Namespace::<UserConversations>::restore(&not_canonical).map(|_| ()),
            Err(AddressError::NotCanonical),
            "{not_canonical}"
        );
    }
    let team = Namespace::<TeamNotes>::make(user("acme", "ada")).expect("valid");
    let next_version = Namespace::<UserConversationsV2>::make(user("acme", "ada")).expect("valid");
    for other in [team.address().as_str(), next_version.address().as_str()] {
        assert_eq!(
            Namespace::<UserConversations>::restore(other).map(|_| ()),
            Err(AddressError::OtherDefinition),
            "{other}"
        );
    }
    for unsupported in [
        "",
        "not json",
        "{}",
        r#""[1,\"user-conversations\",1,{}]""#,
        "1",
        "null",
        "[]",
        r#"[2,"user-conversations",1,{"tenant":"acme","user":"ada"}]"#,
        r#"[0,"user-conversations",1,{"tenant":"acme","user":"ada"}]"#,
        r#"["1","user-conversations",1,{"tenant":"acme","user":"ada"}]"#,
        r#"[1,"user-conversations",1]"#,
        r#"[1,"user-conversations",1,{"tenant":"acme","user":"ada"},null]"#,
        r#"[1,7,1,{"tenant":"acme","user":"ada"}]"#,
        r#"[1,"user-conversations","1",{"tenant":"acme","user":"ada"}]"#,
    ] {
        assert_eq!(
            Namespace::<UserConversations>::restore(unsupported).map(|_| ()),
            Err(AddressError::UnsupportedFormat),
            "{unsupported}"
        );
        assert_eq!(
            NamespaceAddress::parse(unsupported),
            Err(AddressError::UnsupportedFormat),
            "{unsupported}"
        );
    }
}

#[test]
fn lone_surrogates_are_refused_with_a_typed_error() {
    let identity_json = r#"{"tenant":"\ud800","user":"u"}"#;
    assert!(matches!(
        Namespace::<UserConversations>::decode(identity_json),
        Err(AddressError::InvalidIdentity { .. })
    ));
    assert!(matches!(
        NamespaceAddress::decode_untyped("any-identity", 1, r#"["\udfff"]"#),
        Err(AddressError::InvalidIdentity { .. })
    ));
    let stored = r#"[1,"user-conversations",1,{"tenant":"\ud800","user":"u"}]"#;
    assert_eq!(
        Namespace::<UserConversations>::restore(stored).map(|_| ()),
        Err(AddressError::UnsupportedFormat)
    );
    assert_eq!(
        NamespaceAddress::parse(stored),
        Err(AddressError::UnsupportedFormat)
    );
    // A surrogate pair written as escapes is one astral character, and is fine (if not canonical).
    let pair = r#"{"tenant":"\ud83d\ude00","user":"u"}"#;
    let decoded = Namespace::<UserConversations>::decode(pair).expect("a valid pair");
    assert_eq!(decoded.identity().tenant, "\u{1f600}");
}

#[test]
fn addresses_never_show_in_debug_output() {
    let namespace = users("secret-tenant", "secret-user");
    let shown = format!("{namespace:?} {:?}", namespace.address());
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains(&namespace.address().fingerprint()));
}

#[test]
fn identity_schema_documents_the_identity_type() {
    let schema =
        serde_json::to_string(&Namespace::<UserConversations>::identity_schema()).expect("JSON");
    assert!(
        schema.contains("tenant") && schema.contains("user"),
        "{schema}"
    );
}

#[test]
fn stored_writes_refuse_non_canonical_addresses() {
    let canonical = users("acme", "ada");
    let write = |address: &str| {
        json!({
            "kind": "withdraw",
            "key": {"namespace": address, "id": "doc"},
            "operation_id": "op",
            "expected_revision": "r1",
            "reason": "test",
        })
        .to_string()
    };
    serde_json::from_str::<MemoryWrite>(&write(canonical.address().as_str())).expect("canonical");
    let spaced = r#"[1, "user-conversations",1,{"tenant":"acme","user":"ada"}]"#;
    assert!(serde_json::from_str::<MemoryWrite>(&write(spaced)).is_err());
}

/// A valid address with one random edit: an inserted, deleted or replaced character.
fn mutated_address() -> impl Strategy<Value = String> {
    let base = users("acme", "\u{1f600}").address().as_str().to_owned();
    let length = base.chars().count();
    let edit = prop_oneof![
        Just("".to_owned()),
        proptest::sample::select(vec![
            " ",
            "\"",
            "\\",
            "[",
            "]",
            "{",
            "}",
            ",",
            "0",
            "1",
            "-",
            ".",
            "e",
            "\\ud800",
            "\u{1f600}",
        ])
        .prop_map(str::to_owned),
        json_text(2),
    ];
    (0..=length, 0..3_usize, edit).prop_map(move |(position, removed, inserted)| {
        let chars: Vec<char> = base.chars().collect();
        let end = (position + removed).min(chars.len());
        let mut text: String = chars[..position].iter().collect();
        text.push_str(&inserted);
        text.extend(&chars[end..]);
        text
    })
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn make_then_restore_gives_the_same_address(identity in json_value(4, 6)) {
        let made = Namespace::<AnyIdentity>::make(identity.clone()).expect("generated identities are valid");
        let restored = Namespace::<AnyIdentity>::restore(made.address().as_str()).expect("restores");
        prop_assert_eq!(restored.address(), made.address());
        let parsed = NamespaceAddress::parse(made.address().as_str()).expect("parses");
        prop_assert_eq!(&parsed, made.address());
        let decoded = Namespace::<AnyIdentity>::decode(&identity.to_string()).expect("decodes");
        prop_assert_eq!(decoded.address(), made.address());
        let pretty = serde_json::to_string_pretty(&identity).expect("JSON");
        let decoded_pretty = Namespace::<AnyIdentity>::decode(&pretty).expect("decodes");
        prop_assert_eq!(decoded_pretty.address(), made.address());
    }

    #[test]
    fn typed_identities_round_trip(tenant in json_text(24), name in json_text(24)) {
        let made = Namespace::<UserConversations>::make(user(&tenant, &name)).expect("valid");
        let restored = Namespace::<UserConversations>::restore(made.address().as_str()).expect("restores");
        prop_assert_eq!(restored.identity(), &user(&tenant, &name));
        prop_assert_eq!(restored.address(), made.address());
        prop_assert!(utf16_len(made.address().as_str()) <= made.address().as_str().len());
    }

    #[test]
    fn edge_numbers_round_trip_anywhere_in_a_tree(index in 0..EDGE_NUMBERS.len(), wrap in json_value(2, 3)) {
        let identity = json!({"wrapped": wrap, "number": EDGE_NUMBERS[index], "list": [EDGE_NUMBERS[index]]});
        let made = Namespace::<AnyIdentity>::make(identity).expect("valid");
        let restored = Namespace::<AnyIdentity>::restore(made.address().as_str()).expect("restores");
        prop_assert_eq!(restored.address(), made.address());
    }

    #[test]
    fn definitions_never_collide(first in (json_text(6), json_text(6)), second in (json_text(6), json_text(6))) {
        let a = user(&first.0, &first.1);
        let b = user(&second.0, &second.1);
        let addresses = [
            Namespace::<UserConversations>::make(a.clone()).expect("valid").address().clone(),
            Namespace::<UserConversationsV2>::make(a.clone()).expect("valid").address().clone(),
            Namespace::<TeamNotes>::make(a.clone()).expect("valid").address().clone(),
            Namespace::<TeamNotes>::make(b.clone()).expect("valid").address().clone(),
        ];
        prop_assert_ne!(&addresses[0], &addresses[1]);
        prop_assert_ne!(&addresses[0], &addresses[2]);
        prop_assert_ne!(&addresses[1], &addresses[2]);
        prop_assert_ne!(&addresses[0], &addresses[3]);
        prop_assert_eq!(addresses[2] == addresses[3], a == b);
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_text(text in prop_oneof![any::<String>(), mutated_address()]) {
        if let Ok(address) = NamespaceAddress::parse(&text) {
            prop_assert_eq!(address.as_str(), text.as_str());
        }
        if let Ok(namespace) = Namespace::<UserConversations>::restore(&text) {
            prop_assert_eq!(namespace.address().as_str(), text.as_str());
        }
        let _ = Namespace::<UserConversations>::decode(&text);
        let _ = Namespace::<AnyIdentity>::decode(&text);
        let _ = NamespaceAddress::decode_untyped("any-identity", 1, &text);
        let _ = serde_json::from_str::<MemoryWrite>(&text);
        let _ = serde_json::from_str::<NamespaceAddress>(&format!("{text:?}"));
    }

    #[test]
    fn write_parser_never_panics_on_mutated_commands(position in 0..400_usize, inserted in json_text(3)) {
        let valid = json!({
            "kind": "put",
            "key": {"namespace": users("acme", "ada").address().as_str(), "id": "doc-\u{1f600}"},
            "operation_id": "op",
            "expected_revision": null,
            "locator": "here",
            "content": {"text": "t", "attributions": [], "metadata": {}, "recorded_at": 0, "extracted_at": 0},
            "scopes": ["reader"],
        })
        .to_string();
        serde_json::from_str::<MemoryWrite>(&valid).expect("the unmutated command parses");
        let chars: Vec<char> = valid.chars().collect();
        let cut = position.min(chars.len());
        let mut text: String = chars[..cut].iter().collect();
        text.push_str(&inserted);
        text.extend(&chars[cut..]);
        let _ = serde_json::from_str::<MemoryWrite>(&text);
        let truncated: String = chars[..cut].iter().collect();
        let _ = serde_json::from_str::<MemoryWrite>(&truncated);
    }
}

#[test]
fn a_clone_shares_the_address_text_and_serializes_as_the_text() {
    let text = r#"[1,"notes",1,{"user":"u"}]"#;
    let parsed = NamespaceAddress::parse(text).expect("canonical");
    let again = NamespaceAddress::parse(text).expect("canonical");
    assert_eq!(parsed, again);
    assert!(!parsed.shares_text_with(&again), "two parses, two copies");
    assert!(parsed.shares_text_with(&parsed.clone()));
    let json = serde_json::to_string(&parsed).expect("serializes");
    assert_eq!(json, serde_json::to_string(text).expect("serializes"));
    let back: NamespaceAddress = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, parsed);
}
