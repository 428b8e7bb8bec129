"""`AgentMemoryStore` against LangGraph's documented BaseStore semantics, and LangMem's tools on it."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp

from agent_memory.langgraph import AgentMemoryStore


@pytest.fixture
def store(database: dict) -> AgentMemoryStore:
    return AgentMemoryStore(database["db"], schema=database["schema"], index={"fields": ["text"]})


def test_put_get_delete(store: AgentMemoryStore) -> None:
    store.put(("users", "ana"), "prefs", {"text": "Ana likes green tea", "n": 1})
    item = store.get(("users", "ana"), "prefs")
    assert item is not None
    assert item.value == {"text": "Ana likes green tea", "n": 1}
    assert item.namespace == ("users", "ana") and item.key == "prefs"
    created = item.created_at
    store.put(("users", "ana"), "prefs", {"text": "Ana likes black coffee", "n": 2})
    again = store.get(("users", "ana"), "prefs")
    assert again.value["n"] == 2 and again.created_at == created
    assert again.updated_at >= item.updated_at
    assert store.get(("users", "bob"), "prefs") is None
    store.delete(("users", "ana"), "prefs")
    assert store.get(("users", "ana"), "prefs") is None
    store.delete(("users", "ana"), "prefs")  # deleting nothing is fine
    store.put(("users", "ana"), "prefs", {"text": "back again"})
    assert store.get(("users", "ana"), "prefs").value == {"text": "back again"}


def test_namespaces_are_validated(store: AgentMemoryStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph",), "k", {"text": "x"})


def test_prefix_search_with_query_and_filters(store: AgentMemoryStore) -> None:
    store.put(("docs", "ana"), "1", {"text": "Ana plays the cello in an orchestra", "year": 2020})
    store.put(("docs", "ana"), "2", {"text": "Ana bakes sourdough bread", "year": 2023})
    store.put(("docs", "bob"), "3", {"text": "Bob plays the violin", "year": 2021})
    store.put(("other",), "4", {"text": "Someone plays the cello too", "year": 2022})

    found = store.search(("docs",), query="music instruments orchestra cello", limit=10)
    assert {i.key for i in found} <= {"1", "2", "3"}
    assert found[0].key == "1" and found[0].score is not None
    ana = store.search(("docs", "ana"), query="cello", limit=10)
    assert {i.key for i in ana} <= {"1", "2"} and ana[0].key == "1"
    everything = store.search((), query="cello", limit=10)
    assert {"1", "4"} <= {i.key for i in everything}

    recent = store.search(("docs",), query="plays", filter={"year": {"$gte": 2021}})
    assert [i.key for i in recent] == ["3"]
    exact = store.search(("docs",), filter={"year": 2023})
    assert [i.key for i in exact] == ["2"] and exact[0].score is None
    ne = store.search(("docs",), filter={"year": {"$ne": 2023}})
    assert {i.key for i in ne} == {"1", "3"}
    listed = store.search(("docs",), limit=2)
    assert len(listed) == 2
    paged = store.search(("docs",), limit=2, offset=2)
    assert len(paged) == 1 and paged[0].key not in {i.key for i in listed}
    assert store.search(("nothing",), query="cello") == []


def test_index_config_and_index_false(database: dict) -> None:
    store = AgentMemoryStore(
        database["db"], schema=database["schema"], name="fields", index={"fields": ["title"]}
    )
    store.put(("n",), "a", {"title": "Gardening tips", "body": "quantum chromodynamics"})
    store.put(("n",), "b", {"title": "Particle physics", "body": "roses"}, index=["body"])
    store.put(("n",), "c", {"title": "Not indexed at all: gardening"}, index=False)
    # Two words: on the one word "gardening" the rerank model reads "roses" as the better answer
    # (logit 8.0 against 1.6 for "Gardening tips"), which says nothing of what is indexed.
    hits = [i.key for i in store.search(("n",), query="gardening tips", limit=1)]
    assert hits == ["a"]
    # Only the embedded fields are searched: "body" of a is not, "body" of b is.
    roses = store.search(("n",), query="roses", limit=3)
    assert roses[0].key == "b"
    # An item stored with index=False is never ranked, but fills a search as unscored.
    filled = store.search(("n",), query="gardening", limit=3)
    assert filled[-1].key == "c" and filled[-1].score is None
    assert store.get(("n",), "c").value["title"].startswith("Not indexed")


def test_list_namespaces(store: AgentMemoryStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]:
        store.put(ns, "k", {"text": "t"})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert store.list_namespaces(limit=1, offset=1) == [("a", "b", "d")]
    store.delete(("a", "x"), "k")
    assert ("a", "x") not in store.list_namespaces()


def test_batch_and_abatch(store: AgentMemoryStore) -> None:
    results = store.batch(
        [
            PutOp(("b",), "1", {"text": "first item about lakes"}),
            PutOp(("b",), "2", {"text": "second item about deserts"}),
            GetOp(("b",), "1"),
            SearchOp(("b",), None, 10, 0, "lakes"),
            ListNamespacesOp(None, None, 10, 0),
        ]
    )
    assert results[0] is None and results[2].value == {"text": "first item about lakes"}
    assert results[3][0].key == "1"
    assert results[4] == [("b",)]

    async def main() -> None:
        await store.aput(("b",), "3", {"text": "third item about rivers"})
        item = await store.aget(("b",), "3")
        assert item is not None and item.key == "3"
        found = await store.asearch(("b",), query="rivers", limit=1)
        assert found[0].key == "3"
        assert await store.alist_namespaces() == [("b",)]
        await store.adelete(("b",), "3")
        assert await store.aget(("b",), "3") is None

    asyncio.run(main())


def test_stores_in_one_database_are_apart(database: dict) -> None:
    one = AgentMemoryStore(database["db"], schema=database["schema"], name="one")
    two = AgentMemoryStore(database["db"], schema=database["schema"], name="two")
    one.put(("n",), "k", {"text": "only in one"})
    assert two.get(("n",), "k") is None
    assert two.search(("n",), query="only in one") == []


def test_langmem_tools_on_the_store(database: dict) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    # No index config: every value is embedded whole, as LangGraph's default ("$") does.
    store = AgentMemoryStore(database["db"], schema=database["schema"], name="langmem")

    namespace = ("memories", "{langgraph_user_id}")
    manage = create_manage_memory_tool(namespace=namespace, store=store)
    search = create_search_memory_tool(namespace=namespace, store=store)
    config = {"configurable": {"langgraph_user_id": "ana"}}

    created = manage.invoke({"content": "Ana is allergic to peanuts.", "action": "create"}, config)
    assert created.startswith("created memory ")
    memory_id = created.split()[-1]
    manage.invoke({"content": "Ana runs marathons.", "action": "create"}, config)
    stored = store.search(("memories", "ana"), limit=10)
    assert {i.value["content"] for i in stored} == {
        "Ana is allergic to peanuts.",
        "Ana runs marathons.",
    }

    result = search.invoke({"query": "food allergies", "limit": 1}, config)
    text = result if isinstance(result, str) else result[0]
    assert "peanuts" in text and "marathons" not in text

    manage.invoke(
        {"content": "Ana is allergic to peanuts and shellfish.", "action": "update", "id": memory_id},
        config,
    )
    assert store.get(("memories", "ana"), memory_id).value["content"].endswith("shellfish.")
    manage.invoke({"action": "delete", "id": memory_id}, config)
    assert store.get(("memories", "ana"), memory_id) is None
    other = {"configurable": {"langgraph_user_id": "bob"}}
    assert "marathons" not in str(search.invoke({"query": "marathons"}, other))

    async def main() -> None:
        answer = await manage.ainvoke({"content": "Ana speaks Portuguese.", "action": "create"}, config)
        assert answer.startswith("created memory ")
        found = await search.ainvoke({"query": "languages spoken"}, config)
        assert "Portuguese" in str(found)

    asyncio.run(main())
