"""The web inspector (`memory serve --http`'s `/ui`) in a real headless browser: Debian's Chromium,
driven by Playwright through its executable path (never a browser download), with axe-core from the
npm registry injected into each page for an accessibility scan. Both come from
`scripts/browser-setup.sh`, which the README's test command runs (its paths in `MEMORY_CHROMIUM` and
`MEMORY_AXE_CORE`). Screenshots of each page are written to `target/inspector-screenshots/`.

Sign in with a wrong token and then ana's; search and see her passage with its provenance, its
`<script>` shown as text and run never; forget it from the page and see it gone from the page, from
the assembled context and from `memory recall`; correct another memory and read its revisions; a form
posted from another site refused; bob's token sees none of ana's memory and reaches none of it by URL;
the overview for the operator's token only; a thread with a long tool run and its context preview; a
server restart answered with a plain message; every page scanned with no serious accessibility violation and
readable at 400% zoom (a 320-pixel-wide viewport, with nothing scrolling sideways)."""

from __future__ import annotations

import hashlib
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
BOB = "bob-browser-token-92c4"
OPS = "ops-browser-token-7d03"
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


def _grant(name: str, token: str, user: str | None) -> str:
    """A grants-file entry: `user`'s own namespace and the scope `assistant`, or everything."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    head = f'[[grant]]\nname = "{name}"\ntoken_sha256 = "{digest}"\noperations = ["*"]\n'
    if user is None:
        return head + 'read_scopes = ["*"]\nwrite_scopes = ["*"]\n\n[[grant.namespaces]]\nname = "*"\n\n'
    return (
        head
        + 'read_scopes = ["assistant"]\nwrite_scopes = ["assistant"]\n'
        + f'default_namespace = {{ name = "notes", version = 1, identity = {{ user = "{user}" }} }}\n'
        + 'default_scope = "assistant"\n\n[[grant.namespaces]]\nname = "notes"\n'
        + f'fields = {{ user = "{user}" }}\n\n'
    )


class Server:
    """A `memory serve --http` with ana's, bob's and an operator's tokens (`--grants`) over `db`;
    `restart()` stops it and starts another."""

    def __init__(self, db: pathlib.Path, grants: pathlib.Path) -> None:
        self.db, self.grants = db, grants
        self.process: subprocess.Popen | None = None
        self.base = ""
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                str(MEMORY_BIN), "--db", str(self.db), "serve", "--http", "127.0.0.1:0",
                "--grants", str(self.grants),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        assert self.process.stderr is not None
        url = None
        for line in self.process.stderr:
            if line.startswith("memory: serving MCP at "):
                url = line.removeprefix("memory: serving MCP at ").strip()
                break
        assert url, "the server announced its URL"
        self.base = url.removesuffix("/mcp")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def inspector(tmp_path: pathlib.Path) -> Iterator[Server]:
    """A `memory serve --http` with a token, ana's passages and a thread with a long tool run."""
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
    tea = json.loads(json.dumps(put))
    tea.update(id="tea", operation_id="tea-1")
    tea["content"]["text"] = "Ana prefers green tea."
    _memory(db, "put", "-", stdin=json.dumps(tea))
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
    grants = tmp_path / "grants.toml"
    grants.write_text(_grant("ana", TOKEN, "ana") + _grant("bob", BOB, "bob") + _grant("ops", OPS, None))
    server = Server(db, grants)
    try:
        yield server
    finally:
        server.stop()


def _sign_in(page, base: str, token: str) -> None:  # noqa: ANN001 - Playwright's Page
    """Signs `page` in at the inspector of `base` with `token`, as a person does."""
    page.goto(f"{base}/ui")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def _context(db: pathlib.Path) -> dict:
    """ana's turn on `run-1` as `memory context` assembles it, recalling for her tomatoes."""
    return _memory(db, "context", "run-1", "--budget", "4000", "--query", "tomatoes Porto", "--no-rollover")


def _reflows(page) -> bool:  # noqa: ANN001 - Playwright's Page
    """Whether the page fits its viewport's width (nothing scrolls sideways)."""
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def _serious(page, axe: str) -> list[str]:  # noqa: ANN001 - Playwright's Page
    page.add_script_tag(content=axe)
    results = page.evaluate("async () => await axe.run()")
    return [
        f"{violation['id']}: {violation['help']}"
        for violation in results["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


def test_the_inspector_in_a_real_browser(inspector: Server) -> None:
    from playwright.sync_api import sync_playwright

    base, db = inspector.base, inspector.db
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

            assert "Ana grows tomatoes" in json.dumps(_context(db)), "recalled into the turn before"
            passage.get_by_label("Why forget it").fill("the user asked")
            passage.get_by_role("button", name="Forget").click()
            assert "Forgotten: tomatoes" in page.get_by_role("status").inner_text()
            assert "Ana grows tomatoes" not in json.dumps(_context(db)), "gone from the assembled context"
            assert page.get_by_text("Ana grows tomatoes").count() == 0
            page.screenshot(path=str(SCREENSHOTS / "forgotten.png"), full_page=True)
            assert dialogs == [], "no script ran"

            # A person's correction, then the memory's revisions.
            tea = page.locator("ol.memories li", has_text="green tea")
            tea.get_by_text("Correct it").click()
            tea.get_by_label("Corrected text").fill("Ana prefers black coffee.")
            tea.get_by_role("button", name="Save the correction").click()
            assert "Corrected: revision" in page.get_by_role("status").inner_text()
            corrected = page.locator("ol.memories li", has_text="black coffee")
            assert "grant:" in corrected.locator("dl.provenance").inner_text()
            corrected.get_by_role("link", name="Every revision of tea").click()
            revisions = page.locator("ol.memories li")
            assert revisions.nth(0).locator("p.text").inner_text() == "Ana prefers black coffee."
            assert revisions.nth(1).locator("p.text").inner_text() == "Ana prefers green tea."
            page.screenshot(path=str(SCREENSHOTS / "revisions.png"), full_page=True)
            page.get_by_role("link", name="Back to the memories").click()

            # A form posted from another site is refused, and forgets nothing.
            evil = browser.new_page()
            evil.route(
                "http://evil.test/**",
                lambda route: route.fulfill(
                    content_type="text/html",
                    body=f'<form method="post" action="{base}/ui/forget"><input name="id" value="tea">'
                    '<input name="reason" value="x"><button>Win a prize</button></form>',
                ),
            )
            evil.goto("http://evil.test/")
            evil.get_by_role("button", name="Win a prize").click()
            evil.wait_for_load_state()
            assert "was not sent from this inspector" in evil.content()
            evil.close()
            page.reload()
            assert page.locator("p.text", has_text="Ana prefers black coffee.").is_visible()

            # Ana's grant is not the operator's: the overview says so, with a way back.
            page.get_by_role("link", name="Overview").click()
            assert "only the server's own token or a grant to everything" in page.content()
            page.get_by_role("link", name="Back to the inspector").click()

            # Bob's token sees none of ana's memory, and reaches none of it by URL.
            other = browser.new_context().new_page()
            _sign_in(other, base, BOB)
            assert other.get_by_text("No memories yet.").is_visible()
            other.get_by_label("Search").fill("coffee")
            other.get_by_label("Mode").select_option("lexical")
            other.get_by_role("button", name="Search").click()
            assert other.get_by_text("Nothing found.").is_visible()
            other.goto(f"{base}/ui/revisions?id=tea")
            assert "No such memory" in other.content() and "coffee" not in other.content()
            other.goto(f"{base}/ui/threads?thread=run-1")
            assert "run_tests" not in other.content()
            other.screenshot(path=str(SCREENSHOTS / "second-token.png"), full_page=True)

            # The operator's token sees the overview.
            operator = browser.new_context().new_page()
            _sign_in(operator, base, OPS)
            operator.get_by_role("link", name="Overview").click()
            assert "Latest change" in operator.content()
            assert operator.locator("figure svg").count() == 2
            operator.screenshot(path=str(SCREENSHOTS / "overview.png"), full_page=True)

            page.get_by_role("link", name="Threads").click()
            page.get_by_role("link", name="run-1").click()  # ana's threads are listed
            page.get_by_label("Budget (tokens) of the context preview").fill("1500")
            page.get_by_role("button", name="Show").click()
            assert "Context preview" in page.content()
            assert page.get_by_text("#51 tool_result").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "thread.png"), full_page=True)

            # At 400% zoom (320 CSS pixels wide) every page reflows: nothing scrolls sideways.
            narrow = browser.new_context(viewport={"width": 320, "height": 640})
            small = narrow.new_page()
            small.goto(f"{base}/ui")
            assert _reflows(small), "/ui"
            small.get_by_label("Token").fill(TOKEN)
            small.get_by_role("button", name="Sign in").click()
            for path in (
                "/ui/memories",
                "/ui/memories?q=tea&mode=lexical",
                "/ui/revisions?id=tea",
                "/ui/threads?thread=run-1&budget=1500",
            ):
                small.goto(f"{base}{path}")
                assert _reflows(small), path
            small.screenshot(path=str(SCREENSHOTS / "overview-400-percent.png"), full_page=True)
            narrow.close()

            # The scan injects axe-core, so its page ignores the policy that forbids every script.
            scanner = browser.new_context(bypass_csp=True).new_page()
            for path in ("/ui", "/ui?expired=1"):
                scanner.goto(f"{base}{path}")
                assert _serious(scanner, axe) == [], path
            _sign_in(scanner, base, TOKEN)
            for path in (
                "/ui/memories",
                "/ui/memories?q=tomatoes&mode=hybrid",
                "/ui/revisions?id=tea",
                "/ui/threads",
                "/ui/threads?threads_after=run-0",
                "/ui/threads?thread=run-1&budget=1500",
            ):
                scanner.goto(f"{base}{path}")
                assert _serious(scanner, axe) == [], path
            ops_scanner = browser.new_context(bypass_csp=True).new_page()
            _sign_in(ops_scanner, base, OPS)
            ops_scanner.goto(f"{base}/ui/overview?hours=24")
            assert _serious(ops_scanner, axe) == [], "/ui/overview"
            narrow_ops = browser.new_context(viewport={"width": 320, "height": 640}).new_page()
            _sign_in(narrow_ops, base, OPS)
            narrow_ops.goto(f"{base}/ui/overview?hours=24")
            assert _reflows(narrow_ops), "/ui/overview"

            # A server restart ends every session: the next page says so plainly.
            inspector.restart()
            base = inspector.base
            page.goto(f"{base}/ui/memories")
            assert "Your session has ended" in page.get_by_role("alert").inner_text()
            page.screenshot(path=str(SCREENSHOTS / "session-ended.png"), full_page=True)
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
