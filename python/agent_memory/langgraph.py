"""A LangGraph ``BaseStore`` on the agent-memory engine: ``AgentMemoryStore``.

LangGraph agents and LangMem's memory tools (``create_manage_memory_tool``,
``create_search_memory_tool``) work on it unchanged. How LangGraph's model maps onto the engine:

- One store is one engine namespace, ``{"name": "langgraph.store", "version": 1, "identity":
  {"store": name}}``. An item ``(namespace, key)`` is one document, id ``lg-`` + a digest of the
  pair; its value, namespace, key and times are kept in the document's metadata (``langgraph``).
- Prefix search runs inside the engine: each document is granted one scope per prefix of its
  namespace (the root ``()`` included), and a search reads through the scope of its
  ``namespace_prefix``, so the engine's index only ever returns items under the prefix.
- ``index`` names the embedded fields (``{"fields": ["text"]}``, default ``["$"]``, the whole value
  as JSON; ``dims`` and ``embed`` are accepted and ignored: the engine embeds with its own model,
  all-MiniLM-L6-v2, 384 dimensions). The document's text is those fields' text; ``put(...,
  index=False)`` stores an item that only filters and listings find (as LangGraph's stores do).
  Without ``index`` every item is embedded on its whole value.
- A search with a ``query`` is a recall (``mode``, hybrid by default) of ``offset + limit`` items
  (with a ``filter``: up to 256 candidates, filtered here with LangGraph's operators ``$eq``,
  ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``); scores are the engine's. Without a query, items are
  listed from the engine, newest first, and filtered here. ``list_namespaces`` reads the listing too.
- ``delete`` replaces the document with a tombstone (no text, no scope, no value: no search finds
  it), not a withdrawal, since a withdrawn id is gone for good and LangGraph lets a deleted key be put
  again; ``put`` replaces the current revision (last writer wins, as
  LangGraph expects). TTLs are not supported (``supports_ttl = False``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from .errors import ConflictError, WithdrawnError
from .memory import Memory

__all__ = ["AgentMemoryStore"]

_SCOPE_PREFIX = "lg:"
_MAX_CANDIDATES = 256
_PAGE = 100


def _scope_of(prefix: tuple[str, ...]) -> str:
    digest = hashlib.sha256(json.dumps(list(prefix)).encode()).hexdigest()[:40]
    return f"{_SCOPE_PREFIX}{digest}"


def _id_of(namespace: tuple[str, ...], key: str) -> str:
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()[:40]
    return f"lg-{digest}"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _compare(item_value: Any, filter_value: Any) -> bool:
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_operator(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(_compare(i, f) for i, f in zip(item_value, filter_value))
        )
    return item_value == filter_value


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    if value is None:
        return False
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator}")


def _matches(filter: Mapping[str, Any] | None, value: Mapping[str, Any]) -> bool:
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


# The text of a document that holds no searchable words (a tombstone, or an item put with
# ``index=False``): memory refuses blank text on every write, so it is a lone mark the query parser
# reads as no word. Recall never cites an unindexed item (see ``_search``) and a tombstone has no scope.
_NO_WORDS = "-"


def _deleted(document: Mapping[str, Any]) -> bool:
    return bool(document["content"]["metadata"].get("langgraph", {}).get("deleted"))


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path))
    )
    return all(p == "*" or n == p for n, p in pairs)


class AgentMemoryStore(BaseStore):
    """A LangGraph store on the agent-memory engine (see the module's documentation).

    ``db`` is a SQLite path or a ``postgres://`` URL (or pass an open ``memory``); ``name`` tells
    several stores in one database apart; ``mode`` is the recall mode of searches with a query.
    """

    supports_ttl = False

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        index: IndexConfig | None = None,
        name: str = "default",
        mode: Literal["hybrid", "lexical", "exact", "hnsw"] = "hybrid",
        memory: Memory | None = None,
        schema: str | None = None,
    ) -> None:
        namespace = {"name": "langgraph.store", "version": 1, "identity": {"store": name}}
        if memory is None:
            if db is None:
                raise ValueError("give db (a SQLite path or postgres:// URL) or memory")
            memory = Memory(db, namespace=namespace, scope=_scope_of(()), schema=schema)
        self.memory = memory
        self.namespace = namespace
        self.mode = mode
        self.index_config = dict(index) if index else None
        fields = (self.index_config or {}).get("fields") or ["$"]
        self._fields = [(f, tokenize_path(f) if f != "$" else f) for f in fields]

    # ---- the engine's calls ---------------------------------------------------------------------

    def _read(self, document_id: str) -> dict[str, Any] | None:
        return self.memory.read(document_id, namespace=self.namespace)

    @staticmethod
    def _item_of(document: Mapping[str, Any], score: float | None = None) -> SearchItem:
        meta = document["content"]["metadata"]["langgraph"]
        return SearchItem(
            namespace=tuple(meta["namespace"]),
            key=meta["key"],
            value=meta["value"],
            created_at=_time(meta["created_at"]),
            updated_at=_time(meta["updated_at"]),
            score=score,
        )

    def _get(self, op: GetOp) -> Item | None:
        document = self._read(_id_of(tuple(op.namespace), op.key))
        if document is None or _deleted(document):
            return None
        found = self._item_of(document)
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _text(self, value: Mapping[str, Any], index: Literal[False] | list[str] | None) -> str:
        if index is False:
            return ""
        fields = self._fields if index is None else [(f, tokenize_path(f)) for f in index]
        texts: list[str] = []
        for path, tokens in fields:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False, sort_keys=True))
            else:
                texts.extend(get_text_at_path(value, tokens))
        return "\n".join(t for t in texts if t)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        document_id = _id_of(namespace, op.key)
        for _ in range(8):
            current = self._read(document_id)
            if op.value is None:
                if current is None or _deleted(current):
                    return
                # A tombstone, not a withdrawal: a withdrawn id is gone for good, and LangGraph
                # lets a deleted key be put again. It has no text and no scope, so no search
                # can find it, and no value.
                try:
                    self.memory.put(
                        document_id,
                        _NO_WORDS,
                        expected_revision=current["revision"],
                        scopes=[],
                        locator="langgraph:deleted",
                        metadata={
                            "langgraph": {
                                "namespace": list(namespace),
                                "key": op.key,
                                "deleted": True,
                            }
                        },
                        namespace=self.namespace,
                    )
                    return
                except ConflictError:
                    continue
            now = datetime.now(timezone.utc).isoformat()
            created = (
                current["content"]["metadata"]["langgraph"]["created_at"]
                if current and not _deleted(current)
                else now
            )
            text = self._text(op.value, op.index)
            metadata = {
                "langgraph": {
                    "namespace": list(namespace),
                    "key": op.key,
                    "value": dict(op.value),
                    "created_at": created,
                    "updated_at": now,
                    "indexed": bool(text),
                }
            }
            scopes = [_scope_of(namespace[:n]) for n in range(len(namespace) + 1)]
            try:
                self.memory.put(
                    document_id,
                    text or _NO_WORDS,
                    expected_revision=current["revision"] if current else None,
                    scopes=scopes,
                    locator="langgraph:" + "/".join(namespace),
                    metadata=metadata,
                    namespace=self.namespace,
                )
                return
            except (ConflictError, WithdrawnError):
                # Another writer (or a delete) got there first: last writer wins, try again.
                continue
        raise ConflictError(f"put of {namespace}/{op.key} lost to other writers 8 times")

    def _listing(self) -> Iterable[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = self.memory.call(
                "list",
                {
                    "namespace": self.namespace,
                    "scope": self.memory.scope,
                    "arguments": {"cursor": cursor, "limit": _PAGE},
                },
            )
            yield from (d for d in page["documents"] if not _deleted(d))
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        if op.limit <= 0:
            return []
        if not op.query:
            found: list[SearchItem] = []
            for document in self._listing():
                item = self._item_of(document)
                if item.namespace[: len(prefix)] == prefix and _matches(op.filter, item.value):
                    found.append(item)
                    if len(found) >= wanted:
                        break
            return found[op.offset : wanted]
        candidates = min(_MAX_CANDIDATES, wanted if not op.filter else _MAX_CANDIDATES)
        answer = self.memory.recall(
            op.query,
            mode=self.mode,
            max_items=candidates,
            max_bytes=64 * 1024 * 1024,
            max_tokens=16 * 1024 * 1024,
            timeout_ms=60_000,
            scope=_scope_of(prefix),
            namespace=self.namespace,
        )
        results: list[SearchItem] = []
        seen: set[str] = set()
        for passage in answer["passages"]:
            source = passage["source"]["id"]
            meta = passage["content"]["metadata"].get("langgraph")
            # An item put without an index is never a scored hit: it fills the rest below.
            if source in seen or (meta is not None and not meta.get("indexed", True)):
                continue
            seen.add(source)
            if meta is None or not _matches(op.filter, meta["value"]):
                continue
            results.append(self._item_of({"content": passage["content"]}, passage["score"]))
        results = results[op.offset : wanted]
        if len(results) < op.limit:
            # As LangGraph's stores do: items stored without an index fill the rest, unscored.
            for document in self._listing():
                meta = document["content"]["metadata"].get("langgraph", {})
                if meta.get("indexed", True) or document["id"] in seen:
                    continue
                item = self._item_of(document)
                if item.namespace[: len(prefix)] == prefix and _matches(op.filter, item.value):
                    results.append(item)
                    if len(results) >= op.limit:
                        break
        return results

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {
            tuple(document["content"]["metadata"]["langgraph"]["namespace"])
            for document in self._listing()
        }
        if op.match_conditions:
            namespaces = {
                ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions)
            }
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # ---- BaseStore ------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))
