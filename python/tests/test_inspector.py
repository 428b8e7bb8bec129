"""The web inspector (`memory serve --http`'s `/ui`) in a real headless browser: Debian's Chromium,
driven by Playwright through its executable path (never a browser download), with axe-core from the
npm registry injected into each page for an accessibility scan. Both come from
`scripts/browser-setup.sh`, which the README's test command runs (its paths in `MEMORY_CHROMIUM` and
`MEMORY_AXE_CORE`). Screenshots of each page are written to `target/inspector-screenshots/`.

Sign in with a wrong token and then the right one; search and see ana's passage with its
provenance, its `<script>` shown as text and run never; forget it from the page and see it gone from
the page and from `memory recall`; a thread with a long tool run and its context preview; every page
scanned with no serious accessibility violation."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MEMORY_BIN = pathlib.Path(
    os.environ.get("MEMORY_BIN")
    or pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "debug" / "memory"
)
CHROMIUM = os.environ.get("MEMORY_CHROMIUM") or "/usr/bin/chromium"
AXE_CORE = pathlib.Path(
    os.environ.get("MEMORY_AXE_CORE")
    or REPO / "target" / "axe-core" / "node_modules" / "axe-core" / "axe.min.js"
)
SCREENSHOTS = REPO / "target" / "inspector-screenshots"
NAMESPACE = {"name": "notes", "version": 1, "identity": {"user": "ana"}}
TOKEN = "ana-browser-token-5e1f"
TEXT = "<script>alert(1)</script> Ana grows tomatoes in Porto."
# As the machine's notes say: a closed network, so no background connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_") or k == "MEMORY_ASSETS_DIR"}


def _memory(db: pathlib.Path, *args: str, stdin: str | None = None) -> dict:
    done = subprocess.run(
        [str(MEMORY_BIN), "--db", str(db), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.fixture
def inspector(tmp_path: pathlib.Path) -> Iterator[tuple[str, pathlib.Path]]:
    """A `memory serve --http` with a token and ana's passage; yields its base URL and database."""
    for needed in (MEMORY_BIN, pathlib.Path(CHROMIUM), AXE_CORE):
        assert needed.is_file(), f"{needed} is missing: run `bash scripts/browser-setup.sh` (and build)"
    db = tmp_path / "memory.sqlite"
    put = {
        "namespace": NAMESPACE,
        "id": "tomatoes",
        "operation_id": "tomatoes-1",
        "expected_revision": None,
        "locator": "thread:chat-1#4",
        "scopes": ["assistant"],
        "content": {
            "text": TEXT,
            "attributions": [
                {
                    "origin_id": "thread-record/chat-1/4",
                    "speaker": "ana",
                    "observers": [],
                    "locator": "thread:chat-1#4",
                    "activity_at": 1760000000000,
                    "interpretation": "stated",
                }
            ],
            "metadata": {},
            "recorded_at": 0,
            "extracted_at": 0,
        },
    }
    _memory(db, "put", "-", stdin=json.dumps(put))
    # A long tool run on ana's thread.
    def append(body: dict, speaker: str) -> None:
        record = {"speaker": speaker, "observers": [], "occurred_at": None, "body": body}
        argument = {"thread": "run-1", "record": record, "namespace": NAMESPACE, "scope": "assistant"}
        _memory(db, "thread", "append", json.dumps(argument))

    append({"kind": "user_input", "text": "Run the whole test suite."}, "ana")
    for index in range(25):
        call = {"kind": "tool_call", "call_id": f"c{index}", "name": "run_tests", "arguments": {}}
        append(call, "assistant")
        output = f"shard {index}: " + "ok " * 200
        append({"kind": "tool_result", "call_id": f"c{index}", "output": output, "is_error": False}, "tool")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    server = subprocess.Popen(
        [
            str(MEMORY_BIN), "--db", str(db), "serve", "--http", "127.0.0.1:0",
            "--token-file", str(token), "--namespace", json.dumps(NAMESPACE), "--scope", "assistant",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert server.stderr is not None
        url = None
        for line in server.stderr:
            if line.startswith("memory: serving MCP at "):
                url = line.removeprefix("memory: serving MCP at ").strip()
                break
        assert url, "the server announced its URL"
        yield url.removesuffix("/mcp"), db
    finally:
        server.terminate()
        server.wait(timeout=30)


def _serious(page, axe: str) -> list[str]:  # noqa: ANN001 - Playwright's Page
    page.add_script_tag(content=axe)
    results = page.evaluate("async () => await axe.run()")
    return [
        f"{violation['id']}: {violation['help']}"
        for violation in results["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


def test_the_inspector_in_a_real_browser(inspector: tuple[str, pathlib.Path]) -> None:
    from playwright.sync_api import sync_playwright

    base, db = inspector
    axe = AXE_CORE.read_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    dialogs: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(f"{base}/ui")
            page.screenshot(path=str(SCREENSHOTS / "sign-in.png"), full_page=True)

            page.get_by_label("Token").fill("not-a-token")
            page.get_by_role("button", name="Sign in").click()
            assert "holds no grant" in page.get_by_role("alert").inner_text()

            page.get_by_label("Token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"{base}/ui/memories")
            assert TOKEN not in page.url
            listed = page.locator("ol.memories li").first
            assert listed.locator("p.text").inner_text() == TEXT, "the markup is shown as text"
            page.screenshot(path=str(SCREENSHOTS / "memories.png"), full_page=True)

            page.get_by_label("Search").fill("tomatoes")
            page.get_by_label("Mode").select_option("lexical")
            page.get_by_role("button", name="Search").click()
            passage = page.locator("ol.memories li").first
            assert passage.locator("p.text").inner_text() == TEXT
            assert "ana" in passage.locator("dl.provenance").inner_text()
            assert "memory:1" in passage.locator("dl.provenance").inner_text()
            page.screenshot(path=str(SCREENSHOTS / "search.png"), full_page=True)

            passage.get_by_label("Why forget it").fill("the user asked")
            passage.get_by_role("button", name="Forget").click()
            assert "Forgotten: tomatoes" in page.get_by_role("status").inner_text()
            assert page.get_by_text("No memories yet.").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "forgotten.png"), full_page=True)
            assert dialogs == [], "no script ran"

            page.get_by_role("link", name="Threads").click()
            page.get_by_label("Thread").fill("run-1")
            page.get_by_label("Budget (tokens) of the context preview").fill("1500")
            page.get_by_role("button", name="Show").click()
            assert "Context preview" in page.content()
            assert page.get_by_text("#51 tool_result").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "thread.png"), full_page=True)

            # The scan injects axe-core, so its page ignores the policy that forbids every script.
            scanner = browser.new_context(bypass_csp=True).new_page()
            for path in ("/ui", "/ui?expired=1"):
                scanner.goto(f"{base}{path}")
                assert _serious(scanner, axe) == [], path
            scanner.goto(f"{base}/ui")
            scanner.get_by_label("Token").fill(TOKEN)
            scanner.get_by_role("button", name="Sign in").click()
            for path in (
                "/ui/memories",
                "/ui/memories?q=tomatoes&mode=hybrid",
                "/ui/threads",
                "/ui/threads?thread=run-1&budget=1500",
            ):
                scanner.goto(f"{base}{path}")
                assert _serious(scanner, axe) == [], path
        finally:
            browser.close()

    recalled = _memory(
        db,
        "recall",
        json.dumps(
            {
                "namespace": NAMESPACE,
                "scope": "assistant",
                "query": "tomatoes Porto",
                "mode": "lexical",
                "limits": {"max_items": 5, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000},
            }
        ),
    )
    assert recalled["passages"] == [], "forgotten from the page is forgotten everywhere"
