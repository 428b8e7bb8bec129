"""asyncio and threads: one engine shared, the GIL released while Rust works."""

from __future__ import annotations

import asyncio
import threading
import time

from agent_memory import AsyncMemory, Memory


def test_threads_share_one_memory(memory: Memory) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                memory.add(f"Thread {n} remembers item {i} about sailing.")
                assert memory.search("sailing", mode="lexical", limit=5)["results"]
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    total, page = 0, memory.get_all(limit=100)
    while True:
        total += len(page["results"])
        if not page["next_cursor"]:
            break
        page = memory.get_all(cursor=page["next_cursor"], limit=100)
    assert total == 30


def test_the_gil_is_released_during_a_call(memory: Memory) -> None:
    for i in range(20):
        memory.add(f"Document {i} about mountains and rivers and the sea.")
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    started = time.perf_counter()
    memory.sync()  # loads the model and embeds: long enough to see the other thread run
    memory.search("rivers", mode="exact")
    elapsed = time.perf_counter() - started
    done.set()
    counter.join()
    assert elapsed > 0
    assert ticks > 100


def test_async_memory(database: dict) -> None:
    async def main() -> None:
        memory = AsyncMemory(
            database["db"], schema=database["schema"], namespace="async", scope="s", user="u"
        )
        added = await asyncio.gather(*(memory.add(f"Async fact {i} about kites.") for i in range(8)))
        ids = {a["results"][0]["id"] for a in added}
        assert len(ids) == 8
        found = await memory.search("kites", mode="lexical", limit=10)
        assert {r["id"] for r in found["results"]} == ids
        one = next(iter(ids))
        assert (await memory.get(one))["id"] == one
        assert len((await memory.get_all(limit=100))["results"]) == 8
        updated = await memory.update(one, "Async fact about red kites.")
        assert (await memory.history(one))[0]["revision"] == updated["revision"]
        await memory.delete(one, reason="done")
        assert await memory.get(one) is None
        appended = await memory.append("t-1", "I fly kites on Sundays.")
        assert appended["sequence"] == 1
        assert (await memory.remember_once())["failed"] == 0
        assert (await memory.sync())["indexed"] > 0
        recalled = await memory.recall("Sunday kites", mode="hybrid", max_items=3)
        assert recalled["passages"]
        receipt = await memory.put("p", "Precise words.")
        await memory.withdraw("p", expected_revision=receipt["revision"], reason="r")
        assert await memory.read("p") is None

    asyncio.run(main())
