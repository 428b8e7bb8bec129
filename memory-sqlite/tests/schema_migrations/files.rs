//! What a file holds, read with plain SQL: tables, rows, schema, recorded versions.

use std::path::Path;

use rusqlite::Connection;

/// The tables holding the stores' rows (not FTS5's, not the old format markers, not SQLite's).
pub fn our_tables(connection: &Connection) -> Vec<String> {
    connection
        .prepare(
            "SELECT name FROM main.sqlite_schema WHERE type = 'table' \
             AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'memory_fts%' \
             AND name NOT IN ('memory_meta', 'activity_formats') ORDER BY name",
        )
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The columns of `table` in the main database, in order, each quoted.
pub fn columns(connection: &Connection, table: &str) -> Vec<String> {
    connection
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}', 'main')"
        ))
        .unwrap()
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(|name| format!("\"{}\"", name.unwrap()))
        .collect()
}

/// Every row of `table`, each as text, sorted.
pub fn rows(connection: &Connection, table: &str) -> Vec<String> {
    rows_of(connection, table, &["*".to_owned()])
}

/// Every row of `table` read as `columns` (a migration may have added others since), each as text,
/// sorted.
pub fn rows_of(connection: &Connection, table: &str, columns: &[String]) -> Vec<String> {
    let mut statement = connection
        .prepare(&format!("SELECT {} FROM \"{table}\"", columns.join(", ")))
        .unwrap();
    let columns = statement.column_count();
    let mut rows: Vec<String> = statement
        .query_map([], |row| {
            (0..columns)
                .map(|column| row.get::<_, rusqlite::types::Value>(column))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .map(|row| format!("{:?}", row.unwrap()))
        .collect();
    rows.sort();
    rows
}

/// Every table's rows, SQLite's sequences included.
pub fn all_rows(path: &Path) -> Vec<(String, Vec<String>)> {
    let connection = Connection::open(path).unwrap();
    let names: Vec<String> = connection
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' \
             AND name NOT LIKE 'memory_fts%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    names
        .into_iter()
        .map(|name| {
            let found = rows(&connection, &name);
            (name, found)
        })
        .collect()
}

/// The file's schema objects with their SQL, whitespace folded (an old build's indentation differs).
pub fn schema(path: &Path) -> Vec<(String, String, String)> {
    Connection::open(path)
        .unwrap()
        .prepare(
            "SELECT type, name, sql FROM sqlite_schema \
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite%' ORDER BY type, name",
        )
        .unwrap()
        .query_map([], |row| {
            let sql: String = row.get(2)?;
            Ok((
                row.get(0)?,
                row.get(1)?,
                sql.split_whitespace().collect::<Vec<_>>().join(" "),
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

pub fn recorded_versions(path: &Path) -> Vec<(i64, bool)> {
    Connection::open(path)
        .unwrap()
        .prepare("SELECT version, recognised FROM memory_schema_version ORDER BY version")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The rows of every table holding the stores' rows, and SQLite's sequences where there are any.
pub fn stored_rows(path: &Path) -> Vec<(String, Vec<String>)> {
    let connection = Connection::open(path).unwrap();
    let mut tables = our_tables(&connection);
    let sequences: bool = connection
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    if sequences {
        tables.push("sqlite_sequence".to_owned());
    }
    tables
        .into_iter()
        .map(|table| {
            let found = rows(&connection, &table);
            (table, found)
        })
        .collect()
}

/// The format markers of the builds from before the version table.
pub fn old_markers(path: &Path) -> Vec<(String, i64)> {
    Connection::open(path)
        .unwrap()
        .prepare(
            "SELECT key, value FROM memory_meta UNION ALL \
             SELECT component, format FROM activity_formats ORDER BY 1",
        )
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}
