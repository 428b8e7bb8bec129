//! The reverse of correction links ([`CorrectionIndex::corrections_of`]): which current documents
//! name a document in their `corrects` member, read in one statement. The partial expression index
//! `memory_documents_by_correction` (schema migration 7) holds only the documents that carry a link;
//! the caller's scope is checked on `memory_document_scopes`, which holds only current, non-withdrawn
//! documents.
//!
//! [`CorrectionIndex::corrections_of`]: memory_core::recall::corrections::CorrectionIndex::corrections_of

use deadpool_postgres::Object;
use memory_core::DocumentId;
use memory_core::recall::corrections::MAX_CORRECTIONS_PER_DOCUMENT;
use memory_core::storage::decode_document_id;

use crate::error::{Attempt, Fail, corrupt};

/// One `corrections_of` call's arguments.
pub(crate) struct Corrections {
    pub(crate) ids: Vec<String>,
    pub(crate) namespace: String,
    pub(crate) scope: String,
}

/// The expression is the index's (`memory_corrects_id`, schema migration 7), so the planner uses it.
const CORRECTIONS_SQL: &str = "\
SELECT c.ord, \
  ARRAY(SELECT d.id FROM memory_documents AS d \
    JOIN memory_document_scopes AS s ON s.entry = d.entry AND s.scope = $2 \
    WHERE d.namespace = $1 AND memory_corrects_id(d.body) = c.id \
      AND NOT d.withdrawn \
    ORDER BY d.entry DESC LIMIT $4) \
FROM unnest($3::text[]) WITH ORDINALITY AS c(id, ord)";

impl Corrections {
    pub(crate) async fn run(&self, client: Object) -> Attempt<Vec<Vec<DocumentId>>> {
        let statement = client.prepare_cached(CORRECTIONS_SQL).await?;
        let limit = MAX_CORRECTIONS_PER_DOCUMENT as i64;
        let rows = client
            .query(
                &statement,
                &[&self.namespace, &self.scope, &self.ids, &limit],
            )
            .await?;
        let mut answers = vec![Vec::new(); self.ids.len()];
        for row in rows {
            let ordinal: i64 = row.try_get(0)?;
            let slot = usize::try_from(ordinal - 1)
                .ok()
                .and_then(|index| answers.get_mut(index))
                .ok_or_else(|| Fail::Model(corrupt("correction row outside the ids asked for")))?;
            let ids: Vec<String> = row.try_get(1)?;
            *slot = ids
                .iter()
                .map(|id| decode_document_id(id))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Fail::Model)?;
        }
        Ok(answers)
    }
}
