"""Every error kind the Python API can provoke, as its exception class; bad input never crashes."""

from __future__ import annotations

import pathlib

import pytest

from agent_memory import (
    AgentMemoryError,
    ConflictError,
    InvalidInputError,
    Memory,
    NotFoundError,
    TooLargeError,
    UnavailableError,
)


def test_invalid_input(memory: Memory) -> None:
    cases = [
        lambda: memory.search("tea", limit=0),
        lambda: memory.search("tea", mode="fuzzy"),
        lambda: memory.search(123),  # type: ignore[arg-type]
        lambda: memory.add("x", metadata={"when": object()}),
        lambda: memory.add("x", metadata={"nan": float("nan")}),
        lambda: memory.add([42]),  # type: ignore[list-item]
        lambda: memory.get(""),
        lambda: memory.recall("tea", max_items=0),
        lambda: memory.recall("tea", timeout_ms=-1),
        lambda: memory.put("id", "text", scopes=[""]),
        lambda: memory.forget("thread", 0, reason="zero"),
        lambda: memory.call("no_such_operation", {}),
        lambda: memory.call("put", {"surprise": True}),
        lambda: memory.append("thread", role="robot", text="hi"),
    ]
    for case in cases:
        with pytest.raises(InvalidInputError) as refused:
            case()
        assert refused.value.kind == "invalid-input"
        assert isinstance(refused.value, ValueError)


def test_raw_engine_rejects_bad_json(memory: Memory) -> None:
    with pytest.raises(InvalidInputError):
        memory._engine.call("get", "{not json")
    with pytest.raises(TypeError):
        memory._engine.call("get", None)  # type: ignore[arg-type]


def test_too_large(memory: Memory) -> None:
    cases = [
        lambda: memory.search("tea", limit=51),
        lambda: memory.get("x" * 10_000),
        lambda: memory.get_all(limit=101),
        lambda: memory.search("word " * 20_000),
        lambda: memory.put("id", "text", scopes=["s"] * 300),
    ]
    for case in cases:
        with pytest.raises(TooLargeError) as refused:
            case()
        assert refused.value.kind == "too-large"


def test_conflict_and_not_found(memory: Memory) -> None:
    receipt = memory.put("doc", "First words.")
    with pytest.raises(ConflictError):
        memory.put("doc", "Second words.", expected_revision=None)
    with pytest.raises(NotFoundError) as missing:
        memory.delete("never", reason="gone")
    assert missing.value.kind == "not-found"
    assert memory.read("doc")["revision"] == receipt["revision"]


def test_unavailable_without_the_model(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_ASSETS_DIR", str(tmp_path / "no-assets"))
    memory = Memory(tmp_path / "m.sqlite", namespace="n", scope="s")
    memory.add("Words that lexical search finds.")
    assert memory.search("lexical words", mode="lexical")["results"]
    with pytest.raises(UnavailableError) as refused:
        memory.search("lexical words", mode="exact")
    assert refused.value.kind == "unavailable"
    assert "fetch-assets" in refused.value.message


def test_unreachable_postgres_is_unavailable() -> None:
    with pytest.raises(UnavailableError):
        Memory("postgres://nobody@127.0.0.1:1/none?connect_timeout=1", namespace="n", scope="s")
    with pytest.raises(InvalidInputError):
        Memory("/tmp/x.sqlite", schema="public", namespace="n", scope="s")


def test_a_file_that_is_not_a_database(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"this is not a database, " * 1000)
    with pytest.raises(AgentMemoryError) as refused:
        Memory(path, namespace="n", scope="s")
    assert refused.value.kind in {"corrupt", "storage"}


def test_deadline_or_budget_are_typed(memory: Memory) -> None:
    for i in range(50):
        memory.add(f"Note {i}: the quarterly planning review covers budgets and hiring.")
    try:
        memory.recall("quarterly planning review", mode="hybrid", timeout_ms=1, max_items=50)
    except AgentMemoryError as refused:
        assert refused.kind in {"deadline", "unavailable"}
