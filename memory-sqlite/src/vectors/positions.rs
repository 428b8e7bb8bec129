//! The change sequence each profile's index has caught up to.

use memory_core::vectors::ProfileDigest;
use memory_core::{ChangeSequence, MemoryError};
use rusqlite::{OptionalExtension, params};

use super::SqliteVectorStore;
use super::codecs::corrupt;
use crate::error::memory_error as storage;

impl SqliteVectorStore {
    pub(super) fn position_now(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        let connection = self.lock();
        let position: Option<i64> = connection
            .query_row(
                "SELECT position FROM semantic_positions WHERE profile = ?1",
                [profile.as_bytes().as_slice()],
                |row| row.get(0),
            )
            .optional()
            .map_err(storage("read indexed position"))?;
        match position {
            None => Ok(ChangeSequence::ZERO),
            Some(value) => u64::try_from(value)
                .map(ChangeSequence::new)
                .map_err(|_| corrupt("negative indexed position")),
        }
    }

    pub(super) fn set_position_now(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        let value = i64::try_from(position.get())
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let connection = self.lock();
        connection
            .execute(
                "INSERT INTO semantic_positions (profile, position) VALUES (?1, ?2) \
                 ON CONFLICT (profile) DO UPDATE SET position = max(position, excluded.position)",
                params![profile.as_bytes().as_slice(), value],
            )
            .map_err(storage("write indexed position"))?;
        Ok(())
    }
}
