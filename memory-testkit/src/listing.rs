//! The listing suite: what every [`MemoryLister`] keeps (see [`memory_core::listing`]).
//!
//! ```no_run
//! # async fn example() {
//! use memory_core::InMemoryStore;
//! memory_testkit::listing::run_listing_suite(|| async { InMemoryStore::new() })
//!     .await
//!     .assert_all_passed();
//! # }
//! ```

use std::collections::HashSet;
use std::future::Future;

use super::fixtures::{Checked, Failure, ensure};
use super::report::ContractReport;
use super::store::{key, namespace, ok, put, withdraw};
use memory_core::document::{MemoryContent, MemoryKey};
use memory_core::error::ErrorKind;
use memory_core::listing::{ListCursor, MAX_LIST_LIMIT, MemoryLister};
use memory_core::ports::MemoryWriter;

/// Every rule [`run_listing_suite`] checks, in order.
pub const LISTING_RULES: &[&str] = &[
    "listing-pages-through-every-document-once-newest-first",
    "listing-shows-current-revisions-and-never-withdrawn-ones",
    "listing-stays-in-its-namespace",
    "listing-refuses-limits-out-of-range",
];

/// Runs every rule of [`LISTING_RULES`], each on a fresh store from `factory`.
pub async fn run_listing_suite<S, F, Fut>(mut factory: F) -> ContractReport
where
    S: MemoryLister + MemoryWriter,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    let store = factory().await;
    report.record(
        LISTING_RULES[0],
        failure_text(pages_once_newest_first(&store).await),
    );
    let store = factory().await;
    report.record(
        LISTING_RULES[1],
        failure_text(current_and_never_withdrawn(&store).await),
    );
    let store = factory().await;
    report.record(
        LISTING_RULES[2],
        failure_text(stays_in_namespace(&store).await),
    );
    let store = factory().await;
    report.record(LISTING_RULES[3], failure_text(refuses_limits(&store).await));
    report
}

fn failure_text(checked: Checked) -> Result<(), String> {
    checked.map_err(|failure| failure.0)
}

async fn create<S: MemoryWriter>(store: &S, tenant: &str, id: &str) -> Result<MemoryKey, Failure> {
    let key = key(tenant, id)?;
    ok(
        store
            .apply(put(
                &key,
                &format!("op-{id}"),
                None,
                MemoryContent::text(id),
                &["s"],
            )?)
            .await,
        "put",
    )?;
    Ok(key)
}

/// Every page's ids, walking from the start with pages of `limit`.
async fn walk<S: MemoryLister>(
    store: &S,
    tenant: &str,
    limit: usize,
) -> Result<Vec<String>, Failure> {
    let namespace = namespace(tenant)?;
    let mut ids = Vec::new();
    let mut cursor: Option<ListCursor> = None;
    // Bounded: each page must advance, and a store that loops is reported, not waited for.
    for _ in 0..1000 {
        let page = ok(store.list(&namespace, cursor, limit).await, "list")?;
        ensure!(
            page.documents.len() <= limit,
            "a page of limit {limit} held {}",
            page.documents.len()
        );
        ids.extend(
            page.documents
                .iter()
                .map(|document| document.key.id.as_str().to_owned()),
        );
        match page.next {
            Some(next) => {
                ensure!(
                    Some(next) != cursor,
                    "a page ended at the cursor it started from"
                );
                ensure!(
                    !page.documents.is_empty(),
                    "an empty page had a next cursor"
                );
                cursor = Some(next);
            }
            None => return Ok(ids),
        }
    }
    Err(Failure("the walk did not end after 1000 pages".to_owned()))
}

async fn pages_once_newest_first<S: MemoryLister + MemoryWriter>(store: &S) -> Checked {
    ensure!(
        walk(store, "t1", 5).await?.is_empty(),
        "an empty namespace listed documents"
    );
    let mut written = Vec::new();
    for index in 0..23 {
        let id = format!("d{index:02}");
        create(store, "t1", &id).await?;
        written.push(id);
    }
    written.reverse();
    for limit in [1, 7, 23, 50] {
        let listed = walk(store, "t1", limit).await?;
        let distinct: HashSet<&String> = listed.iter().collect();
        ensure!(
            distinct.len() == listed.len(),
            "pages of {limit} listed a document twice"
        );
        ensure!(
            listed == written,
            "pages of {limit} listed {} documents, not the 23 written newest first",
            listed.len()
        );
    }
    // A page that ends exactly at the oldest document says nothing follows.
    let page = ok(store.list(&namespace("t1")?, None, 23).await, "list all")?;
    ensure!(page.next.is_none(), "the full last page had a next cursor");
    Ok(())
}

async fn current_and_never_withdrawn<S: MemoryLister + MemoryWriter>(store: &S) -> Checked {
    let a = key("t1", "a")?;
    let first = ok(
        store
            .apply(put(&a, "op-a", None, MemoryContent::text("a1"), &["s"])?)
            .await,
        "put a",
    )?;
    let b = create(store, "t1", "b").await?;
    let b_revision = {
        let page = ok(store.list(&namespace("t1")?, None, 10).await, "list")?;
        page.documents
            .iter()
            .find(|document| document.key == b)
            .map(|document| document.revision.clone())
            .ok_or_else(|| Failure("b is not listed".to_owned()))?
    };
    create(store, "t1", "c").await?;
    let replaced = ok(
        store
            .apply(put(
                &a,
                "op-a2",
                Some(&first.receipt.document.revision),
                MemoryContent::text("a2"),
                &["s"],
            )?)
            .await,
        "replace a",
    )?;
    ok(
        store.apply(withdraw(&b, "op-wb", &b_revision)?).await,
        "withdraw b",
    )?;
    let page = ok(store.list(&namespace("t1")?, None, 10).await, "list")?;
    let ids: Vec<String> = page
        .documents
        .iter()
        .map(|document| document.key.id.as_str().to_owned())
        .collect();
    ensure!(
        ids == ["a", "c"],
        "after replacing a and withdrawing b the listing is {ids:?}, not [a, c]"
    );
    ensure!(
        page.documents[0].revision == replaced.receipt.document.revision
            && page.documents[0].content.text == "a2",
        "the replaced document is listed with an old revision"
    );
    Ok(())
}

async fn stays_in_namespace<S: MemoryLister + MemoryWriter>(store: &S) -> Checked {
    create(store, "t1", "mine").await?;
    create(store, "t2", "theirs").await?;
    create(store, "t1", "mine-too").await?;
    let listed = walk(store, "t1", 1).await?;
    ensure!(
        listed == ["mine-too", "mine"],
        "t1 lists {listed:?}, not its own two documents"
    );
    ensure!(
        walk(store, "t2", 10).await? == ["theirs"],
        "t2 does not list exactly its own document"
    );
    ensure!(
        walk(store, "t3", 10).await?.is_empty(),
        "an unused namespace lists documents"
    );
    Ok(())
}

async fn refuses_limits<S: MemoryLister + MemoryWriter>(store: &S) -> Checked {
    create(store, "t1", "a").await?;
    let namespace = namespace("t1")?;
    for (limit, kind) in [
        (0, ErrorKind::InvalidInput),
        (MAX_LIST_LIMIT + 1, ErrorKind::TooLarge),
    ] {
        match store.list(&namespace, None, limit).await {
            Err(error) if error.kind() == kind => {}
            Err(error) => {
                return Err(Failure(format!(
                    "limit {limit} was refused as {}, not {}",
                    error.kind().as_str(),
                    kind.as_str()
                )));
            }
            Ok(_) => return Err(Failure(format!("limit {limit} was accepted"))),
        }
    }
    let page = ok(
        store.list(&namespace, None, MAX_LIST_LIMIT).await,
        "the largest limit",
    )?;
    ensure!(
        page.documents.len() == 1,
        "the largest limit lost the document"
    );
    Ok(())
}
