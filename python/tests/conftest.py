"""Fixtures: every test runs on a fresh SQLite file, and on a fresh PostgreSQL schema too when
MEMORY_TEST_POSTGRES_URL names a server. The real model is used: its assets come from
MEMORY_ASSETS_DIR, else the repository's assets/ (scripts/fetch-assets.sh fills it)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("MEMORY_ASSETS_DIR", str(REPO / "assets"))

POSTGRES_URL = os.environ.get("MEMORY_TEST_POSTGRES_URL")
BACKENDS = ["sqlite"] + (["postgres"] if POSTGRES_URL else [])


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> dict:
    """`{"db": ..., "schema": ...}` for one fresh database of each backend."""
    if request.param == "sqlite":
        yield {"db": str(tmp_path / "memory.sqlite"), "schema": None}
        return
    schema = f"py_{uuid.uuid4().hex[:16]}"
    yield {"db": POSTGRES_URL, "schema": schema}
    # Each test's schema is dropped afterwards, as memory-postgres's own tests do (psql when present).
    if shutil.which("psql"):
        subprocess.run(
            ["psql", POSTGRES_URL, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
            capture_output=True,
            timeout=30,
            check=False,
        )


@pytest.fixture
def memory(database: dict):
    from agent_memory import Memory

    return Memory(
        database["db"],
        schema=database["schema"],
        namespace={"name": "notes", "version": 1, "identity": {"user": "ana"}},
        scope="assistant",
        user="ana",
    )
