"""The context layer from Python: a turn's model input, compaction and the history tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from agent_memory import AsyncMemory, InvalidInputError, Memory


def _record(kind: str, speaker: str, **body: object) -> dict:
    return {"speaker": speaker, "body": {"kind": kind, **body}}


def _thread(memory: Memory, thread: str, turns: int) -> None:
    memory.append(thread, record=_record("system_message", "host", text="You plan trips."))
    for turn in range(turns):
        memory.append(thread, f"Book leg {turn} of the trip to Lisbon, please.")
        memory.append(
            thread,
            record=_record(
                "tool_call", "assistant", call_id=f"c{turn}", name="book", arguments={"leg": turn}
            ),
        )
        memory.append(
            thread,
            record=_record(
                "tool_result",
                "book",
                call_id=f"c{turn}",
                output=f"booked leg {turn}: ref ACCT-{1000 + turn} " + "x" * 400,
                is_error=False,
            ),
        )
        memory.append(thread, f"Leg {turn} is booked.", role="assistant")
    memory.append(thread, "Where do I live again?")


def test_a_turn_is_assembled_within_its_budget_with_its_memory(memory: Memory) -> None:
    memory.add("Ana lives in Lisbon.")
    _thread(memory, "trip", 30)
    assembled = memory.context("trip", 2_000)
    messages = assembled["messages"]
    assert messages[0] == {"role": "system", "content": "You plan trips."}
    assert assembled["view"]["tokens"] <= 2_000 and assembled["view"]["dropped"]
    assert assembled["tokens"] <= 2_000
    assert assembled["view"]["fits"] is False
    assert messages[-2]["content"] == "Where do I live again?"
    assert messages[-1]["role"] == "user" and "Ana lives in Lisbon." in messages[-1]["content"]
    assert assembled["memory"]["reused"] is False
    for index, message in enumerate(messages):
        for offset, call in enumerate(message.get("tool_calls", []), start=1):
            assert messages[index + offset]["tool_call_id"] == call["id"]
    again = memory.context("trip", 2_000)
    assert again["messages"] == messages and again["memory"]["reused"] is True
    history = memory.history_read("trip", limit=500)["records"]
    assert not any("Ana lives in Lisbon." in record["text"] for record in history)


def test_compaction_folds_the_window_and_the_history_keeps_every_record(memory: Memory) -> None:
    _thread(memory, "trip", 12)
    with pytest.raises(InvalidInputError):
        memory.compact("trip", measured_input_tokens=None)
    both = ["system", "operational"]
    before = memory.history_read("trip", limit=500, include=both)["records"]
    plan = memory.compact("trip", measured_input_tokens=40_000, keep_tokens=200)["plan"]
    assert plan["folded"] and plan["through"] is not None
    assert any("ACCT-1000" in message["content"] for message in plan["messages"])
    too_long = "x" * (plan["replaced_chars"] + 1)
    refused = memory.compact(
        "trip", measured_input_tokens=40_000, keep_tokens=200, summary=too_long,
        through=plan["through"],
    )
    assert refused["compaction"]["outcome"] == "not_smaller"
    done = memory.compact(
        "trip", measured_input_tokens=40_000, keep_tokens=200,
        summary="Legs 0 to 10 of the Lisbon trip are booked.", through=plan["through"],
        summarizer="cheap-model",
    )
    assert done["compaction"]["outcome"] == "folded"
    window = memory.context("trip", 100_000, memory=False)["messages"]
    assert window[1]["content"].startswith("[compacted history:")
    assert "cheap-model" in window[1]["content"]
    assert not any("ACCT-1000" in message["content"] for message in window)
    after = memory.history_read("trip", limit=500, include=both)["records"]
    assert [r["text"] for r in after[: len(before)]] == [r["text"] for r in before]
    assert len(after) == len(before) + 2
    found = memory.history_search("trip", "acct-1000")["matches"]
    assert len(found) == 1 and found[0]["folded"] is True


def test_the_ledger_refuses_unmeasured_calls_and_records_a_summarizer_failure(
    memory: Memory,
) -> None:
    _thread(memory, "ledger", 6)
    before = memory.history_read("ledger", limit=500)["records"]
    with pytest.raises(InvalidInputError):
        memory.compact("ledger", measured_input_tokens=0)
    plan = memory.compact("ledger", measured_input_tokens=40_000, keep_tokens=200)["plan"]
    with pytest.raises(InvalidInputError):
        memory.compact(
            "ledger", measured_input_tokens=40_000, keep_tokens=200, summary="s" * 65_537,
            through=plan["through"],
        )
    assert memory.history_read("ledger", limit=500)["records"] == before
    failed = memory.compact(
        "ledger", measured_input_tokens=40_000, keep_tokens=200,
        summarizer_failed="the endpoint timed out", through=plan["through"],
    )["compaction"]
    assert failed["outcome"] == "summarizer_failed"
    assert failed["failure"] == "the endpoint timed out" and failed["folded"] == []
    assert any(refusal["reason"] == "summarizer_failed" for refusal in failed["refusals"])
    window = memory.context("ledger", 100_000, memory=False)["messages"]
    assert any("ACCT-1000" in message["content"] for message in window), "nothing folded"


def test_async_context(memory: Memory, database: dict) -> None:
    _thread(memory, "async-trip", 2)

    async def run() -> dict:
        async_memory = AsyncMemory(
            database["db"],
            schema=database["schema"],
            namespace={"name": "notes", "version": 1, "identity": {"user": "ana"}},
            scope="assistant",
            user="ana",
        )
        return await async_memory.context("async-trip", 2_000, memory=False)

    assembled = asyncio.run(run())
    assert assembled["view"]["fits"] is True
    assert assembled["messages"][-1]["content"] == "Where do I live again?"


def test_a_compacted_thread_and_its_memory_reach_the_next_days_process_and_no_other_user(
    database: dict,
) -> None:
    # Monday: one process talks on a thread, remembers it and compacts its window, then exits.
    monday = """
import sys
from agent_memory import Memory
memory = Memory(sys.argv[1], schema=sys.argv[2] or None, user="ana")
memory.append("monday", "My sister Ana grows tomatoes in Porto.")
memory.append("monday", "Noted: your sister grows tomatoes in Porto.", role="assistant")
memory.append("monday", "Thanks, that is all for today.")
assert memory.remember_once()["failed"] == 0
plan = memory.compact("monday", measured_input_tokens=900, keep_tokens=0)["plan"]
done = memory.compact(
    "monday", measured_input_tokens=900, keep_tokens=0, summary="Tomatoes: Ana, in Porto.",
    through=plan["through"],
)
assert done["compaction"]["outcome"] == "folded", done
"""
    subprocess.run(
        [sys.executable, "-c", monday, database["db"], database["schema"] or ""],
        check=True,
        timeout=300,
    )
    # Tuesday, a new process: Monday's window is its summary, Monday's words are in its history, and a
    # new thread's turn recalls Monday's memory. Another user of the database sees none of it.
    ana = Memory(database["db"], schema=database["schema"], user="ana")
    window = ana.context("monday", 4_000, memory=False)["messages"]
    assert window[0]["content"].startswith("[compacted history:")
    assert window[0]["content"].endswith("Tomatoes: Ana, in Porto.")
    assert ana.history_search("monday", "grows tomatoes")["matches"][0]["folded"] is True
    ana.append("tuesday", "Where do the tomatoes grow?")
    turn = ana.context("tuesday", 4_000)
    assert "My sister Ana grows tomatoes in Porto." in turn["messages"][-1]["content"]
    assert turn["memory"]["reused"] is False
    bob = Memory(database["db"], schema=database["schema"], user="bob")
    bob.append("tuesday-bob", "Where do the tomatoes grow?")
    seen = " ".join(m["content"] for m in bob.context("tuesday-bob", 4_000)["messages"])
    assert "Porto" not in seen


def test_a_forgotten_record_is_a_placeholder_in_context_history_read_and_search(
    memory: Memory,
) -> None:
    secret = "My bank PIN is K-4417 and my password is hunter2."
    first = memory.append("vault", secret)["sequence"]
    memory.append("vault", "Noted.", role="assistant")
    memory.append("vault", "What is the weather like?")
    assert any("K-4417" in m["content"] for m in memory.context("vault", 2_000)["messages"])
    memory.forget("vault", first, reason="the user asked")

    turn = memory.context("vault", 2_000)
    placeholder = json.loads(turn["messages"][0]["content"])
    assert placeholder["forgotten"] is True and placeholder["sequence"] == first
    assert isinstance(placeholder["forgotten_at"], int)
    assert turn["memory"] is None or turn["memory"]["reused"] is False
    assert "K-4417" not in json.dumps(turn)
    records = memory.history_read("vault")["records"]
    assert records[0]["forgotten"] is True and records[0]["text"] == turn["messages"][0]["content"]
    assert "K-4417" not in json.dumps(records) and "hunter2" not in json.dumps(records)
    assert memory.history_search("vault", "K-4417")["matches"] == []
    assert memory.history_search("vault", "hunter2")["matches"] == []
    assert [r["sequence"] for r in memory.history_search("vault", "weather")["matches"]] == [3]
