//! The default embedder: a local ONNX model through fastembed, with mean pooling, loaded from
//! [`ModelAssets`] and never from the network.
//!
//! [`FastembedEmbedder::load`] opens one session that every call shares (one-shot commands, which
//! embed and query one after the other). [`FastembedEmbedder::load_isolated`] is for a server that
//! indexes while it answers: queries ([`Embedder::embed_query`]) get a session of their own, and bulk
//! embedding ([`Embedder::embed`], the indexer's batches) runs on a dedicated thread at the lowest
//! CPU priority (Linux: per-thread nice 19, inherited by the session's intra-op threads, which it
//! creates). A query embedding therefore never waits for an indexing batch, and on a machine with
//! few cores the scheduler gives the query's threads the CPU while the batch runs: the batch uses
//! every core when nothing else wants them and yields them when a query does.
//!
//! Batching: a call's texts are tokenized, ordered by token count and cut into model calls of at
//! most [`Batching::max_texts`] texts whose padded size (texts times the longest one's tokens)
//! stays within [`Batching::max_tokens`]; the vectors come back in the caller's order. The model
//! pads every text of a call to its longest, so a batch of 64 holding one pasted page would
//! otherwise run 64 sequences of 256 tokens; ordered batches run the short texts short. The token
//! bound also bounds the largest tensors a call allocates (attention grows with batch × length²),
//! which is what ONNX Runtime's CPU arena grows to and keeps. fastembed exposes that arena only
//! through its execution-provider list (ort's `CPU::with_arena_allocator`); the sessions keep it
//! on: with the token bound capping its peak, turning it off saved about a tenth of the peak RSS
//! on the mixed-length comparison set and cost about a tenth of the throughput.

use std::sync::{Mutex, mpsc};

use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};

use crate::assets::{MODEL_FILE, ModelAssets, TOKENIZER_FILES, sha256_hex};
use crate::embed::Embedder;
use crate::error::EmbedError;
use crate::profile::SemanticProfile;

/// Texts per model call: large enough to amortize the call, small enough to bound the padded batch tensor.
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// Padded tokens per model call (texts × the longest one's tokens): 32 texts at the model's 256-token
/// limit, or [`DEFAULT_BATCH_SIZE`] texts of up to 128 tokens. Calls twice as large (64 × 256) ran
/// several times slower on two cores and grew the process past 2.7 GB: their attention tensors
/// (batch × 12 heads × length² floats, 200 MB at 64 × 256) no longer fit any cache, and ONNX
/// Runtime's arena keeps what its largest call needed.
pub const DEFAULT_BATCH_TOKENS: usize = 8_192;

/// How one embedder call is cut into model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// Most texts per model call (at least 1).
    pub max_texts: usize,
    /// Most padded tokens per model call, texts × the longest one's tokens (at least 1). A text
    /// longer than this on its own still gets a call of its own.
    pub max_tokens: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Self {
            max_texts: DEFAULT_BATCH_SIZE,
            max_tokens: DEFAULT_BATCH_TOKENS,
        }
    }
}

/// The nice value of the bulk-embedding thread of [`FastembedEmbedder::load_isolated`]: the lowest
/// priority, so any query thread preempts it.
pub const BULK_NICE: i32 = 19;

/// ONNX Runtime's session option that lets idle intra-op threads spin-wait for work. Every session
/// of ours turns it off. The bulk session: a spinning low-priority thread still takes CPU a query
/// could use. The query session: after embedding a query its threads spin on while the rerank
/// stage's cross-encoder runs, and took half the CPU from it (measured on two cores: the
/// cross-encoder's 12 passages in 67 ms after a query embedding with spinning, 42 ms without; the
/// query embedding itself 0.8 ms slower, 3.4 against 2.7 ms).
pub(crate) const ALLOW_SPINNING: &str = "session.intra_op.allow_spinning";

/// fastembed's `TextEmbedding` with the profile's model.
pub struct FastembedEmbedder {
    /// The session of queries (and of everything, without a bulk worker).
    query: Mutex<TextEmbedding>,
    /// The low-priority thread owning the bulk session, if loaded isolated.
    bulk: Option<BulkWorker>,
    dimensions: usize,
    batching: Batching,
}

impl std::fmt::Debug for FastembedEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FastembedEmbedder")
            .field("dimensions", &self.dimensions)
            .field("batching", &self.batching)
            .field("isolated", &self.bulk.is_some())
            .finish_non_exhaustive()
    }
}

/// Loads ONNX Runtime from `assets` once per process; later calls reuse the loaded library.
pub(crate) fn load_runtime(assets: &ModelAssets) -> Result<(), EmbedError> {
    let path = assets.runtime_library();
    if !path.is_file() {
        return Err(EmbedError::MissingAsset { path });
    }
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    // The builder only matters for custom environments; sessions create the default one on first use.
    let _environment = ort::init_from(&path).map_err(|error| EmbedError::RuntimeLoad {
        path: path.clone(),
        detail: error.to_string(),
    })?;
    Ok(())
}

/// The model's files, checked against the profile, ready to open sessions from.
#[derive(Clone)]
struct ModelFiles {
    onnx: Vec<u8>,
    tokenizer: TokenizerFiles,
    max_length: usize,
}

impl ModelFiles {
    fn read(assets: &ModelAssets, profile: &SemanticProfile) -> Result<Self, EmbedError> {
        assets.check()?;
        let onnx = assets.read(MODEL_FILE)?;
        if sha256_hex(&onnx) != profile.model_revision {
            return Err(EmbedError::ModelMismatch);
        }
        load_runtime(assets)?;
        let tokenizer = TokenizerFiles {
            tokenizer_file: assets.read(TOKENIZER_FILES[0])?,
            config_file: assets.read(TOKENIZER_FILES[1])?,
            special_tokens_map_file: assets.read(TOKENIZER_FILES[2])?,
            tokenizer_config_file: assets.read(TOKENIZER_FILES[3])?,
        };
        Ok(Self {
            onnx,
            tokenizer,
            max_length: profile.max_sequence_length,
        })
    }

    /// A session; `options` adds to the profile's sequence length.
    fn session(
        self,
        options: impl FnOnce(InitOptionsUserDefined) -> InitOptionsUserDefined,
    ) -> Result<TextEmbedding, EmbedError> {
        let model =
            UserDefinedEmbeddingModel::new(self.onnx, self.tokenizer).with_pooling(Pooling::Mean);
        let options = options(InitOptionsUserDefined::new().with_max_length(self.max_length));
        TextEmbedding::try_new_from_user_defined(model, options).map_err(|error| {
            EmbedError::Model {
                detail: error.to_string(),
            }
        })
    }
}

/// Runs `session` on `texts` in length-ordered batches (see the module docs); the vectors come back
/// in the order of `texts`.
fn run(
    session: &mut TextEmbedding,
    texts: &[&str],
    batching: Batching,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let lengths = token_lengths(&session.tokenizer, texts);
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&index| lengths[index]);
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
    for batch in plan_batches(&order, &lengths, batching) {
        let batch_texts: Vec<&str> = batch.iter().map(|&index| texts[index]).collect();
        let embedded = session
            .embed(&batch_texts, Some(batch_texts.len()))
            .map_err(|error| EmbedError::Model {
                detail: error.to_string(),
            })?;
        if embedded.len() != batch.len() {
            return Err(EmbedError::Count {
                expected: batch.len(),
                actual: embedded.len(),
            });
        }
        for (&index, vector) in batch.iter().zip(embedded) {
            vectors[index] = Some(vector);
        }
    }
    vectors
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| EmbedError::Model {
            detail: "a text was left out of every batch".to_owned(),
        })
}

/// Each text's token count by `tokenizer`, for ordering texts into batches by length. Only an
/// estimate for ordering and budgeting: should encoding fail, the model call reports it, and the
/// byte length (at least the token count) keeps a budget safe.
pub(crate) fn token_lengths(tokenizer: &tokenizers::Tokenizer, texts: &[&str]) -> Vec<usize> {
    texts
        .iter()
        .map(|text| {
            tokenizer
                .encode_fast(*text, true)
                .map_or(text.len(), |encoding| encoding.len())
        })
        .collect()
}

/// Padding a batch may carry without limit, in tokens: below this, another model call costs more
/// than the padding it saves.
pub const PADDING_SLACK_TOKENS: usize = 256;

/// Cuts `order` (text indices by ascending `lengths`) into consecutive batches of at most
/// `batching.max_texts` texts whose padded size, count × the last (longest) text's length, stays
/// within `batching.max_tokens`, and whose padding (padded size less the texts' own tokens) stays
/// within a quarter of the padded size or [`PADDING_SLACK_TOKENS`], whichever is larger. Every text
/// lands in exactly one batch; one longer than the token bound gets a batch of its own.
///
/// The padding bound is what makes length-batching pay on chunked documents: a long document's
/// last chunk (a hundred tokens or so) sorts just above the one-line messages, and without the
/// bound a batch of sixty 20-token messages would be padded to it, six times their own tokens
/// (measured: `memory sync` of a mixed import padded 2.6 times the tokens `bench-embed` did on the
/// same texts).
fn plan_batches<'a>(order: &'a [usize], lengths: &[usize], batching: Batching) -> Vec<&'a [usize]> {
    let max_texts = batching.max_texts.max(1);
    let max_tokens = batching.max_tokens.max(1);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut own_tokens = 0usize;
    for end in 0..order.len() {
        let length = lengths[order[end]];
        let count = end + 1 - start;
        let padded = count.saturating_mul(length);
        let padding = padded.saturating_sub(own_tokens.saturating_add(length));
        let too_padded = padding > (padded / 4).max(PADDING_SLACK_TOKENS);
        if end > start && (count > max_texts || padded > max_tokens || too_padded) {
            batches.push(&order[start..end]);
            start = end;
            own_tokens = 0;
        }
        own_tokens = own_tokens.saturating_add(length);
    }
    if start < order.len() {
        batches.push(&order[start..]);
    }
    batches
}

/// What the bulk thread is asked to do.
enum BulkJob {
    /// Embed `texts`, answering on `answer`.
    Embed {
        texts: Vec<String>,
        batching: Batching,
        answer: mpsc::SyncSender<Result<Vec<Vec<f32>>, EmbedError>>,
    },
    /// Stay busy until the sender drops (tests: the thread is mid-batch).
    #[cfg(test)]
    Hold(mpsc::Receiver<()>),
}

/// A thread at [`BULK_NICE`] that owns the bulk session and runs one job at a time. It ends when
/// the embedder (the only sender) is dropped.
struct BulkWorker {
    jobs: Mutex<mpsc::Sender<BulkJob>>,
    /// The thread's nice value as it read it back after lowering it (`None` where unsupported).
    nice: Option<i32>,
}

impl BulkWorker {
    fn start(files: ModelFiles) -> Result<Self, EmbedError> {
        let (jobs, receiver) = mpsc::channel::<BulkJob>();
        let (ready, on_ready) = mpsc::sync_channel::<Result<Option<i32>, EmbedError>>(1);
        std::thread::Builder::new()
            .name("semantic-embed-bulk".to_owned())
            .spawn(move || {
                // Lowered before the session exists, so the intra-op threads it creates inherit it.
                let nice = lower_priority();
                let session =
                    files.session(|options| options.with_session_config(ALLOW_SPINNING, "0"));
                let mut session = match session {
                    Ok(session) => {
                        let _ = ready.send(Ok(nice));
                        session
                    }
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                for job in receiver {
                    let (texts, batching, answer) = match job {
                        BulkJob::Embed {
                            texts,
                            batching,
                            answer,
                        } => (texts, batching, answer),
                        #[cfg(test)]
                        BulkJob::Hold(release) => {
                            let _ = release.recv();
                            continue;
                        }
                    };
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    // A panic inside the model must not end the thread: every later job would fail.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run(&mut session, &texts, batching)
                    }))
                    .unwrap_or_else(|_| {
                        Err(EmbedError::Model {
                            detail: "the model panicked".to_owned(),
                        })
                    });
                    let _ = answer.send(result);
                }
            })
            .map_err(|error| EmbedError::Model {
                detail: format!("could not start the bulk embedding thread: {error}"),
            })?;
        let nice = on_ready.recv().map_err(|_| EmbedError::Model {
            detail: "the bulk embedding thread ended while loading".to_owned(),
        })??;
        Ok(Self {
            jobs: Mutex::new(jobs),
            nice,
        })
    }

    fn send(&self, job: BulkJob) -> Result<(), EmbedError> {
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(job)
            .map_err(|_| bulk_ended())
    }

    fn embed(&self, texts: &[&str], batching: Batching) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (answer, on_answer) = mpsc::sync_channel(1);
        self.send(BulkJob::Embed {
            texts: texts.iter().map(|text| (*text).to_owned()).collect(),
            batching,
            answer,
        })?;
        on_answer.recv().map_err(|_| bulk_ended())?
    }
}

fn bulk_ended() -> EmbedError {
    EmbedError::Model {
        detail: "the bulk embedding thread has ended".to_owned(),
    }
}

/// Lowers the calling thread to [`BULK_NICE`] and answers the nice value it then has. Failing to
/// lower it costs only isolation, so it is logged, not refused.
#[cfg(target_os = "linux")]
fn lower_priority() -> Option<i32> {
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), BULK_NICE) {
        tracing::warn!(%error, "could not lower the bulk embedding thread's priority");
    }
    rustix::process::getpriority_process(Some(thread)).ok()
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() -> Option<i32> {
    None
}

impl FastembedEmbedder {
    /// Loads the model of `profile` from `assets` into one session shared by every call. Fails with
    /// [`EmbedError::MissingAsset`] naming the fetch script when a file is absent, and with
    /// [`EmbedError::ModelMismatch`] when the model file's sha256 is not the profile's
    /// `model_revision`.
    pub fn load(assets: &ModelAssets, profile: &SemanticProfile) -> Result<Self, EmbedError> {
        let files = ModelFiles::read(assets, profile)?;
        Ok(Self {
            query: Mutex::new(
                files.session(|options| options.with_session_config(ALLOW_SPINNING, "0"))?,
            ),
            bulk: None,
            dimensions: profile.dimensions,
            batching: Batching::default(),
        })
    }

    /// As [`Self::load`], with two sessions: one for queries and one for bulk embedding on a thread
    /// of its own at [`BULK_NICE`] (see the module docs). For a server that indexes while it
    /// answers; the model's weights are held twice.
    pub fn load_isolated(
        assets: &ModelAssets,
        profile: &SemanticProfile,
    ) -> Result<Self, EmbedError> {
        let files = ModelFiles::read(assets, profile)?;
        let bulk = BulkWorker::start(files.clone())?;
        Ok(Self {
            query: Mutex::new(
                files.session(|options| options.with_session_config(ALLOW_SPINNING, "0"))?,
            ),
            bulk: Some(bulk),
            dimensions: profile.dimensions,
            batching: Batching::default(),
        })
    }

    /// Sets the most texts per model call (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batching.max_texts = batch_size.max(1);
        self
    }

    /// Sets the most padded tokens per model call (at least 1; see [`Batching::max_tokens`]).
    pub fn with_batch_tokens(mut self, max_tokens: usize) -> Self {
        self.batching.max_tokens = max_tokens.max(1);
        self
    }

    /// How calls are cut into model calls.
    pub fn batching(&self) -> Batching {
        self.batching
    }

    /// Whether bulk embedding runs apart from queries ([`Self::load_isolated`]).
    pub fn is_isolated(&self) -> bool {
        self.bulk.is_some()
    }

    /// The nice value the bulk thread runs at, where it could be read (Linux, isolated only).
    pub fn bulk_nice(&self) -> Option<i32> {
        self.bulk.as_ref().and_then(|bulk| bulk.nice)
    }

    fn embed_on_query_session(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // A panic inside the model leaves nothing half-updated in the session we rely on; reuse it.
        let mut session = self
            .query
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        run(&mut session, texts, self.batching)
    }

    /// Keeps the bulk thread busy until the answered sender drops (tests: an indexing batch runs).
    #[cfg(test)]
    fn hold_bulk(&self) -> Result<mpsc::Sender<()>, EmbedError> {
        let (release, on_release) = mpsc::channel();
        if let Some(bulk) = &self.bulk {
            bulk.send(BulkJob::Hold(on_release))?;
        }
        Ok(release)
    }
}

impl Embedder for FastembedEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        match &self.bulk {
            Some(bulk) => bulk.embed(texts, self.batching),
            None => self.embed_on_query_session(texts),
        }
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed_on_query_session(texts)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    /// The real model with a bulk thread; without the assets this fails with the missing-asset
    /// error, which names the fetch script (as the crate's other real-model tests do).
    fn isolated_model() -> FastembedEmbedder {
        FastembedEmbedder::load_isolated(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"))
    }

    fn shared_model() -> FastembedEmbedder {
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// Texts of very different lengths, shuffled so that neither input order nor length order
    /// matches the other: a few words, sentences, and pasted pages past the model's 256 tokens.
    fn mixed_texts() -> Vec<String> {
        let sentence =
            "The committee reviewed the garden budget and agreed to plant more tomatoes. ";
        let mut texts = Vec::new();
        for i in 0..23usize {
            let text = match i % 5 {
                0 => format!("note {i}"),
                1 => format!("{i}: {}", sentence.repeat(1 + i % 3)),
                2 => format!("page {i}. {}", sentence.repeat(20 + i)),
                3 => format!("a short reminder about item {i}"),
                _ => format!("{i} {}", sentence.repeat(4)),
            };
            texts.push(text);
        }
        texts
    }

    fn assert_same_vectors(batched: &[Vec<f32>], single: &[Vec<f32>]) {
        assert_eq!(batched.len(), single.len());
        for (index, (batched, single)) in batched.iter().zip(single).enumerate() {
            let similarity = crate::kernels::dot(batched, single);
            let norms = crate::kernels::dot(batched, batched).sqrt()
                * crate::kernels::dot(single, single).sqrt();
            // Padding is masked out, so only GEMM blocking changes the rounding.
            assert!(
                (similarity / norms - 1.0).abs() < 1e-4,
                "text {index}: cosine {} with its own one-by-one vector",
                similarity / norms
            );
        }
    }

    #[test]
    fn length_ordered_batches_answer_in_the_callers_order_as_one_by_one() {
        let embedder = shared_model().with_batch_size(4).with_batch_tokens(600);
        let texts = mixed_texts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let single: Vec<Vec<f32>> = refs
            .iter()
            .map(|text| embedder.embed(&[*text]).unwrap().remove(0))
            .collect();
        assert_same_vectors(&embedder.embed(&refs).unwrap(), &single);
        // The isolated embedder batches on its own thread the same way.
        let isolated = isolated_model().with_batch_size(4).with_batch_tokens(600);
        assert_same_vectors(&isolated.embed(&refs).unwrap(), &single);
    }

    #[test]
    fn batches_keep_every_text_once_within_both_bounds() {
        let lengths = [5usize, 300, 12, 12, 40, 7, 256, 1, 90, 90, 90];
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&index| lengths[index]);
        let batching = Batching {
            max_texts: 3,
            max_tokens: 200,
        };
        let batches = plan_batches(&order, &lengths, batching);
        let mut seen: Vec<usize> = batches
            .iter()
            .flat_map(|batch| batch.iter().copied())
            .collect();
        assert_eq!(seen, order, "consecutive runs of the length order");
        seen.sort_unstable();
        assert_eq!(seen, (0..lengths.len()).collect::<Vec<_>>());
        for batch in &batches {
            let longest = batch.iter().map(|&index| lengths[index]).max().unwrap();
            assert!(batch.len() <= 3);
            assert!(
                batch.len() == 1 || batch.len() * longest <= 200,
                "{batch:?} pads to {}",
                batch.len() * longest
            );
        }
        // Texts over the token bound get a batch of their own; short ones share.
        assert!(batches.contains(&&[1][..]) && batches.contains(&&[6][..]));
        assert_eq!(batches[0].len(), 3);
        assert!(plan_batches(&[], &[], batching).is_empty());
    }

    #[test]
    fn short_texts_are_not_padded_to_a_long_documents_last_chunk() {
        // Sixty one-line messages, two chunk tails of a long document, six full chunks.
        let mut lengths = vec![20usize; 60];
        lengths.extend([110, 130]);
        lengths.extend([256; 6]);
        let order: Vec<usize> = (0..lengths.len()).collect();
        let batching = Batching {
            max_texts: 64,
            max_tokens: 8_192,
        };
        let batches = plan_batches(&order, &lengths, batching);
        assert_eq!(
            batches.iter().map(|batch| batch.len()).collect::<Vec<_>>(),
            [60, 2, 6],
            "{batches:?}"
        );
        for batch in &batches {
            let longest = batch.iter().map(|&index| lengths[index]).max().unwrap();
            let own: usize = batch.iter().map(|&index| lengths[index]).sum();
            let padded = batch.len() * longest;
            assert!(
                padded - own <= (padded / 4).max(PADDING_SLACK_TOKENS),
                "{batch:?}"
            );
        }
        // Slowly rising lengths still share batches: the bound is on the padding, not the spread.
        let rising: Vec<usize> = (0..64).map(|index| 10 + index / 8).collect();
        let order: Vec<usize> = (0..rising.len()).collect();
        assert_eq!(plan_batches(&order, &rising, batching).len(), 1);
    }

    #[test]
    fn a_query_embedding_never_waits_for_a_bulk_batch() {
        let embedder = isolated_model();
        assert!(embedder.is_isolated());
        #[cfg(target_os = "linux")]
        assert_eq!(embedder.bulk_nice(), Some(BULK_NICE));
        let embedder = std::sync::Arc::new(embedder);
        // The bulk thread is mid-batch (held) and a bulk call queues behind it ...
        let release = embedder.hold_bulk().unwrap();
        let (bulk_done, on_bulk) = mpsc::channel();
        {
            let embedder = std::sync::Arc::clone(&embedder);
            std::thread::spawn(move || {
                let _ = bulk_done.send(embedder.embed(&["a note about the garden"]));
            });
        }
        // ... while a query embedding completes on its own session.
        let (query_done, on_query) = mpsc::channel();
        {
            let embedder = std::sync::Arc::clone(&embedder);
            std::thread::spawn(move || {
                let _ = query_done.send(embedder.embed_query(&["a note about the garden"]));
            });
        }
        let query = on_query
            .recv_timeout(Duration::from_secs(60))
            .expect("a query embedding does not wait for the bulk thread")
            .unwrap();
        assert!(
            on_bulk.try_recv().is_err(),
            "the bulk call waited for the held batch"
        );
        drop(release);
        let bulk = on_bulk
            .recv_timeout(Duration::from_secs(60))
            .unwrap()
            .unwrap();
        let similarity: f32 = bulk[0].iter().zip(&query[0]).map(|(a, b)| a * b).sum();
        let norms: f32 = bulk[0].iter().map(|a| a * a).sum::<f32>().sqrt()
            * query[0].iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!(
            (similarity / norms - 1.0).abs() < 1e-4,
            "both sessions run the same model"
        );
    }
}
