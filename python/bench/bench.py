"""The Python package's bench (prints figures, asserts none).

1. ``add`` and ``search`` from Python (``agent_memory.Memory``) against the Rust API alone (memory-cli's
   example ``simple_bench``, the same ``simple`` services) on the same data, each on a fresh SQLite
   file: per-call p50/p95 and ``python_overhead_ratio`` = Python search p50 / Rust search p50
   (goal <= 1.2).
2. ``search`` through the LangGraph store (``AgentMemoryStore``) against LangGraph's own
   ``InMemoryStore`` embedding with the same model (``agent_memory._native.embed``), at
   ``BENCH_STORE_ITEMS`` items (default 10,000): search p50/p95 of each.

Usage (from the repository root, after ``bash scripts/python-setup.sh``):
    MEMORY_ASSETS_DIR=$PWD/assets .venv-python/bin/python python/bench/bench.py
Environment: BENCH_ITEMS (default 1000) and BENCH_QUERIES (200) for part 1, BENCH_STORE_ITEMS
(10000) and BENCH_STORE_QUERIES (100) for part 2, BENCH_MODE (hybrid), BENCH_PROFILE (the cargo
profile of the Rust side; build the extension with the same one for a fair ratio: dev by default,
as scripts/python-setup.sh builds it), BENCH_SKIP_STORE=1 to skip part 2. Writes
``eval-report/python-bench.json``.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("MEMORY_ASSETS_DIR", str(REPO / "assets"))

from agent_memory import Memory, _native  # noqa: E402

SUBJECTS = ["Ana", "Bruno", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana", "Ivo", "Jun"]
VERBS = ["likes", "plans", "visited", "cooks", "studies", "repairs", "paints", "collects"]
OBJECTS = [
    "green tea", "old bicycles", "Lisbon bakeries", "jazz records", "mountain trails",
    "sourdough bread", "vintage cameras", "chess openings", "tomato plants", "sailing boats",
    "Japanese woodblock prints", "marathon training", "board games", "bird watching",
]
WHEN = ["on Mondays", "every spring", "since 2019", "with friends", "after work", "in Porto"]


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} (note {i})."
        for i in range(n)
    ]


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    return [f"what does {rng.choice(SUBJECTS)} do with {rng.choice(OBJECTS)}" for _ in range(n)]


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        "calls": len(ordered),
    }


def rust_side(texts: list[str], qs: list[str], mode: str, work: pathlib.Path) -> dict:
    profile = os.environ.get("BENCH_PROFILE", "dev")
    (work / "texts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in texts))
    (work / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    command = [
        "cargo", "run", "--quiet", "--profile", profile, "-p", "memory-cli",
        "--example", "simple_bench", "--",
        str(work / "rust.sqlite"), str(work / "texts.jsonl"), str(work / "queries.jsonl"), mode,
    ]
    answer = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(answer.stdout.strip().splitlines()[-1])


def python_side(texts: list[str], qs: list[str], mode: str, work: pathlib.Path) -> dict:
    memory = Memory(work / "python.sqlite", namespace="bench", scope="agent")
    add_ms = []
    for text in texts:
        started = time.perf_counter()
        memory.add(text)
        add_ms.append((time.perf_counter() - started) * 1000)
    memory.sync()
    search_ms, hits = [], 0
    for q in qs:
        started = time.perf_counter()
        found = memory.search(q, limit=5, mode=mode)
        search_ms.append((time.perf_counter() - started) * 1000)
        hits += len(found["results"])
    return {"add_ms": add_ms, "search_ms": search_ms, "hits": hits}


def store_side(n: int, q: int, work: pathlib.Path) -> dict:
    from langgraph.store.memory import InMemoryStore

    from agent_memory.langgraph import AgentMemoryStore

    texts = corpus(n, seed=7)
    qs = queries(q, seed=7)
    ours = AgentMemoryStore(work / "store.sqlite", index={"fields": ["text"]})
    started = time.perf_counter()
    for i, text in enumerate(texts):
        ours.put(("bench", f"user{i % 10}"), str(i), {"text": text})
    ours.memory.sync()
    ours_load_s = time.perf_counter() - started

    def embed(batch: list[str]) -> list[list[float]]:
        return _native.embed(list(batch))

    theirs = InMemoryStore(index={"dims": 384, "embed": embed, "fields": ["text"]})
    started = time.perf_counter()
    for i in range(0, n, 256):
        from langgraph.store.base import PutOp

        theirs.batch(
            [PutOp(("bench", f"user{j % 10}"), str(j), {"text": texts[j]}) for j in range(i, min(n, i + 256))]
        )
    theirs_load_s = time.perf_counter() - started

    def timed(store) -> list[float]:
        ms = []
        for query in qs:
            started = time.perf_counter()
            store.search(("bench",), query=query, limit=5)
            ms.append((time.perf_counter() - started) * 1000)
        return ms

    ours_ms, theirs_ms = timed(ours), timed(theirs)
    return {
        "items": n,
        "agent_memory_store": {**summary(ours_ms), "load_s": round(ours_load_s, 1), "mode": ours.mode},
        "langgraph_in_memory_store": {**summary(theirs_ms), "load_s": round(theirs_load_s, 1)},
        "search_p50_ratio_ours_over_theirs": round(
            statistics.median(ours_ms) / statistics.median(theirs_ms), 3
        ),
    }


def main() -> None:
    items = int(os.environ.get("BENCH_ITEMS", "1000"))
    nq = int(os.environ.get("BENCH_QUERIES", "200"))
    mode = os.environ.get("BENCH_MODE", "hybrid")
    texts, qs = corpus(items, seed=1), queries(nq, seed=1)
    report: dict = {"items": items, "queries": nq, "mode": mode}
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        rust = rust_side(texts, qs, mode, work)
        python = python_side(texts, qs, mode, work)
        report["rust"] = {"add": summary(rust["add_ms"]), "search": summary(rust["search_ms"]), "hits": rust["hits"]}
        report["python"] = {"add": summary(python["add_ms"]), "search": summary(python["search_ms"]), "hits": python["hits"]}
        report["python_overhead_ratio"] = round(
            report["python"]["search"]["p50_ms"] / report["rust"]["search"]["p50_ms"], 3
        )
        report["python_add_overhead_ratio"] = round(
            report["python"]["add"]["p50_ms"] / report["rust"]["add"]["p50_ms"], 3
        )
        print(json.dumps(report, indent=2), flush=True)
        if os.environ.get("BENCH_SKIP_STORE") != "1":
            report["langgraph_store"] = store_side(
                int(os.environ.get("BENCH_STORE_ITEMS", "10000")),
                int(os.environ.get("BENCH_STORE_QUERIES", "100")),
                work,
            )
            print(json.dumps(report["langgraph_store"], indent=2), flush=True)
    out = REPO / "eval-report"
    out.mkdir(exist_ok=True)
    (out / "python-bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"python_overhead_ratio {report['python_overhead_ratio']} (goal <= 1.2)", file=sys.stderr)


if __name__ == "__main__":
    main()
