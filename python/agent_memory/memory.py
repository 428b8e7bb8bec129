"""``Memory`` and ``AsyncMemory``: the engine in-process.

Every method is one call of memory-cli's services (the ones the ``memory`` binary and the MCP server
run) through the extension ``agent_memory._native``; nothing here decides what is stored or recalled.
The GIL is released while Rust works, so threads share one ``Memory``; ``AsyncMemory`` runs each call
in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any, Iterable, Mapping, Sequence

from . import _native
from .errors import InvalidInputError

__all__ = ["Memory", "AsyncMemory", "doctor", "record_of", "revision_record"]

Namespace = Mapping[str, Any]

# The simple search's limits (memory-cli's `memory_search`): 8,000 bytes, 2,000 tokens, 10 s.
SEARCH_MAX_BYTES = 8_000
SEARCH_MAX_TOKENS = 2_000
SEARCH_TIMEOUT_MS = 10_000


def doctor() -> dict[str, Any]:
    """``memory doctor``: where the model assets are looked for, what is missing, the fix command."""
    return json.loads(_native.doctor())


def _dumps(arguments: Any) -> str:
    try:
        return json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"arguments are not JSON: {error}") from None


def _namespace(namespace: str | Namespace | None) -> dict[str, Any] | None:
    if namespace is None:
        return None
    if isinstance(namespace, str):
        return {"name": namespace, "version": 1, "identity": None}
    if isinstance(namespace, Mapping):
        return dict(namespace)
    raise InvalidInputError("namespace: give a name or {name, version, identity}")


def record_of(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A wire document as a mem0-style record: ``id``, ``memory`` (the text), ``revision``, ..."""
    if document is None:
        return None
    content = document.get("content") or {}
    return {
        "id": document["id"],
        "memory": content.get("text", ""),
        "revision": document["revision"],
        "predecessor": document.get("predecessor"),
        "namespace": document.get("namespace"),
        "scopes": document.get("scopes", []),
        "metadata": content.get("metadata", {}),
        "attributions": content.get("attributions", []),
        "locator": document.get("locator"),
        "created_at": content.get("recorded_at"),
        "updated_at": document.get("modified_at"),
        "withdrawn": document.get("withdrawn"),
    }


def revision_record(id: str, revision: Mapping[str, Any]) -> dict[str, Any]:
    """A wire revision (``memory history``) as a mem0-style history record."""
    content = revision.get("content")
    return {
        "id": id,
        "revision": revision["revision"],
        "predecessor": revision.get("predecessor"),
        "memory": None if content is None else content.get("text", ""),
        "attributions": [] if content is None else content.get("attributions", []),
        "metadata": {} if content is None else content.get("metadata", {}),
        "locator": revision.get("locator"),
        "scopes": revision.get("scopes", []),
        "updated_at": revision.get("modified_at"),
        "withdrawn": revision.get("withdrawn"),
    }


def _passage_result(passage: Mapping[str, Any]) -> dict[str, Any]:
    content = passage.get("content") or {}
    source = passage.get("source") or {}
    return {
        "id": source.get("id"),
        "memory": content.get("text", ""),
        "score": passage.get("score"),
        "revision": source.get("revision"),
        "citation": passage.get("citation"),
        "passage_id": passage.get("passage_id"),
        "metadata": content.get("metadata", {}),
        "attributions": content.get("attributions", []),
    }


class Memory:
    """The memory of one namespace and scope, in-process.

    ``db`` is a SQLite path (created when missing) or a ``postgres://`` URL (``schema`` optional), as
    ``memory --db`` takes it. ``namespace`` is ``{"name", "version", "identity"}`` (or a bare name,
    version 1 and no identity); without one the per-user namespace of ``user`` (else of
    ``MEMORY_USER``, else of the OS user) is used, as ``memory hook`` does, and a thread call that
    names no destination binds there too. ``scope`` defaults to ``agent``.

    The settings ``memory`` takes as flags are keyword arguments here, each read from the same
    ``MEMORY_*`` variable when not given, and checked by the same rule (a bad one raises
    ``InvalidInputError`` before the database is opened): ``max_chunks`` (``MEMORY_MAX_CHUNKS``,
    the semantic index's capacity), ``compact_vectors`` (``MEMORY_COMPACT_VECTORS``, int8 codes
    in memory), ``hnsw_ef_search`` (``MEMORY_HNSW_EF_SEARCH``, the HNSW search width) and
    ``max_tool_output_bytes`` (``MEMORY_MAX_TOOL_OUTPUT_BYTES``, the stored bound of a tool
    result's output); ``rerank_model`` (``MEMORY_RERANK_MODEL``, ``"on"`` by default or
    ``"off"``) says whether hybrid recall's rerank stage loads its cross-encoder (without it the
    stage ranks by the signals recall already has; with it, missing model files raise
    ``UnavailableError`` naming ``scripts/fetch-assets.sh``). ``context_budget`` and ``context_capacity`` (``MEMORY_CONTEXT_BUDGET``,
    ``MEMORY_CONTEXT_CAPACITY``, as ``memory serve --context-budget --context-capacity``) are what
    :meth:`context_remaining` measures against and reports; ``notes_id`` (``MEMORY_NOTES_ID``) the
    id of each thread's notes document (default ``notes/{thread}``). ``corrections`` (``MEMORY_CORRECTIONS``, as ``remembering-worker
    --corrections``: ``words``, ``model`` or ``off``) says how ``remember_once`` links a correcting
    statement to the memory it corrects. ``model_url`` and ``model`` (``MEMORY_MODEL_URL``,
    ``MEMORY_MODEL``, as ``remembering-worker --model-url --model``) name an OpenAI-compatible
    chat-completions endpoint whose model ``remember_once`` asks for memories instead of the
    statement extractor (only what the user said in the quoted words is kept); ``model_key_file``
    (``MEMORY_MODEL_KEY_FILE``) a file holding its key, ``model_fallback`` (``MEMORY_MODEL_FALLBACK``:
    ``none`` or ``statements``) what happens to a record when the model fails, and
    ``model_timeout_ms`` (``MEMORY_MODEL_TIMEOUT_MS``) the limit of one attempt.

    The process is the host: it holds every grant on the database it opens (the file's
    permissions, or the PostgreSQL role, bound what it can reach), and a withdrawal names ``user``
    (else ``MEMORY_USER``, else the OS user) as who asked.
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        namespace: str | Namespace | None = None,
        scope: str | None = None,
        user: str | None = None,
        schema: str | None = None,
        max_chunks: int | None = None,
        compact_vectors: bool | None = None,
        hnsw_ef_search: int | None = None,
        max_tool_output_bytes: int | None = None,
        rerank_model: str | None = None,
        corrections: str | None = None,
        model_url: str | None = None,
        model: str | None = None,
        model_key_file: str | os.PathLike[str] | None = None,
        model_fallback: str | None = None,
        model_timeout_ms: int | None = None,
        context_budget: int | None = None,
        context_capacity: int | None = None,
        notes_id: str | None = None,
    ) -> None:
        self.db = os.fspath(db)
        self._schema = schema
        settings = {
            "max_chunks": max_chunks,
            "compact_vectors": compact_vectors,
            "hnsw_ef_search": hnsw_ef_search,
            "max_tool_output_bytes": max_tool_output_bytes,
            "rerank_model": rerank_model,
            "corrections": corrections,
            "context_budget": context_budget,
            "context_capacity": context_capacity,
            "notes_id": notes_id,
            "model": {
                "url": model_url,
                "model": model,
                "key_file": None if model_key_file is None else os.fspath(model_key_file),
                "fallback": model_fallback,
                "timeout_ms": model_timeout_ms,
            },
        }
        self._engine = _native.Engine(self.db, schema, user, _dumps(settings))
        resolved = self.call(
            "resolve",
            {
                "namespace": _namespace(namespace),
                "scope": scope,
                "user": user if namespace is None else None,
            },
        )
        self.namespace: dict[str, Any] = resolved["namespace"]
        self.scope: str = resolved["scope"]
        # Who this memory's user is (``user``, else ``MEMORY_USER``, else the OS user; ``None`` when
        # none is known), and who speaks their words when a call names no speaker: the rule
        # ``memory hook`` follows, so the same words through either door are one statement.
        self.user: str | None = self._engine.user
        self._speaker: str = self._engine.speaker

    # The raw door: one operation of the engine, arguments and answer as the wire JSON.
    def call(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        """Runs one engine operation with wire-form ``arguments`` and returns its wire answer."""
        return json.loads(self._engine.call(operation, _dumps(arguments)))

    def _simple(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        return self.call(
            operation,
            {"namespace": self.namespace, "scope": self.scope, "arguments": arguments},
        )

    # ---- the simple API (mem0-like) --------------------------------------------------------------

    def add(
        self,
        data: str | Sequence[str | Mapping[str, Any]],
        *,
        user: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> dict[str, Any]:
        """Remembers ``data``: a text, or messages (``{"role", "content"}`` dicts or strings), one
        memory per non-empty message, attributed to its speaker (this memory's ``user`` for the
        user's own messages). Adding the same text again stores it once (``replayed``). Empty or
        whitespace-only text raises ``InvalidInputError``; an ``id`` naming an existing memory raises
        ``ConflictError`` (``update`` replaces it). Returns ``{"results": [record + "replayed"]}``."""
        if isinstance(data, str):
            items: list[tuple[str, str]] = [(data, user or self._speaker)]
        else:
            if id is not None:
                raise InvalidInputError("id: give it with a single text, not messages")
            items = []
            for message in data:
                if isinstance(message, str):
                    items.append((message, user or self._speaker))
                elif isinstance(message, Mapping):
                    role = str(message.get("role", "user"))
                    speaker = (user or self._speaker) if role == "user" else role
                    items.append((str(message.get("content", "")), speaker))
                else:
                    raise InvalidInputError("messages: each is a string or {role, content}")
            items = [(text, speaker) for text, speaker in items if text.strip()]
        results = []
        for text, speaker in items:
            arguments: dict[str, Any] = {"text": text, "speaker": speaker}
            if metadata is not None:
                arguments["metadata"] = dict(metadata)
            if id is not None:
                arguments["id"] = id
            answer = self._simple("remember", arguments)
            record = record_of(answer["document"])
            assert record is not None
            record["replayed"] = answer["replayed"]
            results.append(record)
        return {"results": results}

    def search(self, query: str, *, limit: int = 5, mode: str = "hybrid") -> dict[str, Any]:
        """Recalls up to ``limit`` passages (1 to 50) for ``query`` in ``mode`` (``hybrid``,
        ``lexical``, ``exact``, ``hnsw`` or ``recent``), within 8,000 bytes, 2,000 tokens and 10 s.
        Returns ``{"results": [...], "text": the cited block, "answered_by": ...}``; each result has
        ``id``, ``memory``, ``score``, ``revision``, ``citation``, ``attributions``, ``metadata``."""
        answer = self._simple("search", {"query": query, "limit": limit, "mode": mode})
        return {
            "results": [_passage_result(p) for p in answer["passages"]],
            "text": answer["text"],
            "answered_by": answer.get("answered_by"),
        }

    def get(self, id: str) -> dict[str, Any] | None:
        """The current memory ``id`` as a record, or ``None`` (never written, or deleted)."""
        answer = self.call("get", {"namespace": self.namespace, "id": id})
        return record_of(answer["document"])

    def get_all(self, *, cursor: str | None = None, limit: int = 20) -> dict[str, Any]:
        """One page of the namespace's memories, newest first (1 to 100 a page):
        ``{"results": [...], "next_cursor": str | None}``."""
        answer = self._simple("list", {"cursor": cursor, "limit": limit})
        return {
            "results": [record_of(d) for d in answer["documents"]],
            "next_cursor": answer["next_cursor"],
        }

    def update(
        self,
        id: str,
        text: str,
        *,
        expected_revision: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Replaces memory ``id``'s text (its metadata kept unless given). With
        ``expected_revision`` the write is refused (``ConflictError``) unless that is still the
        current revision. ``NotFoundError`` when there is no current memory ``id``."""
        arguments: dict[str, Any] = {"id": id, "text": text}
        if expected_revision is not None:
            arguments["expected_revision"] = expected_revision
        if metadata is not None:
            arguments["metadata"] = dict(metadata)
        arguments["speaker"] = self._speaker
        answer = self._simple("update", arguments)
        record = record_of(answer["document"])
        assert record is not None
        record["replayed"] = answer["replayed"]
        return record

    def delete(self, id: str, *, reason: str) -> dict[str, Any]:
        """Withdraws memory ``id`` for good (``NotFoundError`` when there is none). Returns the
        withdrawn record."""
        answer = self._simple("forget", {"id": id, "reason": reason})
        record = record_of(answer["document"])
        assert record is not None
        return record

    def history(self, id: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Every change of memory ``id``, newest first (up to ``limit``, default 100): one record per
        revision with ``revision``, ``predecessor``, ``memory`` (the text), ``attributions`` (who
        said it), ``metadata``, ``updated_at`` (when, epoch ms) and ``withdrawn`` (``{"reason"}`` on
        a deletion's tombstone). ``memory`` is ``None`` for the tombstone and for a revision whose
        words are no longer kept: past the store's bound of revisions per document
        (``MEMORY_MAX_REVISIONS``, default 100), or after a ``delete`` (which drops the words of
        every revision). Empty when ``id`` was never written."""
        arguments: dict[str, Any] = {"id": id}
        if limit is not None:
            arguments["limit"] = limit
        answer = self._simple("history", arguments)
        return [revision_record(id, r) for r in answer["revisions"]]

    # ---- the precise API ------------------------------------------------------------------------

    def put(
        self,
        id: str,
        text: str,
        *,
        operation_id: str | None = None,
        expected_revision: str | None = None,
        scopes: Iterable[str] | None = None,
        locator: str = "python",
        attributions: Sequence[Mapping[str, Any]] | None = None,
        metadata: Mapping[str, Any] | None = None,
        recorded_at: int | None = None,
        extracted_at: int | None = None,
        namespace: str | Namespace | None = None,
    ) -> dict[str, Any]:
        """``memory_put``: creates (``expected_revision=None``) or replaces exactly
        ``expected_revision``. ``operation_id`` is the idempotency key (a fresh one when omitted):
        the same command again returns the first receipt with ``replayed: True``; another command
        under it is an ``OperationConflictError``. Returns the receipt ``{revision, replayed,
        document}``."""
        import time

        now = int(time.time() * 1000)
        return self.call(
            "put",
            {
                "namespace": _namespace(namespace) or self.namespace,
                "id": id,
                "operation_id": operation_id or f"py-{uuid.uuid4().hex}",
                "expected_revision": expected_revision,
                "locator": locator,
                "scopes": list(scopes) if scopes is not None else [self.scope],
                "content": {
                    "text": text,
                    "attributions": [dict(a) for a in attributions or []],
                    "metadata": dict(metadata or {}),
                    "recorded_at": now if recorded_at is None else recorded_at,
                    "extracted_at": now if extracted_at is None else extracted_at,
                },
            },
        )

    def withdraw(
        self,
        id: str,
        *,
        expected_revision: str,
        reason: str,
        operation_id: str | None = None,
        namespace: str | Namespace | None = None,
    ) -> dict[str, Any]:
        """``memory_withdraw``: withdraws exactly ``expected_revision``. Returns the receipt."""
        return self.call(
            "withdraw",
            {
                "namespace": _namespace(namespace) or self.namespace,
                "id": id,
                "operation_id": operation_id or f"py-{uuid.uuid4().hex}",
                "expected_revision": expected_revision,
                "reason": reason,
            },
        )

    def read(self, id: str, *, namespace: str | Namespace | None = None) -> dict[str, Any] | None:
        """``memory_get``: the current wire document of ``id``, or ``None``."""
        answer = self.call("get", {"namespace": _namespace(namespace) or self.namespace, "id": id})
        return answer["document"]

    def recall(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        max_items: int = 5,
        max_sources: int | None = None,
        max_bytes: int = SEARCH_MAX_BYTES,
        max_tokens: int = SEARCH_MAX_TOKENS,
        timeout_ms: int = SEARCH_TIMEOUT_MS,
        scope: str | None = None,
        namespace: str | Namespace | None = None,
        rerank: bool | None = None,
    ) -> dict[str, Any]:
        """``memory_recall`` with every limit: the rendered, cited ``text``, the ``passages`` in
        citation order, each source's ``outcomes`` and ``answered_by``. A passage that a statement
        corrects in words ("actually ...") comes right after its correction and names it in
        ``corrected_by`` (``memory:N``). A hybrid recall's passage also says what each ranking gave
        its document, ``rankings: {"lexical": BM25 or None, "embedding": cosine or None}``, beside
        its fused ``score``. ``rerank`` turns hybrid recall's rerank stage on or off
        (``None``: the default, on for hybrid); ``True`` with another mode is refused."""
        limits: dict[str, Any] = {
            "max_items": max_items,
            "max_bytes": max_bytes,
            "max_tokens": max_tokens,
            "timeout_ms": timeout_ms,
        }
        if max_sources is not None:
            limits["max_sources"] = max_sources
        arguments: dict[str, Any] = {
            "namespace": _namespace(namespace) or self.namespace,
            "scope": scope or self.scope,
            "query": query,
            "mode": mode,
            "limits": limits,
        }
        if rerank is not None:
            arguments["rerank"] = rerank
        return self.call("recall", arguments)

    def sync(self) -> dict[str, Any]:
        """``memory_sync``: returns once every committed write is searchable in every mode
        (``{"indexed", "unindexed"}``); loads the model when there is something to embed."""
        return self.call("sync", {})

    def status(self) -> dict[str, Any]:
        """``memory status``: what the store and its semantic index hold, read without the model:
        ``head``, ``indexed``, ``behind``, ``chunks`` (``live``, ``capacity``, ``encoding``: ``f32``
        or ``int8``), ``unindexed``, ``hnsw`` (``state``, ``ef_search``) and ``threads``. The index
        is opened with this ``Memory``'s settings, so ``capacity``, ``encoding`` and ``ef_search``
        are the index's own under them. ``threads.extraction.corrections`` counts the correcting
        statements the worker ``linked`` and ``refused``."""
        return self.call("status", {})

    def append(
        self,
        thread: str,
        text: str | None = None,
        *,
        role: str = "user",
        speaker: str | None = None,
        record: Mapping[str, Any] | None = None,
        occurred_at: int | None = None,
    ) -> dict[str, Any]:
        """``memory_thread_append``: one record of conversation activity on ``thread``, bound to
        this memory's namespace and scope (the worker remembers the thread there). ``text`` with
        ``role`` ``user`` (a user input) or ``assistant``; or a whole wire ``record``. Returns
        ``{thread, sequence, digest}``."""
        if record is None:
            if text is None:
                raise InvalidInputError("append: give text or a record")
            kind = {"user": "user_input", "assistant": "assistant_message"}.get(role)
            if kind is None:
                raise InvalidInputError("role: user or assistant (or give a record)")
            record = {
                "speaker": speaker or (self._speaker if role == "user" else "assistant"),
                "body": {"kind": kind, "text": text},
                "occurred_at": occurred_at,
            }
        return self.call(
            "thread_append",
            {
                "thread": thread,
                "record": dict(record),
                "namespace": self.namespace,
                "scope": self.scope,
            },
        )

    def forget(
        self, thread: str, sequence: int, *, reason: str, event: str = "forget"
    ) -> dict[str, Any]:
        """``memory_thread_forget``: from its answer on, nothing record ``sequence`` contributed is
        recalled; the worker's next pass withdraws it. Returns ``{thread, sequence, event,
        cleanup}``."""
        return self.call(
            "thread_forget",
            {"thread": thread, "sequence": sequence, "reason": reason, "event": event},
        )

    def context(
        self,
        thread: str,
        budget: int,
        *,
        query: str | None = None,
        memory: bool = True,
        rollover: bool = True,
    ) -> dict[str, Any]:
        """``memory_context``: ``thread``'s current turn as model input within ``budget`` tokens:
        ``messages`` (system instructions, a window marker after a rollover, the summary of
        compacted records in its frame, the newest segments that fit, never a tool call without its
        result; the thread's working notes; then the memory recalled for ``query``, else the current
        prompt, as a last user message), ``memory``, ``notes``, ``view`` (``tokens``, ``dropped``,
        ``elided``, ``fits``, ``window``), ``tokens`` and ``fold``. A retried turn reuses the memory
        it loaded; ``memory=False`` skips the recall. When eliding old tool outputs is not enough for
        a long current turn, the window rolls over by itself; ``rollover=False`` drops the turn's
        oldest settled steps from the view instead."""
        arguments: dict[str, Any] = {
            "thread": thread,
            "budget": budget,
            "memory": memory,
            "rollover": rollover,
        }
        if query is not None:
            arguments["query"] = query
        return self.call("context", arguments)

    def new_context(self, thread: str, *, handoff: str | None = None) -> dict[str, Any]:
        """``memory_new_context``: starts a fresh window for ``thread``, with ``handoff`` (at most
        20,000 characters) or, without one, short excerpts of what it covers. Returns
        ``rolled_over``, ``window``, and the boundary's ``sequence`` and ``rollover`` record;
        ``rolled_over`` is false (nothing appended) when there is nothing to cover."""
        arguments: dict[str, Any] = {"thread": thread}
        if handoff is not None:
            arguments["handoff"] = handoff
        return self.call("new_context", arguments)

    def context_remaining(self, thread: str, *, budget: int | None = None) -> dict[str, Any]:
        """``memory_context_remaining``: ``window``, ``budget`` (``budget``, else
        ``context_budget=``), ``capacity`` (``context_capacity=``, else ``None``), ``live_tokens``,
        ``remaining_tokens``, the ``view`` under the budget and what goes first when the window
        grows (``next_elided``, ``next_dropped``)."""
        arguments: dict[str, Any] = {"thread": thread}
        if budget is not None:
            arguments["budget"] = budget
        return self.call("context_remaining", arguments)

    def read_notes(self, thread: str) -> dict[str, Any]:
        """``memory_read_notes``: ``thread``'s working notes: ``text`` ("" when none) and the
        ``revision`` to pass back when writing them (``None`` when none yet)."""
        return self.call("read_notes", {"thread": thread})

    def write_notes(
        self, thread: str, text: str, *, expected_revision: str | None
    ) -> dict[str, Any]:
        """``memory_write_notes``: replaces ``thread``'s notes with ``text`` (at most 20,000
        characters), expecting ``expected_revision`` (``None`` for the first notes). Notes changed
        since raise ``ConflictError``: read them again, merge, write with the new revision."""
        return self.call(
            "write_notes",
            {"thread": thread, "text": text, "expected_revision": expected_revision},
        )

    def compact(
        self,
        thread: str,
        *,
        measured_input_tokens: int | None,
        keep_tokens: int | None = None,
        summary: str | None = None,
        through: int | None = None,
        summarizer: str | None = None,
        summarizer_failed: str | None = None,
        forgotten: list[int] | None = None,
        summarize: bool = False,
    ) -> dict[str, Any]:
        """``memory_compact``: compacts ``thread``'s window, never its log.
        ``measured_input_tokens`` (the provider's count for the last call) is required: ``None`` or
        ``0`` is refused. Without ``summary``: returns ``{"plan": {through, folded, refusals,
        replaced_chars, messages}}`` and appends nothing. With ``summary`` (at most 65,536
        characters) and the plan's ``through``: appends the compaction record (``{"sequence",
        "compaction"}``); a summary not shorter than ``replaced_chars`` is refused and recorded.
        Pass back the plan's ``forgotten`` (records it showed as placeholders) with the summary: a
        record forgotten since the plan refuses the commit (``ConflictError``). With
        ``summarizer_failed`` (the reason) and the plan's ``through`` instead of a summary: the
        failure is recorded as a refusal and nothing folds. With ``summarize=True`` (and none of
        ``summary``, ``through`` or ``summarizer_failed``) the model of ``model_url``/``model`` writes
        the summary in the same call, the model named in its frame and its tokens in the record; its
        failure is recorded as a refusal (``UnavailableError`` without a model)."""
        arguments: dict[str, Any] = {
            "thread": thread,
            "measured_input_tokens": measured_input_tokens,
        }
        if summarize:
            arguments["summarize"] = True
        for name, value in (
            ("keep_tokens", keep_tokens),
            ("summary", summary),
            ("through", through),
            ("summarizer", summarizer),
            ("summarizer_failed", summarizer_failed),
            ("forgotten", forgotten),
        ):
            if value is not None:
                arguments[name] = value
        return self.call("compact", arguments)

    def history_read(
        self,
        thread: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        max_bytes: int | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        """``memory_history_read``: ``thread``'s records after ``after`` (oldest first; default
        from the first) or before the record ``before`` (newest first; not both), folded and covered
        ones included (marked ``folded``, each with its ``window``); ``next_after`` or
        ``next_before`` continues. A forgotten record comes as its placeholder (``forgotten``).
        System instructions and operational records (``run_completed``, ``compaction``,
        ``rollover``) are left out unless ``include`` names ``"system"`` or ``"operational"``."""
        arguments: dict[str, Any] = {"thread": thread}
        for name, value in (
            ("after", after),
            ("before", before),
            ("limit", limit),
            ("max_bytes", max_bytes),
            ("include", include),
        ):
            if value is not None:
                arguments[name] = value
        return self.call("history_read", arguments)

    def history_search(
        self,
        thread: str,
        text: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        scan: int | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        """``memory_history_search``: ``thread``'s records containing ``text`` (literally,
        case-insensitively), after ``after`` or before ``before`` (newest first), folded ones
        included; ``next_after`` or ``next_before`` continues. A forgotten record never matches;
        ``include`` as for :meth:`history_read`."""
        arguments: dict[str, Any] = {"thread": thread, "text": text}
        for name, value in (
            ("after", after),
            ("before", before),
            ("limit", limit),
            ("scan", scan),
            ("include", include),
        ):
            if value is not None:
                arguments[name] = value
        return self.call("history_search", arguments)

    def remember_once(self) -> dict[str, Any]:
        """One pass of the remembering worker (``remembering-worker --once``): admitted intents
        (cleanups of forgotten records), then every thread with new records. Returns counts."""
        return self.call("remember_once", {})

    def close(self) -> None:
        """Drops this handle's engine (the database closes when no other handle uses it)."""
        self._engine = None  # type: ignore[assignment]

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory:
    """``Memory`` for asyncio: the same methods, awaited. Each call runs the blocking engine call in
    a worker thread (``asyncio.to_thread``); the engine releases the GIL, so calls run in
    parallel and the event loop never waits on Rust."""

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        namespace: str | Namespace | None = None,
        scope: str | None = None,
        user: str | None = None,
        schema: str | None = None,
        max_chunks: int | None = None,
        compact_vectors: bool | None = None,
        hnsw_ef_search: int | None = None,
        max_tool_output_bytes: int | None = None,
        rerank_model: str | None = None,
        corrections: str | None = None,
        model_url: str | None = None,
        model: str | None = None,
        model_key_file: str | os.PathLike[str] | None = None,
        model_fallback: str | None = None,
        model_timeout_ms: int | None = None,
        context_budget: int | None = None,
        context_capacity: int | None = None,
        notes_id: str | None = None,
    ) -> None:
        self.sync_memory = Memory(
            db,
            namespace=namespace,
            scope=scope,
            user=user,
            schema=schema,
            max_chunks=max_chunks,
            compact_vectors=compact_vectors,
            hnsw_ef_search=hnsw_ef_search,
            max_tool_output_bytes=max_tool_output_bytes,
            rerank_model=rerank_model,
            corrections=corrections,
            model_url=model_url,
            model=model,
            model_key_file=model_key_file,
            model_fallback=model_fallback,
            model_timeout_ms=model_timeout_ms,
            context_budget=context_budget,
            context_capacity=context_capacity,
            notes_id=notes_id,
        )
        self.namespace = self.sync_memory.namespace
        self.scope = self.sync_memory.scope

    async def call(self, operation: str, arguments: Mapping[str, Any]) -> Any:
        return await asyncio.to_thread(self.sync_memory.call, operation, arguments)

    async def add(
        self,
        data: str | Sequence[str | Mapping[str, Any]],
        *,
        user: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.add, data, user=user, metadata=metadata, id=id
        )

    async def search(self, query: str, *, limit: int = 5, mode: str = "hybrid") -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.search, query, limit=limit, mode=mode)

    async def get(self, id: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.sync_memory.get, id)

    async def get_all(self, *, cursor: str | None = None, limit: int = 20) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.get_all, cursor=cursor, limit=limit)

    async def update(
        self,
        id: str,
        text: str,
        *,
        expected_revision: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.update,
            id,
            text,
            expected_revision=expected_revision,
            metadata=metadata,
        )

    async def delete(self, id: str, *, reason: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.delete, id, reason=reason)

    async def history(self, id: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync_memory.history, id, limit=limit)

    async def put(self, id: str, text: str, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.put, id, text, **kwargs)

    async def withdraw(self, id: str, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.withdraw, id, **kwargs)

    async def read(self, id: str, **kwargs: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.sync_memory.read, id, **kwargs)

    async def recall(self, query: str, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.recall, query, **kwargs)

    async def sync(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.sync)

    async def status(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.status)

    async def append(self, thread: str, text: str | None = None, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.append, thread, text, **kwargs)

    async def forget(self, thread: str, sequence: int, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.forget, thread, sequence, **kwargs)

    async def context(
        self,
        thread: str,
        budget: int,
        *,
        query: str | None = None,
        memory: bool = True,
        rollover: bool = True,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.context,
            thread,
            budget,
            query=query,
            memory=memory,
            rollover=rollover,
        )

    async def new_context(self, thread: str, *, handoff: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.new_context, thread, handoff=handoff)

    async def context_remaining(self, thread: str, *, budget: int | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.context_remaining, thread, budget=budget)

    async def read_notes(self, thread: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.read_notes, thread)

    async def write_notes(
        self, thread: str, text: str, *, expected_revision: str | None
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.write_notes, thread, text, expected_revision=expected_revision
        )

    async def compact(
        self,
        thread: str,
        *,
        measured_input_tokens: int | None,
        keep_tokens: int | None = None,
        summary: str | None = None,
        through: int | None = None,
        summarizer: str | None = None,
        summarizer_failed: str | None = None,
        forgotten: list[int] | None = None,
        summarize: bool = False,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.compact,
            thread,
            measured_input_tokens=measured_input_tokens,
            keep_tokens=keep_tokens,
            summary=summary,
            through=through,
            summarizer=summarizer,
            summarizer_failed=summarizer_failed,
            forgotten=forgotten,
            summarize=summarize,
        )

    async def history_read(
        self,
        thread: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        max_bytes: int | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.history_read,
            thread,
            after=after,
            before=before,
            limit=limit,
            max_bytes=max_bytes,
            include=include,
        )

    async def history_search(
        self,
        thread: str,
        text: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        scan: int | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            self.sync_memory.history_search,
            thread,
            text,
            after=after,
            before=before,
            limit=limit,
            scan=scan,
            include=include,
        )

    async def remember_once(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync_memory.remember_once)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sync_memory.close()
