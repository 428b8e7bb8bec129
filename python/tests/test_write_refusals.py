"""Writes that would store nothing or lose an edit are refused: ``add`` of empty or whitespace-only
text is ``InvalidInputError`` with nothing written, and ``add`` with the id of an existing memory
never overwrites it (``ConflictError``; ``update`` replaces a revision). A thread record that says
nothing (blank text or speaker) is refused by ``append`` as by every other door, appending nothing."""

from __future__ import annotations

import pytest

from agent_memory import ConflictError, InvalidInputError, Memory

BLANKS = ["", "   ", "\n\t\u3000"]


def test_add_refuses_blank_text_and_writes_nothing(memory: Memory) -> None:
    for blank in BLANKS:
        with pytest.raises(InvalidInputError) as refused:
            memory.add(blank)
        assert refused.value.kind == "invalid-input"
        with pytest.raises(InvalidInputError):
            memory.add(blank, id="blank")
    assert memory.get("blank") is None
    assert memory.get_all()["results"] == []


def test_add_with_an_existing_id_never_overwrites_it(memory: Memory) -> None:
    first = memory.add("The user prefers green tea.", id="tea")["results"][0]
    with pytest.raises(ConflictError):
        memory.add("The user prefers black tea.", id="tea")
    assert memory.get("tea")["memory"] == "The user prefers green tea."
    updated = memory.update("tea", "The user prefers oolong.", expected_revision=first["revision"])
    assert updated["predecessor"] == first["revision"]
    with pytest.raises(InvalidInputError):
        memory.update("tea", "  ", expected_revision=updated["revision"])
    assert memory.get("tea")["memory"] == "The user prefers oolong."


def test_append_refuses_a_blank_record_and_appends_nothing(memory: Memory) -> None:
    for blank in BLANKS:
        for role in ["user", "assistant"]:
            with pytest.raises(InvalidInputError, match="blank"):
                memory.append("blank", blank, role=role)
        with pytest.raises(InvalidInputError, match="blank"):
            memory.append(
                "blank", record={"speaker": "ana", "body": {"kind": "system_message", "text": blank}}
            )
    with pytest.raises(InvalidInputError, match="blank"):
        memory.append("blank", "Hi.", speaker=" ")
    assert memory.append("blank", "Hi.")["sequence"] == 1
