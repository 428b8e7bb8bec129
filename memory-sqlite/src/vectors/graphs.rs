//! Persisted search graphs (`semantic_graphs`): one per profile, an opaque BLOB with the position
//! and vector-set digest it was built over.

use memory_core::vectors::{GraphSnapshot, ProfileDigest};
use memory_core::{ChangeSequence, MemoryError};
use rusqlite::{OptionalExtension, params};

use super::SqliteVectorStore;
use super::codecs::corrupt;
use crate::error::memory_error as storage;

impl SqliteVectorStore {
    pub(super) fn save_graph_now(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        let position = i64::try_from(graph.position.get())
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let chunks = i64::try_from(graph.chunks)
            .map_err(|_| MemoryError::invalid("chunks", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "INSERT INTO semantic_graphs (profile, position, vector_set, chunks, graph) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (profile) DO UPDATE SET position = excluded.position, \
                 vector_set = excluded.vector_set, chunks = excluded.chunks, graph = excluded.graph",
                params![
                    profile.as_bytes().as_slice(),
                    position,
                    &graph.vector_set[..],
                    chunks,
                    &graph.bytes
                ],
            )
            .map_err(storage("save graph"))?;
        Ok(())
    }

    pub(super) fn load_graph_now(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        let connection = self.lock();
        // The length is read first, so an oversized blob is refused before it is materialized.
        let length: Option<i64> = connection
            .query_row(
                "SELECT length(graph) FROM semantic_graphs WHERE profile = ?1",
                [profile.as_bytes().as_slice()],
                |row| row.get(0),
            )
            .optional()
            .map_err(storage("load graph"))?;
        let Some(length) = length else {
            return Ok(None);
        };
        let length = u64::try_from(length).map_err(|_| corrupt("negative graph length"))?;
        if length > max_bytes as u64 {
            return Err(MemoryError::TooLarge {
                limit: "stored graph bytes",
                max: max_bytes as u64,
                actual: length,
            });
        }
        connection
            .query_row(
                "SELECT position, vector_set, chunks, graph FROM semantic_graphs WHERE profile = ?1",
                [profile.as_bytes().as_slice()],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Vec<u8>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(storage("load graph"))?
            .map(|(position, vector_set, chunks, bytes)| {
                Ok(GraphSnapshot {
                    position: ChangeSequence::new(
                        u64::try_from(position).map_err(|_| corrupt("negative graph position"))?,
                    ),
                    vector_set: vector_set
                        .try_into()
                        .map_err(|_| corrupt("graph vector-set digest length"))?,
                    chunks: u64::try_from(chunks).map_err(|_| corrupt("negative graph chunks"))?,
                    bytes,
                })
            })
            .transpose()
    }
}
