//! The lexical search suite: stemming, ranking, speakers, scopes, namespaces, replacements,
//! withdrawals, query text taken as words (stop words dropped), and namespaces searched as if each were alone.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use super::{InspectableStore, access, async_suite, key, namespace, ok, put, said, withdraw};
use crate::fixtures::{Checked, Failure, ensure};
use crate::proptest_config;
use memory_core::document::MemoryContent;
use memory_core::ids::{DocumentId, Revision};
use memory_core::ports::{LexicalHit, WrittenNeighbours};
use memory_core::write::MemoryWrite;

async_suite! {
    /// Every rule [`run_lexical_suite`] checks, in order.
    LEXICAL_RULES;
    /// Runs every rule of [`LEXICAL_RULES`], each on a fresh store from `factory`.
    run_lexical_suite;
    "search-stems-ranks-and-indexes-speakers" => search_stems_ranks_and_indexes_speakers,
    "search-follows-replacements-scopes-and-withdrawals" => search_follows_replacements,
    "query-text-is-words-never-syntax" => query_text_is_words,
    "stop-words-find-nothing-alone-and-change-no-hits" => stop_words_change_nothing,
    "each-namespace-searches-alone-at-any-size" => each_namespace_searches_alone,
    "neighbours-follow-first-writes-within-namespace-and-scope" => neighbours_follow_first_writes,
    "corrections-of-name-current-visible-correctors-newest-first" => corrections_of_name_correctors,
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

/// The query rule of [`memory_core::query`] (one parser for every backend): stop words are dropped, so a
/// query of stop words alone finds nothing, even where documents hold them, and beside content words
/// they change neither the hits nor their order.
async fn stop_words_change_nothing<S: InspectableStore>(store: &S) -> Checked {
    seed(store).await?;
    for query in ["is at on the", "Who is she?", "What didn't they do"] {
        let found = ids(store, query).await?;
        ensure!(found.is_empty(), "{query:?} finds {found:?}");
    }
    let plain = ids(store, "budget").await?;
    for query in ["what is the budget", "The BUDGET, is it?"] {
        let found = ids(store, query).await?;
        ensure!(found == plain, "{query:?} finds {found:?}, not {plain:?}");
    }
    Ok(())
}

/// Words of the random layouts; no two share a stem in any engine's stemmer.
const LAYOUT_WORDS: [&str; 5] = ["apple", "river", "stone", "cloud", "tiger"];
/// Queries of the layouts: each word, and two `OR`s.
const LAYOUT_QUERIES: [&str; 7] = [
    "apple",
    "river",
    "stone",
    "cloud",
    "tiger",
    "apple river",
    "stone tiger cloud",
];
/// Namespaces of a layout besides the searched one and its twin.
const OTHER_NAMESPACES: usize = 3;
/// Layouts sampled per run unless `PROPTEST_CASES` asks for more: each writes a few dozen documents
/// into one store, which costs round trips on a server.
const LAYOUT_CASES: u32 = 12;
/// More hits than a layout's namespace holds documents, so every match is returned.
const LAYOUT_LIMIT: usize = 64;

/// One document of a layout: its words (indexes into [`LAYOUT_WORDS`]) and whether scope `t` sees it
/// (scope `s` sees every document).
#[derive(Debug, Clone)]
struct Placed {
    words: Vec<usize>,
    in_t: bool,
}

/// A random layout: the searched namespace's documents, and other namespaces' documents (each with its
/// namespace, `1..=OTHER_NAMESPACES`), in writing order.
#[derive(Debug, Clone)]
struct Layout {
    searched: Vec<Placed>,
    others: Vec<(usize, Placed)>,
}

fn placed() -> impl Strategy<Value = Placed> {
    (
        proptest::collection::vec(0..LAYOUT_WORDS.len(), 1..7),
        any::<bool>(),
    )
        .prop_map(|(words, in_t)| Placed { words, in_t })
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        proptest::collection::vec(placed(), 0..10),
        proptest::collection::vec((1..=OTHER_NAMESPACES, placed()), 0..30),
    )
        .prop_map(|(searched, others)| Layout { searched, others })
}

/// A namespace's answers to [`LAYOUT_QUERIES`] in scope `s`: ids and scores, best first.
type Answers = Vec<Vec<(String, f64)>>;

/// Random layouts of documents across namespaces, each at a size of its own (no document to a few
/// dozen, in one store that keeps every earlier layout's documents too). For every layout:
/// - every namespace answers only its own documents, exactly those holding a query word that the
///   scope may see, best first;
/// - the searched namespace ranks and scores the same before any other namespace of the layout holds
///   a matching document, after they were written, and after they were replaced by documents holding
///   every word; and a twin namespace holding the same documents, written in between the others',
///   answers the same. A score that moved would tell one tenant about another's documents.
///
/// Layouts are drawn from proptest strategies with the project's seed but not shrunk (a runner cannot
/// block on the store's futures inside an async rule), so a failure names the whole layout.
async fn each_namespace_searches_alone<S: InspectableStore>(store: &S) -> Checked {
    let mut config = proptest_config();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = config.cases.min(LAYOUT_CASES);
    }
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let strategy = layout();
    for case in 0..cases {
        let layout = strategy
            .new_tree(&mut runner)
            .map_err(|reason| Failure(format!("cannot draw a layout: {reason}")))?
            .current();
        check_layout(store, case, &layout)
            .await
            .map_err(|Failure(message)| Failure(format!("layout {case} {layout:?}: {message}")))?;
    }
    Ok(())
}

fn layout_text(placed: &Placed) -> MemoryContent {
    let words: Vec<&str> = placed
        .words
        .iter()
        .map(|word| LAYOUT_WORDS[*word])
        .collect();
    MemoryContent::text(words.join(" "))
}

fn scopes_of(placed: &Placed) -> &'static [&'static str] {
    if placed.in_t { &["s", "t"] } else { &["s"] }
}

/// Applies `writes` in batches, returning each write's new revision.
async fn write_all<S: InspectableStore>(
    store: &S,
    writes: Vec<MemoryWrite>,
) -> Result<Vec<Revision>, Failure> {
    let mut revisions = Vec::with_capacity(writes.len());
    let mut writes = writes.into_iter().peekable();
    while writes.peek().is_some() {
        let batch: Vec<MemoryWrite> = writes.by_ref().take(store.max_batch_writes()).collect();
        for outcome in ok(store.apply_batch(batch).await, "batch")? {
            revisions.push(ok(outcome, "write")?.receipt.document.revision);
        }
    }
    Ok(revisions)
}

async fn answers<S: InspectableStore>(store: &S, tenant: &str) -> Result<Answers, Failure> {
    let mut all = Vec::with_capacity(LAYOUT_QUERIES.len());
    for query in LAYOUT_QUERIES {
        let hits = ok(
            store
                .search(&access(tenant, "s")?, query, LAYOUT_LIMIT)
                .await,
            &format!("search {query:?} in {tenant}"),
        )?;
        all.push(
            hits.into_iter()
                .map(|hit| (hit.key.id.to_string(), hit.score))
                .collect(),
        );
    }
    Ok(all)
}

fn same_answers(left: &Answers, right: &Answers) -> bool {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0);
    left.len() == right.len()
        && left.iter().zip(right).all(|(left, right)| {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|(left, right)| left.0 == right.0 && close(left.1, right.1))
        })
}

async fn check_layout<S: InspectableStore>(store: &S, case: u32, layout: &Layout) -> Checked {
    let searched = format!("layout-{case}-searched");
    let twin = format!("layout-{case}-twin");
    let other = |index: usize| format!("layout-{case}-other-{index}");
    // What each namespace holds, for the expected answers: id to document.
    let mut held: BTreeMap<String, BTreeMap<String, Placed>> = BTreeMap::new();

    let mut first = Vec::new();
    for (index, placed) in layout.searched.iter().enumerate() {
        let id = format!("d{index}");
        first.push(put(
            &key(&searched, &id)?,
            &format!("op-{id}"),
            None,
            layout_text(placed),
            scopes_of(placed),
        )?);
        held.entry(searched.clone())
            .or_default()
            .insert(id, placed.clone());
    }
    write_all(store, first).await?;
    let alone = answers(store, &searched).await?;

    // The others' documents, with the twin's written in between them at even intervals.
    let twin_write = |index: usize, placed: &Placed| {
        let id = format!("d{index}");
        put(
            &key(&twin, &id)?,
            &format!("op-{id}"),
            None,
            layout_text(placed),
            scopes_of(placed),
        )
    };
    let mut second = Vec::new();
    let mut replaced: Vec<(String, String, usize)> = Vec::new();
    let mut twins = layout.searched.iter().enumerate();
    let spacing = (layout.others.len() / layout.searched.len().max(1)).max(1);
    for (position, (namespace_index, placed)) in layout.others.iter().enumerate() {
        if position % spacing == 0
            && let Some((index, twin_placed)) = twins.next()
        {
            second.push(twin_write(index, twin_placed)?);
        }
        let tenant = other(*namespace_index);
        let id = format!("o{position}");
        second.push(put(
            &key(&tenant, &id)?,
            &format!("op-{id}"),
            None,
            layout_text(placed),
            scopes_of(placed),
        )?);
        replaced.push((tenant.clone(), id.clone(), second.len() - 1));
        held.entry(tenant).or_default().insert(id, placed.clone());
    }
    for (index, twin_placed) in twins {
        second.push(twin_write(index, twin_placed)?);
    }
    if let Some(documents) = held.get(&searched).cloned() {
        held.insert(twin.clone(), documents);
    }
    let revisions = write_all(store, second).await?;
    let beside = answers(store, &searched).await?;
    ensure!(
        same_answers(&alone, &beside),
        "other namespaces' documents changed the searched namespace's answers: alone {alone:?}, \
         beside them {beside:?}"
    );
    let twin_answers = answers(store, &twin).await?;
    ensure!(
        same_answers(&alone, &twin_answers),
        "the same documents written among other namespaces' answer otherwise: alone {alone:?}, \
         interleaved {twin_answers:?}"
    );

    // Every other document now holds every word: the others' statistics change once more.
    let every_word = Placed {
        words: (0..LAYOUT_WORDS.len()).collect(),
        in_t: true,
    };
    let mut third = Vec::new();
    for (tenant, id, written) in &replaced {
        third.push(put(
            &key(tenant, id)?,
            &format!("op-{id}-again"),
            revisions.get(*written),
            layout_text(&every_word),
            scopes_of(&every_word),
        )?);
        held.entry(tenant.clone())
            .or_default()
            .insert(id.clone(), every_word.clone());
    }
    write_all(store, third).await?;
    let after = answers(store, &searched).await?;
    ensure!(
        same_answers(&alone, &after),
        "replacing other namespaces' documents changed the searched namespace's answers: alone \
         {alone:?}, after {after:?}"
    );

    for (tenant, documents) in &held {
        for scope in ["s", "t"] {
            for query in LAYOUT_QUERIES {
                let hits = ok(
                    store
                        .search(&access(tenant, scope)?, query, LAYOUT_LIMIT)
                        .await,
                    &format!("search {query:?} in {tenant}/{scope}"),
                )?;
                check_hits(tenant, scope, query, documents, &hits)?;
            }
        }
    }
    Ok(())
}

/// The hits of `query` in `tenant`'s `scope` are exactly its visible documents holding a query word,
/// best first.
fn check_hits(
    tenant: &str,
    scope: &str,
    query: &str,
    documents: &BTreeMap<String, Placed>,
    hits: &[LexicalHit],
) -> Checked {
    let wanted_namespace = namespace(tenant)?;
    for hit in hits {
        ensure!(
            hit.key.namespace == wanted_namespace,
            "{query:?} in {tenant} returned {:?} of another namespace",
            hit.key
        );
    }
    let mut found: Vec<String> = hits.iter().map(|hit| hit.key.id.to_string()).collect();
    found.sort();
    let words: Vec<&str> = query.split(' ').collect();
    let wanted: Vec<String> = documents
        .iter()
        .filter(|(_, placed)| scope == "s" || placed.in_t)
        .filter(|(_, placed)| {
            placed
                .words
                .iter()
                .any(|word| words.contains(&LAYOUT_WORDS[*word]))
        })
        .map(|(id, _)| id.clone())
        .collect();
    ensure!(
        found == wanted,
        "{query:?} in {tenant}/{scope} found {found:?}, not {wanted:?}"
    );
    ensure!(
        hits.windows(2)
            .all(|pair| pair[0].score.total_cmp(&pair[1].score).is_ge()),
        "{query:?} in {tenant}/{scope} is not best first"
    );
    Ok(())
}

/// Each id's (before, after) as `written_neighbours` answers them for `(t1, scope)` and `reach`.
async fn neighbours<S: InspectableStore>(
    store: &S,
    scope: &str,
    ids: &[&str],
    reach: usize,
) -> Result<Vec<(Vec<String>, Vec<String>)>, Failure> {
    let ids = ids
        .iter()
        .map(|id| DocumentId::new(*id))
        .collect::<Result<Vec<_>, _>>()?;
    let answers = ok(
        store
            .written_neighbours(&access("t1", scope)?, &ids, reach)
            .await,
        "written neighbours",
    )?;
    ensure!(
        answers.len() == ids.len(),
        "{} answers for {} ids",
        answers.len(),
        ids.len()
    );
    let names = |ids: Vec<DocumentId>| ids.into_iter().map(|id| id.as_str().to_owned()).collect();
    Ok(answers
        .into_iter()
        .map(|WrittenNeighbours { before, after }| (names(before), names(after)))
        .collect())
}

fn sides(before: &[&str], after: &[&str]) -> (Vec<String>, Vec<String>) {
    let owned = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect();
    (owned(before), owned(after))
}

async fn neighbours_follow_first_writes<S: InspectableStore>(store: &S) -> Checked {
    // First writes, in order: a, b, c (scope s2 only), d, x (another namespace), e, f.
    let mut revisions = BTreeMap::new();
    for (tenant, id, scopes) in [
        ("t1", "a", &["s"][..]),
        ("t1", "b", &["s"][..]),
        ("t1", "c", &["s2"][..]),
        ("t1", "d", &["s", "s2"][..]),
        ("t2", "x", &["s"][..]),
        ("t1", "e", &["s"][..]),
        ("t1", "f", &["s"][..]),
    ] {
        let receipt = ok(
            store
                .apply(put(
                    &key(tenant, id)?,
                    &format!("op-{id}"),
                    None,
                    MemoryContent::text(format!("turn {id}")),
                    scopes,
                )?)
                .await,
            "put",
        )?;
        revisions.insert(id, receipt.receipt.document.revision);
    }
    let all = ["a", "b", "d", "e", "f", "c", "missing"];
    let expected = [
        sides(&[], &["b"]),
        sides(&["a"], &["d"]),
        sides(&["b"], &["e"]),
        sides(&["d"], &["f"]),
        sides(&["e"], &[]),
        sides(&[], &[]),
        sides(&[], &[]),
    ];
    let found = neighbours(store, "s", &all, 1).await?;
    ensure!(
        found == expected,
        "written neighbours in scope s: {found:?}, expected {expected:?} (first-write order, other \
         scopes, namespaces and unknown ids skipped)"
    );
    let two = neighbours(store, "s", &["a", "d", "f"], 2).await?;
    let expected_two = [
        sides(&[], &["b", "d"]),
        sides(&["b", "a"], &["e", "f"]),
        sides(&["e", "d"], &[]),
    ];
    ensure!(
        two == expected_two,
        "two on each side, nearest first: {two:?}, expected {expected_two:?}"
    );
    let none = neighbours(store, "s", &["b"], 0).await?;
    ensure!(
        none == [sides(&[], &[])],
        "a reach of 0 names neighbours: {none:?}"
    );
    let in_s2 = neighbours(store, "s2", &["c", "d", "a"], 1).await?;
    ensure!(
        in_s2 == [sides(&[], &["d"]), sides(&["c"], &[]), sides(&[], &[])],
        "written neighbours in scope s2: {in_s2:?}"
    );
    // A replacement keeps its key's place; a withdrawal leaves the order.
    ok(
        store
            .apply(put(
                &key("t1", "b")?,
                "op-b2",
                revisions.get("b"),
                MemoryContent::text("turn b, replaced"),
                &["s"],
            )?)
            .await,
        "replace",
    )?;
    let d_revision = revisions
        .get("d")
        .ok_or_else(|| Failure("no revision of d".to_owned()))?;
    ok(
        store
            .apply(withdraw(&key("t1", "d")?, "op-d2", d_revision)?)
            .await,
        "withdraw",
    )?;
    let after = neighbours(store, "s", &["a", "b", "d", "e"], 1).await?;
    let expected_after = [
        sides(&[], &["b"]),
        sides(&["a"], &["e"]),
        sides(&[], &[]),
        sides(&["b"], &["f"]),
    ];
    ensure!(
        after == expected_after,
        "after replacing b and withdrawing d: {after:?}, expected {expected_after:?}"
    );
    ensure!(
        neighbours(store, "s", &[], 1).await?.is_empty(),
        "no ids must answer nothing"
    );
    let too_many = vec![DocumentId::new("a")?; memory_core::storage::MAX_NEIGHBOUR_IDS + 1];
    let refused = store
        .written_neighbours(&access("t1", "s")?, &too_many, 1)
        .await;
    ensure!(
        matches!(
            refused,
            Err(memory_core::error::MemoryError::TooLarge { .. })
        ),
        "{} ids were not refused as too large: {refused:?}",
        too_many.len()
    );
    let too_far = store
        .written_neighbours(
            &access("t1", "s")?,
            &[DocumentId::new("a")?],
            memory_core::storage::MAX_NEIGHBOUR_REACH + 1,
        )
        .await;
    ensure!(
        matches!(
            too_far,
            Err(memory_core::error::MemoryError::TooLarge { .. })
        ),
        "a reach past the limit was not refused: {too_far:?}"
    );
    Ok(())
}

/// Content that says it corrects `target` (at revision `r0`).
fn correcting(text: &str, target: &str) -> Result<MemoryContent, Failure> {
    let mut content = MemoryContent::text(text);
    let link = memory_core::recall::corrections::CorrectionLink {
        id: DocumentId::new(target)?,
        revision: Revision::new("r0")?,
    };
    content.metadata.insert(
        memory_core::recall::corrections::CORRECTS.to_owned(),
        link.to_json(),
    );
    Ok(content)
}

async fn corrections<S: InspectableStore>(
    store: &S,
    scope: &str,
    ids: &[&str],
) -> Result<Vec<Vec<String>>, Failure> {
    let ids = ids
        .iter()
        .map(|id| DocumentId::new(*id))
        .collect::<Result<Vec<_>, _>>()?;
    let found = ok(
        store.corrections_of(&access("t1", scope)?, &ids).await,
        "corrections of",
    )?;
    Ok(found
        .into_iter()
        .map(|ids| ids.into_iter().map(|id| id.to_string()).collect())
        .collect())
}

async fn corrections_of_name_correctors<S: InspectableStore>(store: &S) -> Checked {
    let mut revisions = BTreeMap::new();
    for (tenant, id, content, scopes) in [
        (
            "t1",
            "lisbon",
            MemoryContent::text("I live in Lisbon"),
            &["s"][..],
        ),
        (
            "t1",
            "madrid",
            correcting("Actually Madrid", "lisbon")?,
            &["s"][..],
        ),
        (
            "t1",
            "hidden",
            correcting("Actually Porto", "lisbon")?,
            &["s2"][..],
        ),
        (
            "t2",
            "elsewhere",
            correcting("Actually Rome", "lisbon")?,
            &["s"][..],
        ),
        (
            "t1",
            "after-all",
            correcting("Lisbon after all", "lisbon")?,
            &["s"][..],
        ),
        ("t1", "tea", MemoryContent::text("I like tea"), &["s"][..]),
    ] {
        let receipt = ok(
            store
                .apply(put(
                    &key(tenant, id)?,
                    &format!("op-{id}"),
                    None,
                    content,
                    scopes,
                )?)
                .await,
            "put",
        )?;
        revisions.insert(id, receipt.receipt.document.revision);
    }
    let found = corrections(store, "s", &["lisbon", "tea", "madrid", "missing"]).await?;
    ensure!(
        found == [vec!["after-all", "madrid"], vec![], vec![], vec![]],
        "corrections in scope s: {found:?} (newest first; other scopes and namespaces never named)"
    );
    let in_s2 = corrections(store, "s2", &["lisbon"]).await?;
    ensure!(
        in_s2 == [vec!["hidden"]],
        "corrections in scope s2: {in_s2:?}"
    );
    // A withdrawn correction, and one replaced by text without the link, no longer correct.
    let after_all = revisions
        .get("after-all")
        .ok_or_else(|| Failure("no revision of after-all".to_owned()))?;
    ok(
        store
            .apply(withdraw(&key("t1", "after-all")?, "op-w", after_all)?)
            .await,
        "withdraw",
    )?;
    ok(
        store
            .apply(put(
                &key("t1", "madrid")?,
                "op-m2",
                revisions.get("madrid"),
                MemoryContent::text("Madrid, no link"),
                &["s"],
            )?)
            .await,
        "replace",
    )?;
    let after = corrections(store, "s", &["lisbon"]).await?;
    ensure!(
        after == [Vec::<String>::new()],
        "after a withdrawal and a replacement without the link: {after:?}"
    );
    ensure!(
        corrections(store, "s", &[]).await?.is_empty(),
        "no ids must answer nothing"
    );
    let too_many =
        vec![DocumentId::new("a")?; memory_core::recall::corrections::MAX_CORRECTION_IDS + 1];
    let refused = store.corrections_of(&access("t1", "s")?, &too_many).await;
    ensure!(
        matches!(
            refused,
            Err(memory_core::error::MemoryError::TooLarge { .. })
        ),
        "{} ids were not refused as too large: {refused:?}",
        too_many.len()
    );
    Ok(())
}
