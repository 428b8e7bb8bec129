use serde_json::json;

use super::*;

fn ana_file() -> String {
    format!(
        r#"
[[grant]]
name = "ana"
token_sha256 = "{}"
operations = ["recall", "get", "list", "remember"]
read_scopes = ["ana", "team"]
write_scopes = ["ana"]
default_namespace = {{ name = "notes", version = 1, identity = {{ user = "ana", app = "x" }} }}
default_scope = "ana"

[[grant.namespaces]]
name = "notes"
version = 1
fields = {{ user = "ana" }}

[[grant]]
name = "ops"
token_sha256 = "{}"
operations = ["*"]
read_scopes = ["*"]
write_scopes = ["*"]

[[grant.namespaces]]
name = "*"
"#,
        token_digest("ana-token"),
        token_digest("ops-token").to_uppercase(),
    )
}

fn address(name: &str, version: u64, identity: Value) -> NamespaceAddress {
    DynamicNamespace {
        name: name.to_owned(),
        version,
        identity,
    }
    .address()
    .expect("address")
}

fn grants_of(text: &str) -> Grants {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("grants.toml");
    std::fs::write(&path, text).expect("write");
    Grants::new(Some(path), None, everything()).expect("valid grants")
}

#[test]
fn a_token_holds_its_grant_and_an_unknown_one_nothing() {
    let grants = grants_of(&ana_file());
    let ana = grants.caller(Some("ana-token")).expect("ana's grant");
    assert_eq!(ana.name(), "ana");
    assert!(!ana.is_unrestricted());
    let ops = grants.caller(Some("ops-token")).expect("ops' grant");
    assert!(ops.is_unrestricted(), "* everywhere is everything");
    assert!(grants.caller(Some("ana-token ")).is_none());
    assert!(grants.caller(Some("")).is_none());
    assert!(grants.caller(None).is_none());
    assert!(grants.requires_token());
    assert_eq!(grants.count(), 2);
}

#[test]
fn namespaces_match_by_fixed_fields_exact_identities_and_versions() {
    let grants = grants_of(&ana_file());
    let ana = grants.caller(Some("ana-token")).expect("grant");
    assert!(ana.admits_namespace(&address("notes", 1, json!({"user": "ana"}))));
    assert!(ana.admits_namespace(&address("notes", 1, json!({"user": "ana", "app": "y"}))));
    assert!(!ana.admits_namespace(&address("notes", 1, json!({"user": "bob"}))));
    assert!(!ana.admits_namespace(&address("notes", 2, json!({"user": "ana"}))));
    assert!(!ana.admits_namespace(&address("other", 1, json!({"user": "ana"}))));
    assert!(!ana.admits_namespace(&address("notes", 1, json!("ana"))));
    let exact = NamespaceRule {
        name: Some("notes".to_owned()),
        version: None,
        identity: IdentityRule::Exact(json!({"user": "ana"})),
    };
    assert!(exact.admits("notes", 7, &json!({"user": "ana"})));
    assert!(!exact.admits("notes", 7, &json!({"user": "ana", "app": "x"})));
}

#[test]
fn operations_and_scopes_are_checked_with_the_forbidden_kind() {
    let grants = grants_of(&ana_file());
    let ana = grants.caller(Some("ana-token")).expect("grant");
    assert!(ana.allow_operation(GrantedOperation::Recall).is_ok());
    for operation in [
        GrantedOperation::Put,
        GrantedOperation::Withdraw,
        GrantedOperation::Forget,
        GrantedOperation::ThreadAppend,
        GrantedOperation::ThreadForget,
    ] {
        let refusal = ana.allow_operation(operation).expect_err("not granted");
        assert_eq!(refusal.kind(), ErrorKind::Forbidden);
    }
    let scope = |name: &str| MemoryScope::new(name).expect("scope");
    assert!(ana.allow_read_scope(&scope("team")).is_ok());
    assert!(ana.allow_read_scope(&scope("bob")).is_err());
    assert!(ana.allow_write_scopes(&[scope("ana")]).is_ok());
    assert!(
        ana.allow_write_scopes(&[scope("ana"), scope("team")])
            .is_err()
    );
    let defaults = ana.defaults().expect("the grant's defaults");
    assert_eq!(defaults.scope().as_str(), "ana");
}

#[test]
fn the_json_form_reads_like_the_toml_one() {
    let json = json!({"grant": [{
        "name": "bob",
        "token_sha256": token_digest("bob-token"),
        "operations": ["recall"],
        "read_scopes": ["bob"],
        "namespaces": [{"name": "notes", "identity": {"user": "bob"}}]
    }]})
    .to_string();
    let table = parse(&json, true).expect("valid JSON grants");
    assert_eq!(table.len(), 1);
    assert!(parse(&json, false).is_err(), "JSON is not TOML");
}

#[test]
fn every_fault_refuses_the_whole_file() {
    let good = ana_file();
    let faults = [
        ("", "no [[grant]]"),
        (
            &good.replacen(&token_digest("ana-token"), "abc", 1),
            "64 hex digits",
        ),
        (
            &good.replacen("\"ops\"", "\"ana\"", 1),
            "name is given twice",
        ),
        (
            &good.replacen(
                &token_digest("ops-token").to_uppercase(),
                &token_digest("ana-token"),
                1,
            ),
            "token_sha256 is given twice",
        ),
        (
            &good.replacen("\"remember\"", "\"rememberr\"", 1),
            "unknown operation",
        ),
        (
            &good.replacen("operations = [\"*\"]", "operations = []", 1),
            "operations is empty",
        ),
        (
            &good.replacen("name = \"ana\"", "name = \"a n\"", 1),
            "name must be",
        ),
        (
            &good.replacen(
                "fields = { user = \"ana\" }",
                "fields = { user = \"ana\" }\nidentity = {}",
                1,
            ),
            "not both",
        ),
        (
            &good.replacen("default_scope = \"ana\"", "default_scope = \"bob\"", 1),
            "default_scope",
        ),
        (
            &good.replacen("default_scope = \"ana\"\n", "", 1),
            "both default_namespace",
        ),
        (
            &good.replacen("user = \"ana\", app", "user = \"bob\", app", 1),
            "default_namespace is not",
        ),
        (
            &good.replacen("version = 1\n", "version = 1\ncolour = 2\n", 1),
            "unknown field",
        ),
        (
            &good.replacen("[[grant.namespaces]]\nname = \"*\"\n", "", 1),
            "no [[grant.namespaces]]",
        ),
        (
            &good.replacen("read_scopes = [\"*\"]", "read_scopes = [\"\"]", 1),
            "read_scopes",
        ),
        ("[[grant]\n", ""),
    ];
    for (text, expected) in faults {
        let error = parse(text, false).expect_err(expected);
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
        assert!(!error.contains("ana-token"), "no token in {error}");
    }
}

#[test]
fn a_faulty_reload_keeps_the_grants_in_force() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("grants.toml");
    std::fs::write(&path, ana_file()).expect("write");
    let grants = Grants::new(Some(path.clone()), None, everything()).expect("valid");
    std::fs::write(&path, "[[grant]]\nname = 1\n").expect("write");
    assert!(grants.reload().is_err());
    assert!(
        grants.caller(Some("ana-token")).is_some(),
        "old grants kept"
    );
    let revoked = ana_file().replacen(&token_digest("ana-token"), &token_digest("new-token"), 1);
    std::fs::write(&path, revoked).expect("write");
    assert_eq!(grants.reload().expect("reloaded"), 2);
    assert!(grants.caller(Some("ana-token")).is_none(), "revoked");
    assert!(grants.caller(Some("new-token")).is_some());
}

fn everything() -> Arc<Grant> {
    Arc::new(Grant::server(None, None))
}

#[test]
fn a_token_file_and_a_tokenless_caller_hold_the_servers_grant() {
    let rule = NamespaceRule::exactly(&address("notes", 1, json!({"user": "ana"})));
    let server = Arc::new(Grant::server(Some(rule.into_iter().collect()), None));
    let grants = Grants::new(None, Some("secret".to_owned()), Arc::clone(&server)).expect("grants");
    let held = grants.caller(Some("secret")).expect("grant");
    assert!(Arc::ptr_eq(&held, &server));
    assert!(held.admits_namespace(&address("notes", 1, json!({"user": "ana"}))));
    assert!(!held.admits_namespace(&address("notes", 1, json!({"user": "bob"}))));
    assert!(held.reads_metrics(), "the host's grant reads /metrics");
    assert!(grants.caller(Some("secreT")).is_none());
    assert!(grants.caller(None).is_none());
    let open = Grants::new(None, None, everything()).expect("grants");
    assert!(!open.requires_token());
    assert!(open.caller(None).expect("grant").is_unrestricted());
    assert!(!Grant::nothing().is_unrestricted());
    assert!(!Grant::nothing().reads_metrics());
    assert!(
        Grant::nothing()
            .allow_operation(GrantedOperation::Recall)
            .is_err()
    );
}

#[test]
fn a_file_grant_is_found_by_name_and_a_rule_parses_as_the_file_writes_it() {
    let grants = grants_of(&ana_file());
    assert_eq!(grants.named("ana").expect("ana").name(), "ana");
    assert!(grants.named("nobody").is_none());
    let rule = parse_rule(r#"{"name": "notes", "version": 1, "fields": {"user": "ana"}}"#)
        .expect("valid")
        .expect("a rule");
    assert!(rule.admits("notes", 1, &json!({"user": "ana", "app": "x"})));
    assert!(!rule.admits("notes", 1, &json!({"user": "bob"})));
    assert_eq!(parse_rule(r#"{"name": "*"}"#), Ok(None));
    for bad in [
        "notes",
        r#"{"name": "notes", "extra": 1}"#,
        r#"{"name": "notes", "identity": {}, "fields": {}}"#,
        r#"{"name": "*", "version": 1}"#,
    ] {
        assert!(parse_rule(bad).is_err(), "{bad}");
    }
}
