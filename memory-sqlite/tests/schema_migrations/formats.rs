//! The earlier formats: each a list of frozen pieces (`fixtures/schema/`), as the builds of the time
//! created them, and the migrations each piece stands for.

use std::collections::BTreeSet;

/// A frozen piece of an earlier format and the migrations it stands for.
pub struct Piece {
    pub sql: &'static str,
    pub steps: &'static [i64],
}

pub const MEMORY_1: Piece = Piece {
    sql: include_str!("../fixtures/schema/memory_format_1.sql"),
    steps: &[1],
};
pub const MEMORY_2: Piece = Piece {
    sql: include_str!("../fixtures/schema/memory_format_2.sql"),
    steps: &[1, 2],
};
pub const NEIGHBOURS: Piece = Piece {
    sql: include_str!("../fixtures/schema/memory_neighbours_index.sql"),
    steps: &[3],
};
pub const THREAD_LOG_1: Piece = Piece {
    sql: include_str!("../fixtures/schema/thread_log_1.sql"),
    steps: &[4],
};
pub const PROGRESS_1: Piece = Piece {
    sql: include_str!("../fixtures/schema/progress_1.sql"),
    steps: &[5],
};
pub const REMEMBERING_1: Piece = Piece {
    sql: include_str!("../fixtures/schema/remembering_1.sql"),
    steps: &[6],
};
pub const VECTORS_1: Piece = Piece {
    sql: include_str!("../fixtures/schema/vectors_1.sql"),
    steps: &[7],
};
pub const VECTORS_UNINDEXED_GRAPHS: Piece = Piece {
    sql: include_str!("../fixtures/schema/vectors_unindexed_graphs.sql"),
    steps: &[8],
};
pub const THREAD_LOG_PENDING: Piece = Piece {
    sql: include_str!("../fixtures/schema/thread_log_pending.sql"),
    steps: &[9],
};
pub const PROGRESS_EXTRACTION: Piece = Piece {
    sql: include_str!("../fixtures/schema/progress_extraction.sql"),
    steps: &[10],
};

/// The whole versioned schema at version 11, the last before the revision history (step 12); it
/// holds its own version table, so it is not one of [`FORMATS`] (files from before that table).
pub const VERSIONED_11: Piece = Piece {
    sql: include_str!("../fixtures/schema/versioned_11.sql"),
    steps: &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
};

/// The store that opens the file first (and so migrates it).
#[derive(Debug, Clone, Copy)]
pub enum Opener {
    Memory,
    ThreadLog,
    Progress,
    Remembering,
    Vectors,
}

/// An earlier format: the pieces its builds created, in the order they ran them.
pub struct Format {
    pub name: &'static str,
    pub pieces: &'static [&'static Piece],
    pub first: Opener,
}

impl Format {
    pub fn has(&self, piece: &Piece) -> bool {
        self.pieces.iter().any(|held| held.sql == piece.sql)
    }

    pub fn steps(&self) -> BTreeSet<i64> {
        self.pieces
            .iter()
            .flat_map(|piece| piece.steps.iter().copied())
            .collect()
    }
}

/// Every format a build before the versioned schema wrote when all its stores opened the file, and
/// mixes that arise when only some stores opened it, or opened it under different builds.
pub const FORMATS: &[Format] = &[
    Format {
        name: "first build (653ee0e, e276873)",
        pieces: &[
            &MEMORY_1,
            &THREAD_LOG_1,
            &PROGRESS_1,
            &REMEMBERING_1,
            &VECTORS_1,
        ],
        first: Opener::Memory,
    },
    Format {
        name: "persisted graphs (5386bac to 5a52419)",
        pieces: &[
            &MEMORY_1,
            &THREAD_LOG_1,
            &PROGRESS_1,
            &REMEMBERING_1,
            &VECTORS_1,
            &VECTORS_UNINDEXED_GRAPHS,
        ],
        first: Opener::Vectors,
    },
    Format {
        name: "lexical index by namespace (d5680a4)",
        pieces: &[
            &MEMORY_2,
            &THREAD_LOG_1,
            &PROGRESS_1,
            &REMEMBERING_1,
            &VECTORS_1,
            &VECTORS_UNINDEXED_GRAPHS,
        ],
        first: Opener::ThreadLog,
    },
    Format {
        name: "written-order neighbours (3c8f532)",
        pieces: &[
            &MEMORY_2,
            &NEIGHBOURS,
            &THREAD_LOG_1,
            &PROGRESS_1,
            &REMEMBERING_1,
            &VECTORS_1,
            &VECTORS_UNINDEXED_GRAPHS,
        ],
        first: Opener::Progress,
    },
    Format {
        name: "the last before the version table (fdd54cc on)",
        pieces: &[
            &MEMORY_2,
            &NEIGHBOURS,
            &THREAD_LOG_1,
            &THREAD_LOG_PENDING,
            &PROGRESS_1,
            &PROGRESS_EXTRACTION,
            &REMEMBERING_1,
            &VECTORS_1,
            &VECTORS_UNINDEXED_GRAPHS,
        ],
        first: Opener::Remembering,
    },
    Format {
        name: "memory format 1 beside the last activity stores",
        pieces: &[
            &MEMORY_1,
            &THREAD_LOG_1,
            &THREAD_LOG_PENDING,
            &PROGRESS_1,
            &PROGRESS_EXTRACTION,
            &REMEMBERING_1,
        ],
        first: Opener::ThreadLog,
    },
    Format {
        name: "the last activity stores alone",
        pieces: &[
            &THREAD_LOG_1,
            &THREAD_LOG_PENDING,
            &PROGRESS_1,
            &PROGRESS_EXTRACTION,
            &REMEMBERING_1,
        ],
        first: Opener::Progress,
    },
    Format {
        name: "the first vector store alone",
        pieces: &[&VECTORS_1],
        first: Opener::Vectors,
    },
    Format {
        name: "the last memory store alone",
        pieces: &[&MEMORY_2, &NEIGHBOURS],
        first: Opener::Memory,
    },
];
