//! The lexical search suite: stemming, ranking, speakers, scopes, namespaces, replacements,
//! withdrawals, and query text taken as words.

use super::{InspectableStore, access, async_suite, key, ok, put, said, withdraw};
use crate::document::MemoryContent;
use crate::testing::fixtures::{Checked, Failure, ensure};

async_suite! {
    /// Every rule [`run_lexical_suite`] checks, in order.
    LEXICAL_RULES;
    /// Runs every rule of [`LEXICAL_RULES`], each on a fresh store from `factory`.
    run_lexical_suite;
    "search-stems-ranks-and-indexes-speakers" => search_stems_ranks_and_indexes_speakers,
    "search-follows-replacements-scopes-and-withdrawals" => search_follows_replacements,
    "query-text-is-words-never-syntax" => query_text_is_words,
}

/// The three documents of the ranking rules.
async fn seed<S: InspectableStore>(store: &S) -> Checked {
    let docs = [
        (
            "d1",
            "Alice is running the quarterly budget review",
            "alice",
        ),
        (
            "d2",
            "The budget was approved; budget talks are over",
            "carol",
        ),
        ("d3", "Lunch is at noon on Fridays", "Bob"),
    ];
    for (id, text, speaker) in docs {
        ok(
            store
                .apply(put(
                    &key("t1", id)?,
                    &format!("op-{id}"),
                    None,
                    said(text, speaker),
                    &["s"],
                )?)
                .await,
            "put",
        )?;
    }
    Ok(())
}

async fn ids<S: InspectableStore>(store: &S, query: &str) -> Result<Vec<String>, Failure> {
    let hits = ok(
        store.search(&access("t1", "s")?, query, 10).await,
        &format!("search {query:?}"),
    )?;
    Ok(hits.into_iter().map(|hit| hit.key.id.to_string()).collect())
}

async fn search_stems_ranks_and_indexes_speakers<S: InspectableStore>(store: &S) -> Checked {
    seed(store).await?;
    ensure!(
        ids(store, "runs").await? == ["d1"],
        "`runs` finds {:?}, not the running one",
        ids(store, "runs").await?
    );
    ensure!(
        ids(store, "bob").await? == ["d3"],
        "the speaker is not indexed: {:?}",
        ids(store, "bob").await?
    );
    ensure!(
        ids(store, "budget").await? == ["d2", "d1"],
        "more occurrences do not rank higher: {:?}",
        ids(store, "budget").await?
    );
    let hits = ok(
        store.search(&access("t1", "s")?, "budget", 10).await,
        "search",
    )?;
    ensure!(
        hits[0].score.total_cmp(&hits[1].score).is_gt(),
        "the better hit does not score higher"
    );
    ensure!(
        hits[0].locator == "loc:d2",
        "the hit's locator is {:?}",
        hits[0].locator
    );
    let current =
        ok(store.read(&key("t1", "d2")?).await, "read")?.map(|document| document.revision);
    ensure!(
        Some(&hits[0].revision) == current.as_ref(),
        "the hit names another revision than the current one"
    );
    let one = ok(
        store.search(&access("t1", "s")?, "budget", 1).await,
        "search",
    )?;
    ensure!(
        one.len() == 1 && one[0].key == hits[0].key,
        "a limit of one is not the best hit"
    );
    Ok(())
}

async fn search_follows_replacements<S: InspectableStore>(store: &S) -> Checked {
    let doc = key("t1", "doc")?;
    let count = |tenant: &'static str, scope: &'static str, query: &'static str| async move {
        ok(
            store.search(&access(tenant, scope)?, query, 5).await,
            "search",
        )
        .map(|hits| hits.len())
    };
    let created = ok(
        store
            .apply(put(
                &doc,
                "op-1",
                None,
                MemoryContent::text("zebra crossing"),
                &["a", "b"],
            )?)
            .await,
        "put",
    )?;
    ensure!(
        count("t1", "b", "zebra").await? == 1,
        "a scope of the document does not find it"
    );
    ensure!(
        count("t1", "c", "zebra").await? == 0,
        "another scope finds the document"
    );
    ensure!(
        count("t2", "a", "zebra").await? == 0,
        "another namespace finds the document"
    );
    let replaced = ok(
        store
            .apply(put(
                &doc,
                "op-2",
                Some(&created.receipt.document.revision),
                MemoryContent::text("giraffe"),
                &["a"],
            )?)
            .await,
        "replace",
    )?;
    ensure!(
        count("t1", "a", "zebra").await? == 0,
        "the replaced text is still found"
    );
    ensure!(
        count("t1", "b", "giraffe").await? == 0,
        "a scope the replacement dropped still finds it"
    );
    let hits = ok(
        store.search(&access("t1", "a")?, "giraffe", 5).await,
        "search",
    )?;
    ensure!(
        hits.len() == 1,
        "the replacement is found {} times",
        hits.len()
    );
    ensure!(
        hits[0].revision == replaced.receipt.document.revision,
        "the hit names the old revision"
    );
    ok(
        store
            .apply(withdraw(&doc, "op-3", &replaced.receipt.document.revision)?)
            .await,
        "withdraw",
    )?;
    ensure!(
        count("t1", "a", "giraffe").await? == 0,
        "a withdrawn document is found"
    );
    ok(store.check_consistency().await, "consistency")?;
    Ok(())
}

async fn query_text_is_words<S: InspectableStore>(store: &S) -> Checked {
    seed(store).await?;
    for query in [
        "",
        "  \"*^():  ",
        "NEAR(",
        "(((",
        "\"",
        "text:",
        "{text speakers}:",
    ] {
        ensure!(
            ids(store, query).await?.is_empty(),
            "{query:?} finds documents"
        );
    }
    let operators = ids(store, "!budget & (noon | x) <-> 'lunch':*").await?;
    let mut found = operators.clone();
    found.sort();
    ensure!(
        found == ["d1", "d2", "d3"],
        "operators are not taken as words OR-ed: {operators:?}"
    );
    ensure!(
        ids(store, "budget AND NOT review").await?.len() == 2,
        "AND NOT is taken as syntax"
    );
    ensure!(
        ids(store, "budget OR lunch").await?.len() == 3,
        "OR is not a plain word"
    );
    Ok(())
}
