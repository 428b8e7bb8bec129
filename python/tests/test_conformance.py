"""The Python door of the conformance suite (issue 41; the Rust doors are `tests/tests/conformance.rs`):
one user's scenario through the package's engine and through the built `memory` command, each on its
own fresh SQLite file; the answers must be identical, what differs by nature aside (times, which index
answered and its position, who a withdrawal names, and so the withdrawal's revision: revisions are
compared by their order of first appearance).

The command is the one `cargo build -p memory-cli` built (`target/debug/memory`, or `MEMORY_BIN`); the
README's test command builds it before this suite runs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
from typing import Any, Callable

import pytest

from agent_memory import Memory

REPO = pathlib.Path(__file__).resolve().parents[2]
MEMORY_BIN = pathlib.Path(
    os.environ.get("MEMORY_BIN")
    or pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "debug" / "memory"
)
WORKER_BIN = MEMORY_BIN.with_name("remembering-worker")
NAMESPACE = {"name": "notes", "version": 1, "identity": {"user": "u1"}}
MODES = ["lexical", "recent", "exact", "hnsw", "hybrid"]
# What may differ between doors by nature: one list for this suite and the Rust doors' suite.
DIFFERING = set(json.loads((REPO / "tests" / "conformance-differing.json").read_text())["fields"])
REVISION = re.compile(r"^r[0-9a-f]{32}$")

Call = Callable[[str, dict[str, Any]], Any]


def _normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if k not in DIFFERING}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        if isinstance(inner, dict):
            return json.dumps(_normalized(inner), sort_keys=True)
    return value


def _numbered(answers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    seen: list[str] = []

    def renumber(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: renumber(v) for k, v in value.items()}
        if isinstance(value, list):
            return [renumber(v) for v in value]
        if isinstance(value, str) and REVISION.match(value):
            if value not in seen:
                seen.append(value)
            return f"rev-{seen.index(value)}"
        return value

    return [(step, renumber(answer)) for step, answer in answers]


def _put(id: str, text: str, operation_id: str | None = None, expected: str | None = None) -> dict:
    return {
        "namespace": NAMESPACE,
        "id": id,
        "operation_id": operation_id or f"op-{id}",
        "expected_revision": expected,
        "locator": f"chat:{id}",
        "scopes": ["assistant"],
        "content": {
            "text": text,
            "attributions": [
                {
                    "origin_id": f"msg-{id}",
                    "speaker": "user",
                    "observers": ["assistant"],
                    "locator": f"chat:{id}#1",
                    "activity_at": 1767225600000,
                    "interpretation": "stated",
                }
            ],
            "metadata": {},
            "recorded_at": 1767225600000,
            "extracted_at": 1767225600000,
        },
    }


def _recall(query: str, mode: str) -> dict:
    return {
        "namespace": NAMESPACE,
        "scope": "assistant",
        "query": query,
        "mode": mode,
        "limits": {"max_items": 3, "max_bytes": 20000, "max_tokens": 5000, "timeout_ms": 60000},
    }


def _scenario(call: Call, history: Callable[[str], Any], context: Callable[[], Any],
              worker: Callable[[], None]) -> list[tuple[str, Any]]:
    answers: list[tuple[str, Any]] = []

    def record(step: str, answer: Any) -> None:
        answers.append((step, _normalized(answer)))

    for id, text in [
        ("tea", "Ana drinks green tea every morning."),
        ("city", "Ana moved to Lisbon last spring."),
        ("pet", "Ana's cat Miso sleeps on the piano."),
    ]:
        record(f"put {id}", call("put", _put(id, text)))
    first = call("get", {"namespace": NAMESPACE, "id": "tea"})["document"]["revision"]
    record("put tea again", call("put", _put("tea", "Ana switched to black coffee.", "op-tea-2", first)))
    record("stale put", call("put", _put("tea", "Ana drinks milk.", "op-tea-stale", first)))
    record("get tea", call("get", {"namespace": NAMESPACE, "id": "tea"}))
    record("sync", call("sync", {}))
    for mode in MODES:
        record(f"recall {mode}", call("recall", _recall("What does Ana drink?", mode)))
    pet = call("get", {"namespace": NAMESPACE, "id": "pet"})["document"]["revision"]
    record(
        "withdraw pet",
        call(
            "withdraw",
            {
                "namespace": NAMESPACE,
                "id": "pet",
                "operation_id": "op-pet-gone",
                "expected_revision": pet,
                "reason": "asked to forget",
            },
        ),
    )
    record("history tea", history("tea"))
    record("history pet", history("pet"))
    for mode in MODES:
        record(
            f"recall {mode} after withdraw",
            call("recall", _recall("Which pet sleeps on the piano?", mode)),
        )
    for at, text in [
        (1767225600000, "I live in Porto now, near the river."),
        (1767225660000, "My bank PIN is 4417."),
        (1767225720000, "Which city do I live in?"),
        (1767225780000, "Actually, I live in Braga now, not Porto."),
    ]:
        record(
            f"append {at}",
            call(
                "thread_append",
                {
                    "thread": "t1",
                    "record": {
                        "speaker": "ana",
                        "occurred_at": at,
                        "body": {"kind": "user_input", "text": text},
                    },
                    "namespace": NAMESPACE,
                    "scope": "assistant",
                },
            ),
        )
    record("forget the PIN", call("thread_forget", {"thread": "t1", "sequence": 2, "reason": "a secret"}))
    worker()
    record("sync after the worker", call("sync", {}))
    for mode in MODES:
        record(
            f"recall {mode} of the conversation",
            call("recall", _recall("Where does Ana live?", mode)),
        )
    record("context", context())
    return _numbered(answers)


def _cli(db: pathlib.Path) -> tuple[Call, Callable[[str], Any], Callable[[], Any], Callable[[], None]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_") or k == "MEMORY_ASSETS_DIR"}

    def run(*args: str) -> Any:
        done = subprocess.run(
            [str(MEMORY_BIN), "--db", str(db), *args], capture_output=True, text=True, env=env
        )
        answer = json.loads(done.stdout)
        if done.returncode != 0:
            return {"refused": answer["error"]["kind"]}
        return answer

    def call(operation: str, arguments: dict[str, Any]) -> Any:
        text = json.dumps(arguments)
        if operation.startswith("thread_"):
            return run("thread", operation.removeprefix("thread_"), text)
        return run(operation, text)

    def history(id: str) -> Any:
        return run("history", json.dumps({"namespace": NAMESPACE, "id": id, "limit": 10}))["revisions"]

    def context() -> Any:
        return run("context", "t1", "--budget", "4000", "--query", "Which city does Ana live in?")

    def worker() -> None:
        subprocess.run([str(WORKER_BIN), "--db", str(db), "--once"], check=True, env=env,
                       capture_output=True)

    return call, history, context, worker


def _package(memory: Memory) -> tuple[Call, Callable[[str], Any], Callable[[], Any], Callable[[], None]]:
    from agent_memory.errors import MemoryError as Refused

    def call(operation: str, arguments: dict[str, Any]) -> Any:
        try:
            return memory.call(operation, arguments)
        except Refused as refused:
            return {"refused": refused.kind}

    def history(id: str) -> Any:
        return memory.call("get", {"namespace": NAMESPACE, "id": id, "revisions": 10})["revisions"]

    def context() -> Any:
        return memory.call(
            "context", {"thread": "t1", "budget": 4000, "query": "Which city does Ana live in?"}
        )

    def worker() -> None:
        memory.remember_once()

    return call, history, context, worker


@pytest.mark.skipif(not MEMORY_BIN.exists(), reason=f"no built `memory` at {MEMORY_BIN}")
def test_the_package_answers_the_scenario_as_the_command_line(tmp_path: pathlib.Path) -> None:
    through_cli = _scenario(*_cli(tmp_path / "cli.sqlite"))
    memory = Memory(tmp_path / "py.sqlite", namespace=NAMESPACE, scope="assistant", user="ana")
    through_package = _scenario(*_package(memory))

    assert any(step == "stale put" and a == {"refused": "conflict"} for step, a in through_cli)
    # The correction in words leads what it corrects, which names it.
    hybrid = dict(through_cli)["recall hybrid of the conversation"]
    assert "Braga" in hybrid["passages"][0]["content"]["text"], hybrid
    assert hybrid["passages"][1]["corrected_by"] == "memory:1", hybrid
    assert [step for step, _ in through_package] == [step for step, _ in through_cli]
    for (step, expected), (_, found) in zip(through_cli, through_package):
        assert found == expected, f"the package answers `{step}` differently from the command line"
