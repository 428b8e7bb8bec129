"""The extension module (Rust, PyO3): memory-cli's services over one database."""

__version__: str

class Engine:
    """An open database (a SQLite path or a ``postgres://`` URL) and the services over it."""

    def __init__(
        self,
        db: str,
        schema: str | None = None,
        user: str | None = None,
        settings: str | None = None,
    ) -> None:
        """``user`` is who the engine's withdrawals name (``user:NAME``); without it
        ``MEMORY_USER``, else the OS user. ``settings`` is JSON of ``max_chunks``,
        ``compact_vectors``, ``hnsw_ef_search``, ``max_tool_output_bytes``, ``rerank_model``
        (``"on"`` or ``"off"``), ``corrections`` and
        ``model`` (an object of ``url``, ``model``, ``key_file``, ``fallback`` and ``timeout_ms``),
        each optional, else its ``MEMORY_*`` variable."""
        ...
    @property
    def user(self) -> str | None:
        """The user it was opened with, else ``MEMORY_USER``, else the OS user; ``None`` when no
        user is known."""
        ...
    @property
    def speaker(self) -> str:
        """Who speaks the user's words when a call names no speaker: ``user``, else ``"user"``
        (``memory hook``'s default too)."""
        ...
    def call(self, operation: str, arguments: str) -> str:
        """Runs ``operation`` with JSON ``arguments``; returns the JSON answer or raises the
        ``agent_memory.errors`` class of the refusal's kind."""
        ...

def doctor() -> str:
    """``memory doctor``'s report, as JSON text."""
    ...

def embed(texts: list[str], query: bool = False) -> list[list[float]]:
    """Embeds ``texts`` with the engine's model (all-MiniLM-L6-v2, 384 dimensions)."""
    ...
