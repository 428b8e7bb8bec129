"""The simple and precise APIs of `agent_memory.Memory`, on every backend."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agent_memory
from agent_memory import (
    AgentMemoryError,
    ConflictError,
    InvalidInputError,
    Memory,
    NotFoundError,
    OperationConflictError,
    TooLargeError,
    WithdrawnError,
)


def test_add_search_get(memory: Memory) -> None:
    added = memory.add("The user prefers green tea in the morning.", metadata={"topic": "drinks"})
    [record] = added["results"]
    assert record["memory"] == "The user prefers green tea in the morning."
    assert record["revision"] and record["predecessor"] is None
    assert record["metadata"] == {"topic": "drinks"}
    assert record["attributions"][0]["speaker"] == "ana"
    assert record["replayed"] is False
    memory.add("Ana's sister grows tomatoes in Porto.")

    for mode in ("hybrid", "lexical", "exact", "hnsw"):
        found = memory.search("what does the user drink", limit=3, mode=mode)
        assert found["results"], mode
        top = found["results"][0]
        assert top["id"] == record["id"], mode
        assert top["citation"] == "memory:1"
        assert top["score"] is not None
        assert top["attributions"][0]["speaker"] == "ana"
        assert "[memory:1]" in found["text"] and "green tea" in found["text"]

    got = memory.get(record["id"])
    assert got is not None and got["revision"] == record["revision"]
    assert memory.get("no-such-id") is None


def test_add_is_idempotent_and_takes_messages(memory: Memory) -> None:
    first = memory.add("I live in Lisbon.")["results"][0]
    again = memory.add("I live in Lisbon.")["results"][0]
    assert again["id"] == first["id"] and again["replayed"] is True
    added = memory.add(
        [
            {"role": "user", "content": "My dog is called Rex."},
            {"role": "assistant", "content": "Rex is a lovely name."},
            {"role": "user", "content": "   "},
        ]
    )["results"]
    assert [r["attributions"][0]["speaker"] for r in added] == ["ana", "assistant"]
    assert len(memory.get_all(limit=100)["results"]) == 3


def test_get_all_pages_newest_first(memory: Memory) -> None:
    ids = [memory.add(f"Fact number {i} about the garden.")["results"][0]["id"] for i in range(5)]
    page = memory.get_all(limit=2)
    seen = [r["id"] for r in page["results"]]
    while page["next_cursor"]:
        page = memory.get_all(cursor=page["next_cursor"], limit=2)
        seen += [r["id"] for r in page["results"]]
    assert seen == list(reversed(ids))


def test_update_delete_history(memory: Memory) -> None:
    record = memory.add("The meeting is on Monday.", metadata={"kind": "plan"})["results"][0]
    updated = memory.update(record["id"], "The meeting moved to Tuesday.")
    assert updated["predecessor"] == record["revision"]
    assert updated["metadata"] == {"kind": "plan"}
    assert memory.get(record["id"])["memory"] == "The meeting moved to Tuesday."
    with pytest.raises(ConflictError) as stale:
        memory.update(record["id"], "Wednesday?", expected_revision=record["revision"])
    assert stale.value.kind == "conflict"
    exact = memory.update(record["id"], "Thursday.", expected_revision=updated["revision"])
    assert exact["predecessor"] == updated["revision"]
    assert memory.search("meeting Thursday", mode="lexical")["results"][0]["id"] == record["id"]

    # Update then history lists every change, newest first, with its text, author and time.
    history = memory.history(record["id"])
    assert [h["revision"] for h in history] == [
        exact["revision"],
        updated["revision"],
        record["revision"],
    ]
    assert [h["memory"] for h in history] == [
        "Thursday.",
        "The meeting moved to Tuesday.",
        "The meeting is on Monday.",
    ]
    assert [h["predecessor"] for h in history] == [
        updated["revision"],
        record["revision"],
        None,
    ]
    assert all(h["attributions"][0]["speaker"] == "ana" for h in history)
    assert history[0]["updated_at"] >= history[1]["updated_at"] >= history[2]["updated_at"] > 0
    assert memory.history(record["id"], limit=1) == history[:1]

    deleted = memory.delete(record["id"], reason="the user asked")
    assert deleted["withdrawn"] == {"reason": "the user asked", "by": "user:ana"}
    assert memory.get(record["id"]) is None
    assert memory.search("meeting Thursday", mode="lexical")["results"] == []
    # A deletion leaves its tombstone (who, when, why) and drops the words of every revision.
    after = memory.history(record["id"])
    assert [h["revision"] for h in after[1:]] == [h["revision"] for h in history]
    assert after[0]["withdrawn"] == {"reason": "the user asked", "by": "user:ana"}
    assert all(h["memory"] is None and h["attributions"] == [] for h in after)
    with pytest.raises(NotFoundError):
        memory.delete(record["id"], reason="again")
    with pytest.raises(NotFoundError):
        memory.update(record["id"], "back?")
    assert memory.history("never-written") == []


def test_precise_put_withdraw_read_recall(memory: Memory) -> None:
    receipt = memory.put(
        "doc-1",
        "Ana prefers window seats on long flights.",
        operation_id="op-1",
        attributions=[
            {
                "origin_id": "m1",
                "speaker": "ana",
                "observers": ["assistant"],
                "locator": "chat:1",
                "activity_at": None,
                "interpretation": "stated",
            }
        ],
    )
    assert receipt["replayed"] is False
    replay = memory.put(
        "doc-1",
        "Ana prefers window seats on long flights.",
        operation_id="op-1",
        attributions=receipt["document"]["content"]["attributions"],
        recorded_at=receipt["document"]["content"]["recorded_at"],
        extracted_at=receipt["document"]["content"]["extracted_at"],
    )
    assert replay["replayed"] is True and replay["revision"] == receipt["revision"]
    with pytest.raises(OperationConflictError) as reused:
        memory.put("doc-1", "Something else.", operation_id="op-1")
    assert reused.value.kind == "operation-conflict"
    with pytest.raises(ConflictError):
        memory.put("doc-1", "A blind create.")
    memory.put("doc-2", "Ana books aisle seats on short trips.", scopes=["assistant", "other"])
    assert memory.sync()["indexed"] >= 2

    answer = memory.recall("seats on flights", mode="exact", max_items=1)
    assert len(answer["passages"]) == 1 and answer["answered_by"] == "exact"
    assert answer["text"].startswith("<recalled-memory>")
    both = memory.recall("seats", mode="lexical", max_items=5)
    assert {p["source"]["id"] for p in both["passages"]} == {"doc-1", "doc-2"}
    assert all("rankings" not in p for p in both["passages"]), "one ranking: its score says it"
    fused = memory.recall("seats", mode="hybrid", max_items=5)["passages"]
    assert fused and all(p["rankings"]["lexical"] is not None for p in fused), fused
    one_source = memory.recall("seats", mode="lexical", max_items=5, max_sources=1)
    assert len({p["source"]["id"] for p in one_source["passages"]}) == 1
    small = memory.recall("seats", mode="lexical", max_items=5, max_bytes=400)
    assert len(small["text"].encode()) <= 400
    tokens = memory.recall("seats", mode="lexical", max_items=5, max_tokens=60)
    assert len(tokens["passages"]) <= 1
    other = memory.recall("seats", mode="lexical", scope="other")
    assert [p["source"]["id"] for p in other["passages"]] == ["doc-2"]

    read = memory.read("doc-1")
    assert read is not None and read["revision"] == receipt["revision"]
    withdrawn = memory.withdraw("doc-1", expected_revision=receipt["revision"], reason="wrong")
    assert withdrawn["document"]["withdrawn"] == {"reason": "wrong", "by": "user:ana"}
    assert memory.read("doc-1") is None
    with pytest.raises(WithdrawnError) as gone:
        memory.put("doc-1", "Back again.", expected_revision=withdrawn["revision"])
    assert gone.value.kind == "withdrawn"


def test_thread_log_and_worker_pass(memory: Memory) -> None:
    first = memory.append("session-1", "I moved to Lisbon last spring. Can you suggest a bakery?")
    assert first["sequence"] == 1 and first["thread"] == "session-1"
    memory.append("session-1", "Try Manteigaria.", role="assistant")
    second = memory.append("session-1", "My sister Ana grows tomatoes in Porto.")
    report = memory.remember_once()
    assert report["processed"] >= 3 and report["failed"] == 0
    texts = {r["memory"] for r in memory.get_all()["results"]}
    assert "I moved to Lisbon last spring." in texts
    assert "My sister Ana grows tomatoes in Porto." in texts
    assert memory.search("tomatoes", mode="lexical")["results"]

    tomato = next(
        r["id"]
        for r in memory.get_all()["results"]
        if r["memory"] == "My sister Ana grows tomatoes in Porto."
    )
    assert memory.history(tomato)
    forgotten = memory.forget("session-1", second["sequence"], reason="the user asked")
    assert forgotten["cleanup"]
    # Nothing remembered from a forgotten record is read, its history included.
    assert memory.get(tomato) is None
    forgotten_history = memory.history(tomato)
    assert forgotten_history and all(h["memory"] is None for h in forgotten_history)
    # Effective at once, in every mode, before the worker's cleanup.
    assert memory.search("tomatoes", mode="lexical")["results"] == []
    assert memory.search("tomatoes", mode="exact")["results"] == [] or all(
        "tomatoes" not in r["memory"] for r in memory.search("tomatoes", mode="exact")["results"]
    )
    memory.remember_once()
    texts = {r["memory"] for r in memory.get_all()["results"]}
    assert "My sister Ana grows tomatoes in Porto." not in texts
    with pytest.raises(NotFoundError):
        memory.forget("session-1", 99, reason="no such record")
    # A thread bound to this memory cannot be redirected into another namespace.
    other = Memory(memory.db, schema=memory_schema(memory), namespace="other", scope="x")
    with pytest.raises(ConflictError):
        other.append("session-1", "Hello there.")


def memory_schema(memory: Memory) -> str | None:
    return getattr(memory, "_schema", None)


def test_default_namespace_is_the_users(database: dict) -> None:
    memory = Memory(database["db"], schema=database["schema"], user="bob")
    assert memory.namespace == {"name": "memory.user", "version": 1, "identity": {"user": "bob"}}
    assert memory.scope == "agent"
    named = Memory(database["db"], schema=database["schema"], namespace="team")
    assert named.namespace["name"] == "team"


def test_namespaces_are_isolated(database: dict) -> None:
    a = Memory(database["db"], schema=database["schema"], user="a")
    b = Memory(database["db"], schema=database["schema"], user="b")
    a.add("Alpha likes climbing.")
    assert b.search("climbing", mode="lexical")["results"] == []
    assert b.get_all()["results"] == []


def test_doctor_reports_assets() -> None:
    report = agent_memory.doctor()
    assert report["assets"]["complete"] is True
    assert report["assets"]["rerank_model"]["verified"] is True
    assert report["fix"] is None
    assert agent_memory.__version__


def test_errors_are_one_hierarchy() -> None:
    from agent_memory import errors

    for kind, cls in errors._BY_KIND.items():
        error = errors.from_kind(kind, "why")
        assert isinstance(error, cls) and isinstance(error, AgentMemoryError)
        assert error.kind == kind and error.message == "why"
    assert errors.MemoryError is AgentMemoryError
    assert issubclass(InvalidInputError, ValueError)
    assert issubclass(TooLargeError, AgentMemoryError)


def test_a_second_process_on_the_next_day_recalls_and_a_second_user_does_not(
    database: dict,
) -> None:
    # Monday: one process remembers a conversation through the thread log and one worker pass,
    # then exits.
    monday = f"""
import sys
from agent_memory import Memory
memory = Memory(sys.argv[1], schema=sys.argv[2] or None, user="ana")
memory.append("monday", "My sister Ana grows tomatoes in Porto.")
assert memory.remember_once()["failed"] == 0
"""
    subprocess.run(
        [sys.executable, "-c", monday, database["db"], database["schema"] or ""],
        check=True,
        timeout=300,
    )
    # Tuesday: a new process (this one) recalls it in every mode; another user of the same
    # database sees nothing of it.
    ana = Memory(database["db"], schema=database["schema"], user="ana")
    for mode in ["lexical", "exact", "hnsw", "hybrid"]:
        texts = [r["memory"] for r in ana.search("where do the tomatoes grow", mode=mode)["results"]]
        assert "My sister Ana grows tomatoes in Porto." in texts, mode
    bob = Memory(database["db"], schema=database["schema"], user="bob")
    assert bob.search("tomatoes", mode="hybrid")["results"] == []
    assert bob.get_all()["results"] == []


def test_corrections_setting_is_the_workers(database: dict) -> None:
    """``corrections=`` is ``remembering-worker --corrections``: ``off`` tries nothing, ``words``
    (the default) refuses a correction worded unlike what it corrects, ``model`` links it, and
    recall then cites the correction first, the corrected memory naming it."""
    from agent_memory import InvalidInputError

    with pytest.raises(InvalidInputError):
        Memory(database["db"], schema=database["schema"], corrections="sometimes")

    def counts(memory: Memory) -> dict:
        return memory.status()["threads"]["extraction"]["corrections"]

    for mode, expected in [("off", (0, 0)), ("words", (0, 1)), ("Model", (1, 0))]:
        memory = Memory(
            database["db"],
            schema=database["schema"],
            namespace={"name": "notes", "version": 1, "identity": {"mode": mode}},
            scope="assistant",
            user="ana",
            corrections=mode,
        )
        before = counts(memory)
        memory.append(f"allergy-{mode}", "I'm allergic to shellfish.")
        memory.remember_once()
        memory.append(f"allergy-{mode}", "Correction on my allergy: it is penicillin.")
        memory.remember_once()
        after = counts(memory)
        assert (
            after["linked"] - before["linked"],
            after["refused"] - before["refused"],
        ) == expected, mode
        passages = memory.recall("allergic allergy penicillin shellfish", mode="lexical")["passages"]
        if mode == "Model":
            assert "penicillin" in passages[0]["content"]["text"]
            assert passages[1]["corrected_by"] == "memory:1"
        else:
            assert all("corrected_by" not in passage for passage in passages)
