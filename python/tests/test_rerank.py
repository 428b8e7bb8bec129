"""Hybrid recall's ``rerank`` option through the Python package, as the command and MCP take it
(`tests/tests/rerank.rs`): on or off, hybrid recall cites from the same revalidated passages;
``True`` with another mode is refused before any work; ``False`` is accepted with any mode."""

from __future__ import annotations

import pytest

from agent_memory import InvalidInputError, Memory


def _cited(answer: dict) -> set[str]:
    return {passage["source"]["id"] for passage in answer["passages"]}


def test_rerank_is_taken_for_hybrid_and_refused_elsewhere(memory: Memory) -> None:
    memory.put("bees", "Ana keeps bees in the garden behind the house.")
    memory.put("pears", "The orchard has twelve old pear trees that Ana planted.")
    memory.put("clocks", "Her brother repairs clocks in town.")
    memory.sync()
    query = "what does Ana grow in her garden"
    on = memory.recall(query, rerank=True, max_items=10)
    off = memory.recall(query, rerank=False, max_items=10)
    default = memory.recall(query, max_items=10)
    assert _cited(on)
    assert _cited(on) == _cited(off) == _cited(default)
    # The default is the stage on: the same citation order as asking for it.
    assert [p["source"]["id"] for p in default["passages"]] == [
        p["source"]["id"] for p in on["passages"]
    ]
    with pytest.raises(InvalidInputError, match="rerank"):
        memory.recall(query, mode="lexical", rerank=True)
    memory.recall(query, mode="lexical", rerank=False)
