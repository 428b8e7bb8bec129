//! `memory-eval locomo --via server`: the same import, sync and questions as [`super::run`], but every
//! recall goes through the built binary's door, `memory serve --http`, over MCP (one session of the
//! project's own client, [`memory_client::server::ServerSession`]), so its latency is what a host
//! sees: HTTP, the MCP framing, the server's grant check and its JSON, on top of the recall.
//!
//! - The store is written and indexed in this process by the code `memory import` and `memory sync`
//!   run (`locomo-via-server.sqlite`; `memory sync` persists the HNSW graph, so the server loads it
//!   instead of building one), then the server is started on it: `memory serve --http 127.0.0.1:0
//!   --allow-namespace '{"name":"locomo","version":1}'`, its own grant (a loopback caller without a
//!   token holds it) reaching every conversation's namespace, and nothing else.
//! - The server runs the binary's defaults (the rerank model on), and is ready only once its models
//!   are loaded (`/healthz`), so no recall pays a load.
//! - A refusal, or a call the transport lost, counts as an empty answer in `refused`, as in the
//!   direct run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use memory_client::discovery::{self, Discovery};
use memory_client::server::ServerSession;
use serde_json::{Value, json};

use super::data::Conversation;
use super::report::{LocomoReport, THROUGH_SERVER};
use super::run::{
    Answer, IndexedStore, MODES, NAMESPACE_NAME, RecallDoor, direct_turns, indexed_store,
    recall_through,
};
use crate::progress::Progress;
use crate::serve_load::assets_dir;
use crate::serve_load::server::{Server, ServerAccess, ServerSpec, Target, find_binary};

/// Longest wait for the server to be ready (opening the store, loading both models).
const READY_TIMEOUT: Duration = Duration::from_secs(600);
/// A clean shutdown is waited for this long, then the server is killed.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// One MCP session with the server.
struct McpDoor(ServerSession);

impl RecallDoor for McpDoor {
    async fn recall(&mut self, arguments: Value) -> Result<Value, String> {
        match self.0.call_tool("memory_recall", arguments).await {
            Ok(answer) if answer.is_error => Err(answer.content["error"]["kind"]
                .as_str()
                .unwrap_or("unknown")
                .to_owned()),
            Ok(answer) => Ok(answer.content),
            Err(error) => {
                tracing::warn!(%error, "a recall through the server was lost");
                Err("transport".to_owned())
            }
        }
    }
}

/// Writes and indexes every turn into `OUT/locomo-via-server.sqlite`, serves it with `memory_bin`
/// (else the `memory` binary beside this executable) and recalls every scored question in every mode
/// through the server: the report, and the answers per mode.
pub async fn measure(
    data: &str,
    conversations: &[Conversation],
    out: &Path,
    memory_bin: Option<&Path>,
    progress: &Progress,
) -> anyhow::Result<(LocomoReport, BTreeMap<&'static str, Vec<Answer>>)> {
    let binary = find_binary(memory_bin)?;
    std::fs::create_dir_all(out)?;
    let database = out.canonicalize()?.join("locomo-via-server.sqlite");
    // Written and indexed in process, then closed: the server is the store's only user.
    let IndexedStore { turns, seconds, .. } =
        indexed_store(&database, conversations, progress).await?;
    let spec = ServerSpec {
        target: Target {
            binary,
            db: database.display().to_string(),
            schema: None,
            assets: assets_dir(),
        },
        access: ServerAccess::AllowNamespace(
            json!({"name": NAMESPACE_NAME, "version": 1}).to_string(),
        ),
        log: out.join("locomo-via-server.log"),
        runtime_dir: None,
    };
    let mut server = Server::start(&spec, "127.0.0.1:0").await?;
    let answers = recall_through_server(&mut server, conversations, progress).await;
    server.stop(STOP_GRACE).await?;
    let answers = answers?;
    let report = LocomoReport::new(
        THROUGH_SERVER,
        data,
        conversations.len(),
        turns,
        seconds,
        &answers,
    );
    Ok((report, answers))
}

async fn recall_through_server(
    server: &mut Server,
    conversations: &[Conversation],
    progress: &Progress,
) -> anyhow::Result<BTreeMap<&'static str, Vec<Answer>>> {
    server.wait_ready(READY_TIMEOUT).await?;
    let session = ServerSession::connect(&Discovery {
        version: discovery::VERSION,
        url: server.url.clone(),
        pid: server.pid,
        token: None,
    })
    .await
    .with_context(|| format!("an MCP session with {}", server.url))?;
    let mut door = McpDoor(session);
    let answers = recall_through(&mut door, conversations, &MODES, progress, &direct_turns).await;
    door.0.close().await;
    answers
}
