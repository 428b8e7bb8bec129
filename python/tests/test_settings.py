"""The package honours the settings the `memory` binary takes as flags, each as a keyword argument of
`Memory` or, without one, from the same `MEMORY_*` variable (one rule, `Settings::resolve`): the
tool output bound, the index's capacity and the search width; a bad value is refused before anything
is opened."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_memory import ConflictError, InvalidInputError, Memory, TooLargeError, UnavailableError


def _open(database: dict, **settings: object) -> Memory:
    return Memory(
        database["db"],
        schema=database["schema"],
        namespace={"name": "notes", "version": 1, "identity": {"user": "ana"}},
        scope="assistant",
        user="ana",
        **settings,  # type: ignore[arg-type]
    )


def _open_through(
    door: str,
    database: dict,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    text: str,
    argument: dict[str, object],
    overridden: str | None = None,
) -> Memory:
    """A `Memory` with one setting given through `door`: its variable set to `text`, or the keyword
    `argument`, which wins over `overridden` in the variable, as a flag does."""
    if door == "environment":
        monkeypatch.setenv(variable, text)
        return _open(database)
    if overridden is not None:
        monkeypatch.setenv(variable, overridden)
    return _open(database, **argument)


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_tool_output_bound_takes_effect(
    database: dict, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    memory = _open_through(
        door,
        database,
        monkeypatch,
        "MEMORY_MAX_TOOL_OUTPUT_BYTES",
        "2048",
        {"max_tool_output_bytes": 2048},
        overridden="60000",
    )
    memory.append("t", "Look it up.")
    memory.append(
        "t",
        record={
            "speaker": "search",
            "body": {
                "kind": "tool_result",
                "call_id": "c1",
                "output": "a" * 5_000 + "z" * 5_000,
                "is_error": False,
            },
        },
    )
    records = memory.history_read("t")["records"]
    outputs = [json.loads(r["text"]) for r in records if r["kind"] == "tool_result"]
    assert outputs == [
        {
            "truncated": True,
            "original_bytes": 10_000,
            "omitted_bytes": 10_000 - 2048,
            "head": "a" * 1024,
            "tail": "z" * 1024,
        }
    ]


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_index_capacity_takes_effect(
    database: dict, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    memory = _open_through(
        door, database, monkeypatch, "MEMORY_MAX_CHUNKS", "5", {"max_chunks": 5}
    )
    for number in range(10):
        memory.add(f"Fact number {number}: the {number}th planet has {number} moons.")
    with pytest.raises(TooLargeError) as refused:
        memory.sync()
    assert "max_chunks" in str(refused.value)


def test_a_store_fuller_than_the_capacity_is_refused_with_nothing_left_to_index(
    database: dict,
) -> None:
    """Filled with room to spare, then opened with room for fewer chunks than it holds: the sync
    that has nothing to index refuses as the semantic recall does, naming the setting to raise."""
    with _open(database) as memory:
        for number in range(10):
            memory.add(f"Fact number {number}: the {number}th planet has {number} moons.")
        memory.sync()
    with _open(database, max_chunks=5) as smaller:
        with pytest.raises(TooLargeError) as refused:
            smaller.sync()
        assert "max_chunks" in str(refused.value)
        with pytest.raises(TooLargeError) as refused:
            smaller.recall("planet moons", mode="exact")
        assert "max_chunks" in str(refused.value)
    with _open(database, max_chunks=10) as roomy:
        assert roomy.sync()["indexed"] > 0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMORY_HNSW_EF_SEARCH", "0"),
        ("MEMORY_MAX_CHUNKS", "many"),
        ("MEMORY_COMPACT_VECTORS", "maybe"),
        ("MEMORY_MAX_TOOL_OUTPUT_BYTES", "10"),
    ],
)
def test_a_bad_setting_is_refused_before_the_database_opens(
    database: dict, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidInputError):
        _open(database)


def test_a_bad_argument_is_refused_as_its_variable_is(database: dict) -> None:
    with pytest.raises(InvalidInputError):
        _open(database, hnsw_ef_search=0)
    with pytest.raises(InvalidInputError):
        _open(database, max_tool_output_bytes=10)


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_vector_encoding_takes_effect(
    database: dict, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    memory = _open_through(
        door,
        database,
        monkeypatch,
        "MEMORY_COMPACT_VECTORS",
        "1",
        {"compact_vectors": True},
        overridden="0",
    )
    memory.add("Ana keeps her bicycle in the cellar.")
    memory.sync()
    status = memory.status()
    # The index the engine opens holds its vectors as int8 codes, and still finds the memory.
    assert status["chunks"]["encoding"] == "int8"
    assert status["chunks"]["live"] == 1
    found = memory.search("where is the bicycle", mode="exact")
    assert [r["memory"] for r in found["results"]] == ["Ana keeps her bicycle in the cellar."]
    assert _open(database, compact_vectors=False).status()["chunks"]["encoding"] == "f32"


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_search_width_takes_effect(
    database: dict, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    memory = _open_through(
        door,
        database,
        monkeypatch,
        "MEMORY_HNSW_EF_SEARCH",
        "40",
        {"hnsw_ef_search": 40},
        overridden="300",
    )
    # The width every HNSW search of the engine's index runs with, as the index reports it.
    assert memory.status()["hnsw"]["ef_search"] == 40
    monkeypatch.delenv("MEMORY_HNSW_EF_SEARCH")
    assert _open(database).status()["hnsw"]["ef_search"] == 128


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_index_capacity_is_the_index_s(
    database: dict, monkeypatch: pytest.MonkeyPatch, door: str
) -> None:
    memory = _open_through(
        door, database, monkeypatch, "MEMORY_MAX_CHUNKS", "7", {"max_chunks": 7}
    )
    assert memory.status()["chunks"]["capacity"] == 7


def test_a_memory_without_a_namespace_is_the_user_s_own_as_the_hook_resolves_it(
    database: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whose memory a `Memory` without a namespace works in follows the rule `memory hook` and `memory
    thread append` follow: `user=`, else `MEMORY_USER`, else the OS user; thread calls that name no
    destination bind there too, and a withdrawal names the same user."""
    monkeypatch.setenv("USER", "osuser")
    monkeypatch.setenv("LOGNAME", "osuser")
    monkeypatch.setenv("MEMORY_USER", "erin")
    from_variable = Memory(database["db"], schema=database["schema"])
    assert from_variable.namespace["identity"] == {"user": "erin"}
    added = from_variable.add("Erin likes plums.")["results"][0]
    assert from_variable.delete(added["id"], reason="a test")["withdrawn"]["by"] == "user:erin"

    given = Memory(database["db"], schema=database["schema"], user="ana")
    assert given.namespace["identity"] == {"user": "ana"}
    given.call(
        "thread_append",
        {"thread": "ana-t", "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "hi"}}},
    )
    # The thread is bound to ana's namespace: naming it again is no conflict, naming erin's is.
    given.call(
        "thread_append",
        {
            "thread": "ana-t",
            "user": "ana",
            "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "again"}},
        },
    )
    with pytest.raises(ConflictError):
        given.call(
            "thread_append",
            {
                "thread": "ana-t",
                "user": "erin",
                "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "moved"}},
            },
        )

    monkeypatch.delenv("MEMORY_USER")
    from_os = Memory(database["db"], schema=database["schema"])
    assert from_os.namespace["identity"] == {"user": "osuser"}


@pytest.mark.parametrize("door", ["environment", "argument"])
def test_the_rerank_model_setting_takes_effect(
    database: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, door: str
) -> None:
    # The embedding model and runtime, without the rerank model's files.
    source = Path(os.environ["MEMORY_ASSETS_DIR"])
    for part in ("onnxruntime", "model"):
        (tmp_path / part).symlink_to(source / part)
    monkeypatch.setenv("MEMORY_ASSETS_DIR", str(tmp_path))
    memory = _open_through(
        door,
        database,
        monkeypatch,
        "MEMORY_RERANK_MODEL",
        "off",
        {"rerank_model": "off"},
        overridden="on",
    )
    assert memory.status()["rerank_model"] == "off"
    memory.add("Ana keeps her bicycle in the cellar.")
    memory.sync()
    # Hybrid recall reranks without the model: its absence changes nothing.
    found = memory.search("where is the bicycle")
    assert [r["memory"] for r in found["results"]] == ["Ana keeps her bicycle in the cellar."]
    # With the model asked for (the default), its missing files refuse the same recall.
    monkeypatch.delenv("MEMORY_RERANK_MODEL", raising=False)
    with_model = _open(database)
    assert with_model.status()["rerank_model"] == "on"
    with pytest.raises(UnavailableError, match="fetch-assets"):
        with_model.search("where is the bicycle")
    with pytest.raises(InvalidInputError):
        _open(database, rerank_model="sometimes")
