//! Hybrid recall's `rerank` option means the same through every door that takes recall arguments:
//! the `memory recall` command, MCP over stdio and over HTTP (the Python package's test is in
//! `python/tests/test_rerank.py`). On or off, hybrid recall answers from the same revalidated
//! passages; `true` with another mode is refused before any work, `false` is accepted.

use integration_tests::product::{Fixture, McpClient, cited_documents, put, recall};
use integration_tests::serving::{HttpServer, default_flags, scoped_grant};
use serde_json::{Value, json};

const TOKEN: &str = "rerank-door-token";

fn with_rerank(mode: &str, rerank: bool) -> Value {
    let mut arguments = recall("what does Ada grow in her garden", mode, 10);
    arguments["rerank"] = json!(rerank);
    arguments
}

fn written() -> Fixture {
    let fixture = Fixture::new();
    for (id, text) in [
        ("bees", "Ada keeps bees in the garden behind the house."),
        (
            "pears",
            "The orchard has twelve old pear trees that Ada planted.",
        ),
        ("clocks", "Her brother repairs clocks in town."),
    ] {
        fixture.call("put", &put(id, text)).success();
    }
    fixture.call("sync", &json!({})).success();
    fixture
}

#[test]
fn the_command_takes_rerank_for_hybrid_and_refuses_it_elsewhere() {
    let fixture = written();
    let on = fixture.call("recall", &with_rerank("hybrid", true));
    let off = fixture.call("recall", &with_rerank("hybrid", false));
    assert!(!cited_documents(on.success()).is_empty());
    assert_eq!(
        cited_documents(on.success()),
        cited_documents(off.success())
    );
    let message = fixture
        .call("recall", &with_rerank("lexical", true))
        .refused("invalid-input")
        .to_owned();
    assert!(message.contains("rerank"), "{message}");
    fixture
        .call("recall", &with_rerank("lexical", false))
        .success();
}

async fn through(client: McpClient) {
    let on = client
        .success("memory_recall", with_rerank("hybrid", true))
        .await;
    let off = client
        .success("memory_recall", with_rerank("hybrid", false))
        .await;
    assert!(!cited_documents(&on).is_empty());
    assert_eq!(cited_documents(&on), cited_documents(&off));
    let message = client
        .refused("memory_recall", with_rerank("exact", true), "invalid-input")
        .await;
    assert!(message.contains("rerank"), "{message}");
    client
        .success("memory_recall", with_rerank("exact", false))
        .await;
    client.close().await;
}

#[tokio::test]
async fn mcp_over_stdio_and_http_take_rerank_as_the_command_does() {
    let fixture = written();
    // A stdio server reads the namespace it is started for.
    through(McpClient::stdio(&fixture, &default_flags(), &[]).await).await;
    // One grant holding the namespace and scope the documents were written to.
    let server = HttpServer::with_grants(&fixture, &scoped_grant("u1", TOKEN, "assistant"));
    let client = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("an HTTP session");
    through(client).await;
}
