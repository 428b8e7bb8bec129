//! `memory`: the command line and MCP server of the agent memory library. See `memory --help`.

use std::io::{BufReader, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use memory_cli::cli::{
    Cli, Command, ContextArgs, DestinationArgs, ImportArgs, ListArgs, OperationArgs, ServeArgs,
    ThreadCommand,
};
use memory_cli::context::one_shot_context;
use memory_cli::database::{Client, Database, Store, with_store};
use memory_cli::destination::{DestinationDefaults, local_principal};
use memory_cli::grants::Grant;
use memory_cli::import::{BatchWriter, ImportFailure, ImportObserver, LineRefusal, import};
use memory_cli::input::{MAX_INPUT_BYTES, ReadFailure, check_size, read_bounded};
use memory_cli::list::ListArguments;
use memory_cli::model_settings::ModelSettings;
use memory_cli::recall_service::Indexing;
use memory_cli::refusal::{Refusal, to_json};
use memory_cli::semantic::IndexOptions;
use memory_cli::serve::ServeOptions;
use memory_cli::service::{MemoryService, Operation, RawArguments, Request};
use memory_cli::settings::Settings;
use memory_cli::status::CommandStatus;
use memory_cli::thread::{ThreadOperation, ThreadRequest, ThreadService};
use memory_core::activity::ToolOutputBound;
use serde_json::Value;

const EXIT_UNEXPECTED: u8 = 1;
const EXIT_REFUSED: u8 = 2;

fn main() -> ExitCode {
    init_tracing();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // --help and --version.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            let _ = error.print();
            let refusal = Refusal::invalid_input(format!("command line: {}", error.kind()));
            // The hook's own command line (`memory hook --mode bogus`) is refused as a hook
            // refuses: no database is known yet to log it in, so standard error says it.
            if invoked_subcommand().as_deref() == Some("hook") {
                return memory_cli::hook::refused(None, None, &refusal);
            }
            return print_refusal(&refusal);
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("memory: {error:#}");
            ExitCode::from(EXIT_UNEXPECTED)
        }
    }
}

fn init_tracing() {
    // Logs go to standard error (standard output carries answers and the MCP protocol); off unless
    // MEMORY_LOG asks for them.
    let filter = tracing_subscriber::EnvFilter::try_from_env("MEMORY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The subcommand a command line that failed to parse names, as clap reads it when told to go past
/// errors: an argument that merely equals a subcommand's name (`--db hook`) is not one.
fn invoked_subcommand() -> Option<String> {
    use clap::CommandFactory as _;
    Cli::command()
        .ignore_errors(true)
        .try_get_matches()
        .ok()?
        .subcommand_name()
        .map(str::to_owned)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // A hook refused before it runs still answers as a hook does: exit 0, nothing on standard
    // output (see `hook::refused`).
    let hook_event = match &cli.command {
        Command::Hook(arguments) => Some(arguments.event),
        _ => None,
    };
    let refuse = |database: Option<&Database>, refusal: Refusal| match hook_event {
        Some(event) => memory_cli::hook::refused(database, event, &refusal),
        None => print_refusal(&refusal),
    };
    let database = match cli.database() {
        Ok(database) => database,
        Err(refusal) => return Ok(refuse(None, refusal)),
    };
    // Every setting checked once, before anything is opened.
    let settings = match cli.settings() {
        Ok(settings) => settings,
        Err(refusal) => return Ok(refuse(Some(&database), refusal)),
    };
    let model = match cli.model() {
        Ok(model) => model,
        Err(refusal) => return Ok(refuse(Some(&database), refusal)),
    };
    let operation = match cli.command {
        Command::Put(arguments) => (Operation::Put, arguments),
        Command::Withdraw(arguments) => (Operation::Withdraw, arguments),
        Command::Get(arguments) => (Operation::Get, arguments),
        Command::Recall(arguments) => (Operation::Recall, arguments),
        Command::Sync(arguments) => (Operation::Sync, arguments),
        Command::Import(arguments) => return run_import(&database, &arguments),
        Command::Serve(arguments) => {
            return run_serve(&database, settings, model.as_ref(), &arguments);
        }
        Command::List(arguments) => return run_list(&database, &arguments),
        Command::History(arguments) => return run_history(&database, arguments),
        Command::Doctor => return run_doctor(),
        Command::Status => return run_status(&database, settings.index),
        Command::Thread(command) => return run_thread(&database, settings.tool_output, command),
        Command::Context(arguments) if arguments.compact => {
            return run_compact(&database, model.as_ref(), &arguments);
        }
        Command::Context(arguments) => {
            return match arguments.tool_call() {
                Some(call) => run_context_tool(&database, &settings, &arguments, call),
                None => run_context(&database, settings, arguments),
            };
        }
        Command::Hook(arguments) => {
            return Ok(memory_cli::hook::run(&database, settings, arguments));
        }
    };
    run_operation(&database, operation.0, operation.1, settings)
}

fn run_operation(
    database: &Database,
    operation: Operation,
    arguments: OperationArgs,
    settings: Settings,
) -> anyhow::Result<ExitCode> {
    let text = match read_argument(arguments.json) {
        Ok(text) => text,
        Err(ReadFailure::Refused(refusal)) => return Ok(print_refusal(&refusal)),
        Err(ReadFailure::Io(error)) => {
            return Err(error).context("could not read the JSON argument");
        }
    };
    // Decoded before the store is opened: refused input touches no file and no server.
    let request = match Request::decode(operation, RawArguments::Text(&text)) {
        Ok(request) => request,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    // Only recall and sync may need the semantic index; writes and reads never open its tables.
    let semantic = matches!(operation, Operation::Recall | Operation::Sync);
    match database.open(Client::MEMORY) {
        Ok(opened) => with_store!(opened, store => answer(store, semantic, settings, request)),
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

/// `memory history`: a document's revisions through the one history read of the service. The
/// argument is decoded first, so refused input opens nothing.
fn run_history(database: &Database, arguments: OperationArgs) -> anyhow::Result<ExitCode> {
    let text = match read_argument(arguments.json) {
        Ok(text) => text,
        Err(ReadFailure::Refused(refusal)) => return Ok(print_refusal(&refusal)),
        Err(ReadFailure::Io(error)) => {
            return Err(error).context("could not read the JSON argument");
        }
    };
    if let Err(refusal) = RawArguments::Text(&text).decode::<memory_cli::wire::HistoryArguments>() {
        return Ok(print_refusal(&refusal));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("could not start the async runtime")?;
    let answer = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => {
            let service = MemoryService::open(store, &Settings::default(), Indexing::None)?;
            runtime.block_on(service.history_of(RawArguments::Text(&text)))
        })
    });
    print_answer(answer)
}

/// `memory thread append|forget|rebind`: like the operations, the argument is decoded (and a
/// destination resolved) before the database is opened, so refused input writes nothing.
fn run_thread(
    database: &Database,
    tool_output: ToolOutputBound,
    command: ThreadCommand,
) -> anyhow::Result<ExitCode> {
    let (operation, arguments, defaults) = match command {
        ThreadCommand::Append {
            argument,
            destination,
        } => match destination.defaults() {
            Ok(defaults) => (ThreadOperation::Append, argument, defaults),
            Err(refusal) => return Ok(print_refusal(&refusal)),
        },
        ThreadCommand::Forget(argument) => (
            ThreadOperation::Forget,
            argument,
            DestinationDefaults::default(),
        ),
        ThreadCommand::Rebind {
            thread,
            destination,
        } => return run_rebind(database, &thread, &destination),
    };
    let text = match read_argument(arguments.json) {
        Ok(text) => text,
        Err(ReadFailure::Refused(refusal)) => return Ok(print_refusal(&refusal)),
        Err(ReadFailure::Io(error)) => {
            return Err(error).context("could not read the JSON argument");
        }
    };
    let request = match ThreadRequest::decode(operation, RawArguments::Text(&text), &defaults) {
        Ok(request) => request,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    with_thread_service(database, tool_output, |service| async move {
        service.run_as(&cli_grant(), request).await
    })
}

/// `memory context THREAD --budget TOKENS`: the arguments are checked before the database is opened.
fn run_context(
    database: &Database,
    settings: Settings,
    arguments: ContextArgs,
) -> anyhow::Result<ExitCode> {
    let budget = arguments.budget.unwrap_or_default();
    let checked = (|| -> Result<_, Refusal> {
        let thread = memory_core::activity::ThreadId::new(arguments.thread.clone())?;
        memory_context::view::check_budget(budget)?;
        let defaults = arguments.destination.defaults()?;
        let tokenizer = match &arguments.tokenizer {
            Some(path) => Some(Arc::new(
                semantic_index::TokenizerCounter::from_file(path).map_err(Refusal::from)?,
            ) as Arc<dyn memory_core::TokenCounter>),
            None => None,
        };
        Ok((thread, defaults, tokenizer))
    })();
    let (thread, defaults, tokenizer) = match checked {
        Ok(checked) => checked,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("could not start the async runtime")?;
    let memory = (!arguments.no_memory).then_some(&defaults);
    let answer = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => runtime.block_on(one_shot_context(
            store,
            settings,
            tokenizer,
            thread,
            budget,
            arguments.query.clone(),
            memory,
            !arguments.no_rollover,
        )))
        .and_then(|assembled| to_json(&assembled))
    });
    runtime.shutdown_background();
    print_answer(answer)
}

/// `memory context THREAD --new-context | --remaining | --read-notes | --write-notes TEXT |
/// --history | --search TEXT`: the context tool the flags name, run as the MCP tool runs it.
fn run_context_tool(
    database: &Database,
    settings: &Settings,
    arguments: &ContextArgs,
    (operation, call): (memory_cli::context::ContextOperation, Value),
) -> anyhow::Result<ExitCode> {
    let context = match memory_cli::settings::ContextSettings::new(
        arguments.context_budget,
        arguments.context_capacity,
        arguments.notes_id.clone(),
    ) {
        Ok(context) => context,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let defaults = match arguments.destination.defaults() {
        Ok(defaults) => defaults,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("could not start the async runtime")?;
    let answer = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => {
            let service = MemoryService::open(Arc::clone(&store), settings, Indexing::None)?;
            let tools = memory_cli::context::ContextTools::new(store, defaults).with_settings(context);
            runtime.block_on(tools.execute_as(
                &cli_grant(),
                operation,
                RawArguments::Json(call),
                &service,
            ))
        })
    });
    runtime.shutdown_background();
    print_answer(answer)
}

/// `memory context THREAD --compact`: one compaction whose summary the model of `--model-url` writes.
fn run_compact(
    database: &Database,
    model: Option<&ModelSettings>,
    arguments: &ContextArgs,
) -> anyhow::Result<ExitCode> {
    let checked = (|| -> Result<_, Refusal> {
        let thread = memory_core::activity::ThreadId::new(arguments.thread.clone())?;
        let request = memory_context::CompactionRequest {
            measured_input_tokens: arguments.measured_input_tokens,
            keep_tokens: arguments
                .keep_tokens
                .unwrap_or(memory_cli::context::DEFAULT_KEEP_TOKENS),
            through: None,
            summarizer: None,
        };
        request.measured()?;
        let model = model
            .ok_or_else(|| {
                Refusal::invalid_input(
                    "--compact asks a model for the summary: name it with --model-url and --model \
                     (or MEMORY_MODEL_URL and MEMORY_MODEL)",
                )
            })?
            .open()?;
        Ok((thread, request, model))
    })();
    let (thread, request, model) = match checked {
        Ok(checked) => checked,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let answer = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => runtime.block_on(
            memory_cli::context::one_shot_compact(store, thread, request, model)
        ))
    });
    runtime.shutdown_background();
    print_answer(answer)
}

/// `memory thread rebind THREAD`.
fn run_rebind(
    database: &Database,
    thread: &str,
    destination: &DestinationArgs,
) -> anyhow::Result<ExitCode> {
    let resolved = destination.defaults().and_then(|defaults| {
        defaults.resolve(&memory_cli::destination::DestinationRequest::default())
    });
    let (thread, destination) = match (
        memory_core::activity::ThreadId::new(thread).map_err(Refusal::from),
        resolved,
    ) {
        (Ok(thread), Ok(resolved)) => (thread, resolved.destination),
        (Err(refusal), _) | (_, Err(refusal)) => return Ok(print_refusal(&refusal)),
    };
    with_thread_service(
        database,
        ToolOutputBound::default(),
        move |service| async move { to_json(&service.rebind(thread, destination).await?) },
    )
}

/// Opens `database`'s thread service (bounding tool outputs at `tool_output`), runs `call` on it and
/// prints its answer.
fn with_thread_service<F, Fut>(
    database: &Database,
    tool_output: ToolOutputBound,
    call: F,
) -> anyhow::Result<ExitCode>
where
    F: FnOnce(ThreadService) -> Fut,
    Fut: std::future::Future<Output = Result<Value, Refusal>>,
{
    let service = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => ThreadService::open(&*store))
            .map(|service| service.with_tool_output_bound(tool_output))
    });
    let service = match service {
        Ok(service) => service,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("could not start the async runtime")?;
    print_answer(runtime.block_on(call(service)))
}

/// The command line's grant: everything the file's permissions let this process open, held by the
/// local user (who its withdrawals name).
fn cli_grant() -> Grant {
    Grant::local("cli", local_principal(None))
}

/// Runs one decoded request and prints its answer; with `semantic`, over the semantic index too.
fn answer<S: Store>(
    store: Arc<S>,
    semantic: bool,
    settings: Settings,
    request: Request,
) -> anyhow::Result<ExitCode> {
    let indexing = if semantic {
        Indexing::CatchUp
    } else {
        Indexing::None
    };
    let service = match MemoryService::open(Arc::clone(&store), &settings, indexing) {
        Ok(service) => service,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let read_only = matches!(request, Request::Recall(_) | Request::Get(..));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("could not start the async runtime")?;
    let answer = runtime.block_on(service.run_as(&cli_grant(), request));
    // A recall refused at its deadline may leave a store call running on the blocking pool; its answer
    // is discarded, and waiting for it would hold the refusal's exit up. Every write was awaited above.
    runtime.shutdown_background();
    let code = match answer {
        Ok(answer) => {
            print_json(&answer)?;
            ExitCode::SUCCESS
        }
        Err(refusal) => print_refusal(&refusal),
    };
    if read_only {
        // The answer is out and the process is about to exit: a read leaves the loaded index and
        // model to the exit instead of freeing them one allocation at a time (0.3 s of a 1.2 s
        // one-shot recall at 100,000 chunks). A read wrote nothing, so nothing is left unflushed.
        std::mem::forget(service);
    }
    Ok(code)
}

/// The argument inline, or standard input for `-`. Nothing reads standard input too, except that a
/// terminal or an empty input stands for `{}`: whoever typed `memory sync` means `{}`, not a wait.
fn read_argument(inline: Option<String>) -> Result<Vec<u8>, ReadFailure> {
    match inline.as_deref() {
        Some("-") => read_bounded(std::io::stdin().lock(), MAX_INPUT_BYTES),
        Some(text) => {
            check_size("input bytes", text.len(), MAX_INPUT_BYTES)?;
            Ok(inline.unwrap_or_default().into_bytes())
        }
        None if std::io::stdin().is_terminal() => Ok(b"{}".to_vec()),
        None => {
            let text = read_bounded(std::io::stdin().lock(), MAX_INPUT_BYTES)?;
            Ok(if text.is_empty() {
                b"{}".to_vec()
            } else {
                text
            })
        }
    }
}

fn run_import(database: &Database, arguments: &ImportArgs) -> anyhow::Result<ExitCode> {
    let file = std::fs::File::open(&arguments.file)
        .with_context(|| format!("could not open {}", arguments.file.display()))?;
    let length = file.metadata().map(|metadata| metadata.len()).ok();
    let reader = BufReader::with_capacity(1 << 20, file);
    match database.open(Client::MEMORY) {
        Ok(opened) => with_store!(opened, store => import_into(reader, length, &*store)),
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

fn import_into(
    reader: impl std::io::BufRead,
    length: Option<u64>,
    store: &impl BatchWriter,
) -> anyhow::Result<ExitCode> {
    let mut observer = ImportProgress::new(length);
    let outcome = import(reader, store, &mut observer);
    observer.finish();
    match outcome {
        Ok(summary) => {
            print_json(&serde_json::to_value(summary)?)?;
            Ok(if summary.refused == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_REFUSED)
            })
        }
        Err(ImportFailure::Batch { summary, refusal }) => {
            eprintln!(
                "memory: import stopped after {} written, {} replayed, {} refused lines",
                summary.written, summary.replayed, summary.refused
            );
            Ok(print_refusal(&refusal))
        }
        Err(error @ ImportFailure::Read(_)) => Err(error.into()),
    }
}

/// Reports refused lines on standard error and, on a terminal, draws a progress bar there.
struct ImportProgress {
    bar: Option<ProgressBar>,
}

impl ImportProgress {
    fn new(length: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(length.unwrap_or(0));
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self { bar }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl ImportObserver for ImportProgress {
    fn advanced(&mut self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
        }
    }

    fn refused(&mut self, refusal: LineRefusal) {
        let report = refusal.to_json().to_string();
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{report}")),
            None => eprintln!("{report}"),
        }
    }
}

fn run_status(database: &Database, index: IndexOptions) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("could not start the async runtime")?;
    let answer = database.open(Client::MEMORY).and_then(|opened| {
        with_store!(opened, store => store.open_vectors().and_then(|vectors| {
            runtime.block_on(memory_cli::status::status(store, vectors, index))
        }))
    });
    runtime.shutdown_background();
    match answer.and_then(|status| to_json(&CommandStatus::with_hooks(status, database))) {
        Ok(value) => {
            print_json(&value)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

fn run_serve(
    database: &Database,
    settings: Settings,
    model: Option<&ModelSettings>,
    arguments: &ServeArgs,
) -> anyhow::Result<ExitCode> {
    // Flags are checked before the store is opened: a refused one touches no file and no server.
    let options = match ServeOptions::new(database, arguments).and_then(|options| {
        Ok(options
            .with_tool_output_bound(settings.tool_output)
            .with_summarizer(model.map(ModelSettings::open).transpose()?))
    }) {
        Ok(options) => options,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    match database.open(Client::MEMORY) {
        Ok(opened) => with_store!(opened, store => serve(runtime, store, settings, options)),
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

/// Serves `store`: the semantic index follows the store's feed ([`Store::follow`]: a SQLite file is
/// followed through the store itself, woken by this server's commits; a PostgreSQL database through
/// LISTEN/NOTIFY, since other servers and hosts write to it too).
fn serve<S: Store>(
    runtime: tokio::runtime::Runtime,
    store: Arc<S>,
    settings: Settings,
    options: ServeOptions,
) -> anyhow::Result<ExitCode> {
    let opened = runtime
        .block_on(S::follow(Arc::clone(&store)))
        .and_then(|following| {
            MemoryService::open(store, &settings, Indexing::Following(following))
        });
    let service = match opened {
        Ok(service) => service,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let served = runtime.block_on(memory_cli::serve::serve(service, options));
    // Standard input may still hold a blocked read on the runtime's blocking pool; do not wait for it.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// `memory list`: the namespace and the argument are checked before the store is opened.
fn run_list(database: &Database, arguments: &ListArgs) -> anyhow::Result<ExitCode> {
    let namespace = match arguments.defaults.namespace() {
        Ok(Some(namespace)) => namespace,
        Ok(None) => {
            return Ok(print_refusal(&Refusal::invalid_input(
                "memory list needs --namespace JSON (or MEMORY_NAMESPACE)",
            )));
        }
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let text = match read_argument(arguments.json.clone()) {
        Ok(text) => text,
        Err(ReadFailure::Refused(refusal)) => return Ok(print_refusal(&refusal)),
        Err(ReadFailure::Io(error)) => {
            return Err(error).context("could not read the JSON argument");
        }
    };
    let list_arguments: ListArguments = match memory_cli::input::decode_bytes(&text) {
        Ok(list_arguments) => list_arguments,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    match database.open(Client::MEMORY) {
        Ok(opened) => with_store!(opened, store => list_answer(store, &namespace, list_arguments)),
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

fn list_answer<S: Store>(
    store: Arc<S>,
    namespace: &memory_core::DynamicNamespace,
    arguments: ListArguments,
) -> anyhow::Result<ExitCode> {
    let service = match MemoryService::open(store, &Settings::default(), Indexing::None) {
        Ok(service) => service,
        Err(refusal) => return Ok(print_refusal(&refusal)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("could not start the async runtime")?;
    let answer = runtime.block_on(memory_cli::list::list(&service, namespace, None, arguments));
    match answer.and_then(|page| to_json(&page)) {
        Ok(value) => {
            print_json(&value)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

/// `memory doctor`: exit 0 when a complete assets folder is found, 2 otherwise.
fn run_doctor() -> anyhow::Result<ExitCode> {
    let report = memory_cli::doctor::doctor();
    // Hybrid recall reranks with the model by default, so its files count as the embedder's do.
    let complete = report.assets.complete && report.assets.rerank_model.verified;
    print_json(&serde_json::to_value(report)?)?;
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    })
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, value).context("could not write the answer")?;
    stdout
        .write_all(b"\n")
        .and_then(|()| stdout.flush())
        .context("could not write the answer")
}

/// Prints a command's answer, or its refusal (exit 2).
fn print_answer(answer: Result<Value, Refusal>) -> anyhow::Result<ExitCode> {
    match answer {
        Ok(answer) => {
            print_json(&answer)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => Ok(print_refusal(&refusal)),
    }
}

fn print_refusal(refusal: &Refusal) -> ExitCode {
    match print_json(&refusal.to_json()) {
        Ok(()) => ExitCode::from(EXIT_REFUSED),
        Err(error) => {
            eprintln!("memory: {error:#}");
            ExitCode::from(EXIT_UNEXPECTED)
        }
    }
}
