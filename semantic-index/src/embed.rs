//! The [`Embedder`] trait, the checks every returned vector passes, and the deterministic embedder for
//! unit tests.

use crate::error::EmbedError;

/// Turns texts into vectors. Implementations are synchronous and CPU-bound; the index calls them on a
/// blocking thread.
pub trait Embedder: Send + Sync + 'static {
    /// The length of every vector this embedder returns.
    fn dimensions(&self) -> usize;

    /// One vector per text, in order. The index checks and normalizes what comes back
    /// ([`checked_embeddings`]), so implementations need not.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// [`Self::embed`] for query texts, the latency-sensitive path: an implementation that indexes
    /// and answers at once (the server's [`crate::FastembedEmbedder::load_isolated`]) answers these
    /// on a session of their own, so a query never waits for an indexing batch. The default embeds
    /// as [`Self::embed`] does.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts)
    }
}

impl<E: Embedder + ?Sized> Embedder for std::sync::Arc<E> {
    fn dimensions(&self) -> usize {
        (**self).dimensions()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed(texts)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed_query(texts)
    }
}

/// Checks count, dimensions and norm of `vectors` for `expected_count` texts and normalizes them to unit
/// length.
pub fn checked_embeddings(
    mut vectors: Vec<Vec<f32>>,
    expected_count: usize,
    dimensions: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != expected_count {
        return Err(EmbedError::Count {
            expected: expected_count,
            actual: vectors.len(),
        });
    }
    for (index, vector) in vectors.iter_mut().enumerate() {
        normalize(vector, dimensions).map_err(|error| match error {
            EmbedError::Norm { .. } => EmbedError::Norm { index },
            other => other,
        })?;
    }
    Ok(vectors)
}

/// Normalizes one vector in place after checking its length and that its norm is positive and finite.
pub fn normalize(vector: &mut [f32], dimensions: usize) -> Result<(), EmbedError> {
    if vector.len() != dimensions {
        return Err(EmbedError::Dimensions {
            expected: dimensions,
            actual: vector.len(),
        });
    }
    if vector.iter().any(|value| !value.is_finite()) {
        return Err(EmbedError::Norm { index: 0 });
    }
    // Accumulating in f64 keeps the norm finite for any finite f32 components.
    let norm = vector
        .iter()
        .map(|value| f64::from(*value) * f64::from(*value))
        .sum::<f64>()
        .sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return Err(EmbedError::Norm { index: 0 });
    }
    for value in vector.iter_mut() {
        *value = (f64::from(*value) / norm) as f32;
    }
    Ok(())
}

/// A hash-based embedder for unit tests only: each lowercase word adds a signed unit to one bucket chosen
/// by a hash of the word, so texts sharing words are similar. It is never the default of anything; real
/// recall uses [`crate::FastembedEmbedder`].
#[derive(Debug, Clone, Copy)]
pub struct DeterministicEmbedder {
    dimensions: usize,
}

impl DeterministicEmbedder {
    /// An embedder of `dimensions`-long vectors (at least 1).
    pub fn new(dimensions: usize) -> Self {
        Self {
            dimensions: dimensions.max(1),
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Embedder for DeterministicEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0f32; self.dimensions];
                let mut words = 0;
                for word in text
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|word| !word.is_empty())
                {
                    let hash = fnv1a(word.to_lowercase().as_bytes());
                    let bucket = (hash % self.dimensions as u64) as usize;
                    vector[bucket] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
                    words += 1;
                }
                if words == 0 || vector.iter().all(|value| *value == 0.0) {
                    // A text without words still needs a valid direction.
                    vector[0] = 1.0;
                }
                vector
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn checks_refuse_bad_vectors() {
        assert!(matches!(
            checked_embeddings(vec![vec![1.0, 0.0]], 2, 2),
            Err(EmbedError::Count { .. })
        ));
        assert!(matches!(
            checked_embeddings(vec![vec![1.0]], 1, 2),
            Err(EmbedError::Dimensions { .. })
        ));
        assert!(matches!(
            checked_embeddings(vec![vec![1.0, 0.0], vec![0.0, 0.0]], 2, 2),
            Err(EmbedError::Norm { index: 1 })
        ));
        assert!(matches!(
            checked_embeddings(vec![vec![f32::NAN, 1.0]], 1, 2),
            Err(EmbedError::Norm { index: 0 })
        ));
        let big = checked_embeddings(vec![vec![f32::MAX, f32::MAX]], 1, 2).unwrap();
        let norm: f32 = big[0].iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn deterministic_embedder_is_stable_and_word_based() {
        let embedder = DeterministicEmbedder::new(64);
        let first = embedder.embed(&["the red fox", "The red fox", ""]).unwrap();
        assert_eq!(first[0], first[1]);
        assert_eq!(first[2][0], 1.0);
    }
}
