"""The Python snippets of the documentation run as written: every ```python block of the README and
of docs/python.md, in order, in one namespace per page, in a fresh folder (a block with top-level
`await` runs on an event loop). A snippet that stops working fails here, so the pages cannot drift
from the package."""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import pathlib
import re

import pytest

from conftest import REPO

PAGES = ["README.md", "docs/python.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(page: str) -> list[tuple[int, str]]:
    text = (REPO / page).read_text()
    return [(text[: found.start()].count("\n") + 1, found.group(1)) for found in BLOCK.finditer(text)]


def test_every_page_with_python_has_snippets() -> None:
    for page in PAGES:
        assert blocks(page), f"{page} shows no Python"


@pytest.mark.parametrize("page", PAGES)
def test_the_python_snippets_of_a_page_run(page: str, tmp_path: pathlib.Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_USER", "ana")
    namespace: dict = {"__name__": "__docs__"}
    for line, code in blocks(page):
        compiled = compile(code, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(compiled, namespace)  # noqa: S307 - the project's own documentation
        if inspect.iscoroutine(result):
            asyncio.run(result)
    assert os.listdir(tmp_path), "the snippets wrote their database in the fresh folder"
