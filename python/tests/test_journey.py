"""A user's second day through another door: what ana said to her hook on Monday and types again into
a Python script on Tuesday is one memory, attributed to her both times. The hook and the package name
the speaker of a user's words by one rule (``--speaker``/``speaker=``, else the user whose memory it
is: ``--user``/``user=``, else ``MEMORY_USER``, else the OS user), so the worker keys the statement the
same way from either door.

The hook is the one `cargo build -p memory-cli` built (`target/debug/memory`, or `MEMORY_BIN`)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from agent_memory import Memory

REPO = pathlib.Path(__file__).resolve().parents[2]
MEMORY_BIN = pathlib.Path(
    os.environ.get("MEMORY_BIN")
    or pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "debug" / "memory"
)
SAID = "I keep a sourdough starter named Bubbles."


def _hook(db: pathlib.Path, env: dict[str, str], session: str, prompt: str) -> None:
    done = subprocess.run(
        [str(MEMORY_BIN), "--db", str(db), "hook", "prompt", "--format", "json", "--no-server"],
        input=json.dumps({"session": session, "prompt": prompt}),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["appended"], done.stdout


@pytest.mark.parametrize("memory_user", [None, "bea"])
def test_a_statement_said_to_the_hook_and_then_through_python_is_one_memory_of_its_speaker(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, memory_user: str | None
) -> None:
    monkeypatch.setenv("USER", "ana")
    monkeypatch.setenv("LOGNAME", "ana")
    monkeypatch.delenv("MEMORY_SPEAKER", raising=False)
    if memory_user is None:
        monkeypatch.delenv("MEMORY_USER", raising=False)
    else:
        monkeypatch.setenv("MEMORY_USER", memory_user)
    person = memory_user or "ana"
    db = tmp_path / "memory.sqlite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_") or k == "MEMORY_ASSETS_DIR"}
    env.update({"USER": "ana", "LOGNAME": "ana"})
    if memory_user is not None:
        env["MEMORY_USER"] = memory_user

    # Monday: the hook records the prompt.
    _hook(db, env, "monday", SAID)
    # Tuesday: the same words through the package, naming neither user nor speaker.
    memory = Memory(db)
    assert memory.user == person
    memory.append("tuesday", SAID)
    memory.remember_once()

    found = memory.search("sourdough starter", limit=5)["results"]
    matching = [result for result in found if "Bubbles" in result["memory"]]
    assert len(matching) == 1, found
    speakers = [attribution["speaker"] for attribution in matching[0]["attributions"]]
    assert speakers == [person, person], matching[0]
