//! The remembering worker's committed-activity processors, built in one place: the
//! `remembering-worker` binary builds them from its flags, and `memory-eval locomo --via worker`
//! from [`WorkerSettings::defaults`] (the binary's defaults), so the eval measures exactly what the
//! binary runs.

use std::sync::Arc;

use memory_core::activity::suppression::hide_suppressed;
use memory_core::activity::{
    ProcessorId, ProcessorVersion, ProgressStore, RememberingStore, ThreadDestination, ThreadLog,
    WorkerId,
};
use memory_core::{
    MemoryAccess, MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryScope, MemoryWriter,
    SystemClock,
};
use memory_model::ChatModel;
use remembering::app::{KeepLatestMerger, RemoveSourceAttributions};
use remembering::corrections::{Resemblance, Resembling, ResemblingFuture};
use remembering::extract::statement_text;
use remembering::model_extract::ModelExtractor;
use remembering::thread_sources::{StatementProposals, ThreadRecordLoader};
use remembering::worker::{Application, IntentPassLimits, IntentWorker};
use remembering::{
    ActivityProcessor, ActivityProcessorParts, ExtractFailure, Extraction, ExtractionRequest,
    PassHooks, PassLimits, PendingPass, RememberingError, StatementExtractor, ThreadExtractor,
    UnboundThreads,
};
use semantic_index::kernels::dot;
use semantic_index::{
    Embedder, FastembedEmbedder, ModelAssets, SemanticProfile, checked_embeddings,
};

use crate::database::Store;
use crate::model_settings::{Fallback, ModelSettings};
use crate::refusal::Refusal;
use crate::settings::Corrections;

/// The processor the binary runs by default (`--processor statements@1`).
pub const DEFAULT_PROCESSOR: &str = "statements";

/// The stores one worker's processors run over (one database's): the activity stores are trait objects;
/// the memory store stays a type parameter because `MemoryWriter` is not object safe.
pub struct ProcessorStores<W> {
    /// The memory store, written through its `MemoryWriter`.
    pub memory: Arc<W>,
    /// The thread log.
    pub log: Arc<dyn ThreadLog>,
    /// Activity progress.
    pub progress: Arc<dyn ProgressStore>,
    /// Source-to-target references and suppression.
    pub remembering: Arc<dyn RememberingStore>,
}

impl<W: Store> ProcessorStores<W> {
    /// The thread log, progress and remembering store of `memory`'s database, opened beside it
    /// ([`Store`]; a blocking call).
    pub fn open(memory: Arc<W>) -> Result<Self, Refusal> {
        Ok(Self {
            log: memory.open_thread_log()?,
            progress: memory.open_progress()?,
            remembering: memory.open_remembering()?,
            memory,
        })
    }
}

impl<W> Clone for ProcessorStores<W> {
    fn clone(&self) -> Self {
        Self {
            memory: Arc::clone(&self.memory),
            log: Arc::clone(&self.log),
            progress: Arc::clone(&self.progress),
            remembering: Arc::clone(&self.remembering),
        }
    }
}

impl<W> std::fmt::Debug for ProcessorStores<W> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ProcessorStores")
            .finish_non_exhaustive()
    }
}

/// How a worker's processors run.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Each processor's id and version.
    pub processors: Vec<(ProcessorId, ProcessorVersion)>,
    /// This worker's id.
    pub owner: WorkerId,
    /// Pass limits.
    pub limits: PassLimits,
    /// Where the memory of threads without a destination goes.
    pub unbound: UnboundThreads,
    /// How correcting statements are linked to what they correct.
    pub corrections: CorrectionLinking,
    /// The language model that extracts memories instead of the statement extractor, if any.
    pub model: Option<ModelExtraction>,
}

/// A language model extracting memories ([`remembering::model_extract`]).
#[derive(Clone)]
pub struct ModelExtraction {
    /// The model.
    pub model: Arc<dyn ChatModel>,
    /// What to do with a record when it fails.
    pub fallback: Fallback,
}

impl ModelExtraction {
    /// The extraction `settings` names: the model opened over HTTP (its key file read; a blocking
    /// call).
    pub fn open(settings: &ModelSettings) -> Result<Self, Refusal> {
        Ok(Self {
            model: settings.open()?,
            fallback: settings.fallback,
        })
    }
}

impl std::fmt::Debug for ModelExtraction {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ModelExtraction")
            .field("model", &self.model.name())
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// The extractor a worker's processors run: the statement extractor, or a language model.
pub enum WorkerExtractor {
    /// Each statement a user makes becomes a memory (the default; no model).
    Statements(StatementExtractor),
    /// A model proposes; what the user said literally is kept.
    Model(ModelExtractor),
}

impl ThreadExtractor for WorkerExtractor {
    async fn extract_thread(
        &self,
        request: ExtractionRequest<'_>,
    ) -> Result<Extraction, ExtractFailure> {
        match self {
            Self::Statements(statements) => statements.extract_thread(request).await,
            Self::Model(model) => model.extract_thread(request).await,
        }
    }
}

/// How the worker finds what a correcting statement corrects ([`remembering::corrections`]).
#[derive(Clone, Default)]
pub enum CorrectionLinking {
    /// No links (`--corrections off`).
    Off,
    /// By shared words among the store's lexical hits: the default, which needs no model.
    #[default]
    Words,
    /// By the cosine similarity of the embedding model's vectors, among the lexical hits and the
    /// destination's newest memories (`--corrections model`): corrections worded
    /// unlike what they correct ("I live in Osaka now." / "Actually I relocated to Porto.") link
    /// too, at the cost of loading the model in the worker.
    Model(Arc<dyn Embedder>),
}

impl CorrectionLinking {
    /// The linking a [`Corrections`] setting names; `model` loads the embedding model (from the
    /// assets `memory` uses; a blocking call), refused as `unavailable` when it cannot.
    pub fn from_setting(corrections: Corrections) -> Result<Self, Refusal> {
        Ok(match corrections {
            Corrections::Off => Self::Off,
            Corrections::Words => Self::Words,
            Corrections::Model => Self::Model(Arc::new(
                FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
                    .map_err(|error| {
                        Refusal::unavailable(format!(
                            "the embedding model for corrections: {error}"
                        ))
                    })?,
            )),
        })
    }
}

impl std::fmt::Debug for CorrectionLinking {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::Off => "Off",
            Self::Words => "Words",
            Self::Model(_) => "Model",
        })
    }
}

/// How many of the destination's newest memories the model compares a correction with, beside the
/// lexical hits.
pub const NEWEST_CANDIDATES: usize = 64;

impl WorkerSettings {
    /// The binary's defaults: `statements@1`, owner `worker-<pid>`, the default pass limits, and
    /// unbound threads into a namespace of their own with scope `agent`.
    pub fn defaults() -> Result<Self, RememberingError> {
        Ok(Self {
            processors: vec![(
                ProcessorId::new(DEFAULT_PROCESSOR)?,
                ProcessorVersion::new(1),
            )],
            owner: WorkerId::new(format!("worker-{}", std::process::id()))?,
            limits: PassLimits::default(),
            unbound: UnboundThreads::PerThread {
                scopes: vec![MemoryScope::new(crate::destination::DEFAULT_SCOPE)?],
            },
            corrections: CorrectionLinking::Words,
            model: None,
        })
    }
}

/// The worker's search for what a correcting statement corrects ([`Resemblance`]): the store's
/// lexical search over the destination, in each of its scopes (and, with the model, the
/// destination's [`NEWEST_CANDIDATES`] newest memories readable there), read back as current
/// documents with forgotten sources' contributions hidden (a forgotten memory is corrected by
/// nothing, and nothing links to it); with the model, each scored by its cosine with the statement.
struct StoreResemblance<W> {
    memory: Arc<W>,
    suppression: Arc<dyn RememberingStore>,
    embedder: Option<Arc<dyn Embedder>>,
}

impl<W: Store> StoreResemblance<W> {
    async fn candidates(
        &self,
        destination: &ThreadDestination,
        text: &str,
        limit: usize,
    ) -> Result<Vec<MemoryDocument>, MemoryError> {
        let mut keys: Vec<MemoryKey> = Vec::new();
        for scope in destination.scopes() {
            let access = MemoryAccess {
                namespace: destination.namespace().clone(),
                scope: scope.clone(),
            };
            // A statement longer than a query may be is searched by its tail.
            let query = crate::recall_service::query_tail(text);
            for hit in self.memory.search(&access, query, limit).await? {
                if !keys.contains(&hit.key) {
                    keys.push(hit.key);
                }
            }
        }
        if self.embedder.is_some() {
            let newest = self
                .memory
                .list(destination.namespace(), None, NEWEST_CANDIDATES)
                .await?;
            for document in newest.documents {
                let readable = document
                    .scopes
                    .iter()
                    .any(|scope| destination.scopes().contains(scope));
                if readable && !keys.contains(&document.key) {
                    keys.push(document.key);
                }
            }
        }
        let documents = self.memory.read_many(&keys).await?;
        Ok(hide_suppressed(&*self.suppression, documents)?
            .into_iter()
            .flatten()
            .collect())
    }
}

impl<W: Store> Resemblance for StoreResemblance<W> {
    fn resembling<'a>(
        &'a self,
        destination: &'a ThreadDestination,
        text: &'a str,
        limit: usize,
    ) -> ResemblingFuture<'a> {
        Box::pin(async move {
            let documents = self.candidates(destination, text, limit).await?;
            let Some(embedder) = &self.embedder else {
                return Ok(documents.into_iter().map(Resembling::by_words).collect());
            };
            let mut texts: Vec<&str> = vec![text];
            texts.extend(
                documents
                    .iter()
                    .map(|document| statement_text(&document.content)),
            );
            // Checked and normalized as the index checks them, so the dot product is the cosine.
            let vectors = embedder
                .embed(&texts)
                .and_then(|vectors| checked_embeddings(vectors, texts.len(), embedder.dimensions()))
                .map_err(|error| MemoryError::storage("embedding a correction", error))?;
            let Some((statement, others)) = vectors.split_first() else {
                return Ok(Vec::new());
            };
            Ok(documents
                .into_iter()
                .zip(others)
                .map(|(document, vector)| Resembling {
                    document,
                    cosine: Some(dot(statement, vector)),
                })
                .collect())
        })
    }
}

/// One pending pass of every processor of `settings` over `stores`, each with the statement
/// extractor (or the model of `settings.model`), linking correcting statements to what they correct
/// (and `hooks`, where tests inject stalls).
pub fn pending_pass<W: Store>(
    stores: &ProcessorStores<W>,
    settings: &WorkerSettings,
    hooks: Option<Arc<dyn PassHooks>>,
) -> Result<PendingPass<W, WorkerExtractor>, RememberingError> {
    let mut processors = Vec::with_capacity(settings.processors.len());
    for (processor, version) in &settings.processors {
        let extractor = match &settings.model {
            None => WorkerExtractor::Statements(StatementExtractor::new()),
            Some(extraction) => {
                // The model is shown the destination's closest memories, found by words as
                // correcting statements are.
                let shown: Arc<dyn Resemblance> = Arc::new(StoreResemblance {
                    memory: Arc::clone(&stores.memory),
                    suppression: Arc::clone(&stores.remembering),
                    embedder: None,
                });
                let extractor = ModelExtractor::new(Arc::clone(&extraction.model), Some(shown));
                WorkerExtractor::Model(match extraction.fallback {
                    Fallback::None => extractor,
                    Fallback::Statements => extractor.with_statement_fallback(),
                })
            }
        };
        let processor = ActivityProcessor::new(ActivityProcessorParts {
            log: Arc::clone(&stores.log),
            progress: Arc::clone(&stores.progress),
            references: Arc::clone(&stores.remembering),
            writer: Arc::clone(&stores.memory),
            extractor,
            clock: Arc::new(SystemClock),
            processor: processor.clone(),
            version: *version,
            owner: settings.owner.clone(),
            limits: settings.limits,
            unbound: settings.unbound.clone(),
        })?;
        let embedder = match &settings.corrections {
            CorrectionLinking::Off => None,
            CorrectionLinking::Words => Some(None),
            CorrectionLinking::Model(embedder) => Some(Some(Arc::clone(embedder))),
        };
        let processor = match embedder {
            Some(embedder) => processor.with_corrections(Arc::new(StoreResemblance {
                memory: Arc::clone(&stores.memory),
                suppression: Arc::clone(&stores.remembering),
                embedder,
            })),
            None => processor,
        };
        processors.push(match &hooks {
            Some(hooks) => processor.with_hooks(Arc::clone(hooks)),
            None => processor,
        });
    }
    Ok(PendingPass::new(Arc::clone(&stores.log), processors))
}

/// The intent worker of one worker (admitted remember and cleanup intents, thread records as their
/// sources): the one `remembering-worker` runs before each pending pass, and the Python package's
/// `remember_once()` too.
pub type Intents<W> = IntentWorker<
    W,
    ThreadRecordLoader,
    StatementProposals,
    KeepLatestMerger,
    RemoveSourceAttributions,
>;

/// The intent worker over `stores`, owned by `owner`, with the default statement extractor.
pub fn intent_worker<W: MemoryReader + MemoryWriter>(
    stores: &ProcessorStores<W>,
    owner: WorkerId,
    limits: IntentPassLimits,
) -> Result<Intents<W>, RememberingError> {
    IntentWorker::new(
        Arc::clone(&stores.remembering),
        Arc::clone(&stores.memory),
        Application {
            loader: ThreadRecordLoader::new(Arc::clone(&stores.log)),
            extractor: StatementProposals::new(StatementExtractor::new()),
            merger: KeepLatestMerger,
            cleanup: RemoveSourceAttributions,
        },
        Arc::new(SystemClock),
        owner,
        limits,
    )
}
