"""The model settings are the worker's (``remembering-worker --model-url --model --model-key-file``):
``remember_once`` asks the OpenAI-compatible endpoint they name, keeps only what the user said in the
quoted words, and reads the same ``MEMORY_MODEL_*`` variables when no argument is given. The endpoint
here is a loopback stub answering as a well-behaved model would."""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_memory import InvalidInputError, Memory


class Stub:
    """A chat-completions endpoint on loopback: each user record of the batch becomes a memory
    whose text names the speaker, quoting the record whole; one invented memory is proposed too."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict, str | None]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((body, self.headers.get("Authorization")))
                if body["messages"][0]["content"].startswith("You write the summary"):
                    self.answer("Ana talked about her bees at length.")
                    return
                memories = []
                for line in body["messages"][1]["content"].splitlines():
                    if not line.startswith("[") or " (user): " not in line:
                        continue
                    number, said = line[1:].split("] ", 1)
                    text = said.split(" (user): ", 1)[1]
                    memories.append(
                        {"text": f"Ana says: {text}", "evidence": [{"record": int(number), "quote": text}], "corrects": None}
                    )
                    memories.append(
                        {"text": "Ana keeps 40 hives.", "evidence": [{"record": int(number), "quote": text}], "corrects": None}
                    )
                self.answer(json.dumps({"memories": memories}))

            def answer(self, content: str) -> None:
                answer = {
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[Stub]:
    endpoint = Stub()
    yield endpoint
    endpoint.close()


def test_the_model_settings_are_the_workers(
    database: dict, stub: Stub, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidInputError):
        Memory(database["db"], schema=database["schema"], model_url=stub.url)
    with pytest.raises(InvalidInputError):
        Memory(database["db"], schema=database["schema"], model_url=stub.url, model="m", model_fallback="maybe")
    key_file = tmp_path / "model.key"
    key_file.write_text("sk-python-test\n")
    memory = Memory(
        database["db"],
        schema=database["schema"],
        namespace="hives",
        user="ana",
        model_url=stub.url,
        model="stub-model",
        model_key_file=key_file,
    )
    memory.append("bees", "I keep three beehives on the roof.")
    memory.remember_once()
    assert len(stub.requests) == 1
    body, authorization = stub.requests[0]
    assert body["model"] == "stub-model"
    assert authorization == "Bearer sk-python-test"
    texts = [passage["content"]["text"] for passage in memory.recall("beehives roof hives", mode="lexical")["passages"]]
    assert texts == ["Ana says: I keep three beehives on the roof."]
    extraction = memory.status()["threads"]["extraction"]
    assert extraction["model"]["calls"] == 1
    assert extraction["model"]["prompt_tokens"] == 50
    assert extraction["dropped"]["unsupported_text"] == 1

    # No argument: the variables name the model, as they do for the binary.
    monkeypatch.setenv("MEMORY_MODEL_URL", stub.url)
    monkeypatch.setenv("MEMORY_MODEL", "from-env")
    from_env = Memory(database["db"], schema=database["schema"], namespace="hives-env", user="ana")
    from_env.append("bees-env", "I sell honey at the market.")
    from_env.remember_once()
    assert stub.requests[-1][0]["model"] == "from-env"
    texts = [passage["content"]["text"] for passage in from_env.recall("honey market", mode="lexical")["passages"]]
    assert texts == ["Ana says: I sell honey at the market."]


def test_compact_asks_the_model_for_its_summary(database: dict, stub: Stub) -> None:
    """``compact(summarize=True)`` is ``memory_compact`` with ``summarize``: the model named by the
    settings writes the summary, named in the ledger with its tokens; without a model it is
    unavailable."""
    from agent_memory import UnavailableError

    plain = Memory(database["db"], schema=database["schema"], namespace="bees", user="ana")
    plain.append("hive-talk", "I keep bees. " * 80)
    plain.append("hive-talk", "They are calm in winter.", role="assistant")
    plain.append("hive-talk", "What about spring?")
    with pytest.raises(UnavailableError):
        plain.compact("hive-talk", measured_input_tokens=9_000, keep_tokens=0, summarize=True)

    memory = Memory(
        database["db"], schema=database["schema"], namespace="bees", user="ana", model_url=stub.url, model="summarizer"
    )
    answer = memory.compact("hive-talk", measured_input_tokens=9_000, keep_tokens=0, summarize=True)
    record = answer["compaction"]
    assert record["outcome"] == "folded"
    assert record["summary"] == "Ana talked about her bees at length."
    assert record["summarizer"] == "summarizer"
    assert record["summarizer_tokens"] == {"prompt": 50, "completion": 9}
    assert stub.requests[-1][0]["messages"][0]["content"].startswith("You write the summary")
