"""Windows, notes and what is left, from Python (issue 45): the same rules the CLI and the MCP
tools keep, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from agent_memory import (
    AsyncMemory,
    ConflictError,
    InvalidInputError,
    Memory,
    NotFoundError,
    TooLargeError,
)


def _record(kind: str, speaker: str, **body: object) -> dict:
    return {"speaker": speaker, "body": {"kind": kind, **body}}


def _run(memory: Memory, thread: str, calls: int) -> None:
    memory.append(thread, record=_record("system_message", "host", text="You fix builds."))
    memory.append(thread, "an early detail about the old build")
    memory.append(thread, "noted", role="assistant")
    memory.append(thread, "Fix every failing test.")
    for index in range(calls):
        memory.append(
            thread,
            record=_record("tool_call", "assistant", call_id=f"c{index}", name="run", arguments={}),
        )
        memory.append(
            thread,
            record=_record(
                "tool_result", "run", call_id=f"c{index}", output="ok " * 200, is_error=False
            ),
        )


def test_a_rollover_a_handoff_the_notes_and_history_before(database: dict) -> None:
    memory = Memory(
        database["db"],
        schema=database["schema"],
        namespace={"name": "notes", "version": 1, "identity": {"user": "ana"}},
        scope="assistant",
        user="ana",
        context_budget=4000,
        context_capacity=64000,
    )
    _run(memory, "build", 3)
    written = memory.write_notes("build", "fixed: parser", expected_revision=None)
    with pytest.raises(ConflictError):
        memory.write_notes("build", "a lost update", expected_revision=None)
    memory.write_notes("build", "fixed: parser, lexer", expected_revision=written["revision"])
    assert memory.read_notes("build")["text"] == "fixed: parser, lexer"

    rolled = memory.new_context("build", handoff="Parser and lexer fixed; the VM is next.")
    assert rolled["rolled_over"] is True and rolled["window"] == 2
    assert memory.new_context("build")["rolled_over"] is False, "nothing new to cover"

    messages = memory.context("build", 4000, memory=False)["messages"]
    assert messages[0]["content"] == "You fix builds."
    assert messages[1]["content"].endswith("Parser and lexer fixed; the VM is next.")
    assert messages[2]["content"] == "Fix every failing test."
    assert messages[-1]["content"].endswith("fixed: parser, lexer")
    assert "an early detail" not in str(messages)

    remaining = memory.context_remaining("build")
    assert remaining["budget"] == 4000 and remaining["capacity"] == 64000
    assert remaining["window"]["number"] == 2

    boundary = rolled["sequence"]
    page = memory.history_read("build", before=boundary, limit=2)
    assert [record["sequence"] for record in page["records"]] == [boundary - 1, boundary - 2]
    assert all(record["window"] == 1 for record in page["records"])
    found = memory.history_search("build", "early detail", before=boundary)
    assert found["matches"][0]["sequence"] == 2
    with pytest.raises(InvalidInputError):
        memory.history_read("build", before=boundary, after=1)
    with pytest.raises(NotFoundError):
        memory.history_read("build", before=10_000)
    with pytest.raises(TooLargeError):
        memory.new_context("build", handoff="x" * 20_001)


def test_a_long_turn_rolls_over_by_itself_unless_told_not_to(database: dict) -> None:
    memory = Memory(database["db"], schema=database["schema"], user="ana")
    _run(memory, "long", 60)
    pruned = memory.context("long", 3000, memory=False, rollover=False)
    assert pruned["view"]["dropped_in_turn"] > 0 and not pruned["over_budget"]
    assert memory.context_remaining("long", budget=3000)["window"]["number"] == 1

    rolled = memory.context("long", 3000, memory=False)
    assert not rolled["over_budget"]
    assert rolled["view"]["window"]["number"] == 2
    assert rolled["view"].get("dropped_in_turn", 0) == 0
    assert any(message["content"] == "Fix every failing test." for message in rolled["messages"])


def test_the_async_memory_has_the_same_window_methods(database: dict) -> None:
    async def run() -> None:
        memory = AsyncMemory(database["db"], schema=database["schema"], user="ana")
        await asyncio.to_thread(_run, memory.sync_memory, "async", 2)
        notes = await memory.write_notes("async", "n", expected_revision=None)
        assert (await memory.read_notes("async"))["revision"] == notes["revision"]
        assert (await memory.new_context("async"))["rolled_over"] is True
        assert (await memory.context_remaining("async", budget=1000))["window"]["number"] == 2
        page = await memory.history_read("async", before=3, include=["system"])
        assert [record["sequence"] for record in page["records"]] == [2, 1]

    asyncio.run(run())


def test_the_worker_never_remembers_a_handoff_or_the_notes(memory: Memory) -> None:
    memory.append("w", "I moved to Porto last spring.")
    memory.append("w", "noted", role="assistant")
    memory.append("w", "Now book the movers.")
    memory.write_notes("w", "My favourite colour is teal.", expected_revision=None)
    rolled = memory.new_context("w", handoff="The user's sister is called Marta.")
    assert rolled["rolled_over"] is True
    assert memory.remember_once()["failed"] == 0
    remembered = str(memory.search("Porto", mode="lexical")["results"])
    assert "Porto" in remembered, "the user's own words are remembered"
    for absent in ("Marta", "sister"):
        assert absent not in str(memory.search(absent, mode="lexical")["results"])
    found = memory.search("favourite colour teal", mode="lexical")["results"]
    assert all(result["id"] == "notes/w" for result in found), found
