"""agent_memory: the agent-memory engine in-process (distribution ``agent-memory``).

- ``Memory`` / ``AsyncMemory``: the simple API (``add``, ``search``, ``get``, ``get_all``, ``update``,
  ``delete``, ``history``) and the precise one (``put``, ``withdraw``, ``read``, ``recall``, ``sync``,
  ``append``, ``forget``, ``remember_once``).
- ``agent_memory.langgraph.AgentMemoryStore``: a LangGraph ``BaseStore`` on the same engine.
- ``agent_memory.errors``: one exception class per error kind.
- ``doctor()``: where the model assets are found, and the command that fetches missing ones.
"""

from __future__ import annotations

from . import _native
from . import errors as _errors
from .errors import (
    AgentMemoryError,
    BudgetError,
    ConflictError,
    CorruptError,
    DeadlineError,
    ForbiddenError,
    InvalidInputError,
    MemoryError,
    NotFoundError,
    OperationConflictError,
    StorageError,
    TooLargeError,
    UnavailableError,
    WithdrawnError,
    from_kind,
)
from .memory import AsyncMemory, Memory, doctor

__version__: str = _native.__version__

# `MemoryError` (the base class) is importable by name but left out of `*`, where it would shadow
# Python's built-in `MemoryError`; `AgentMemoryError` is the same class.
__all__ = ["Memory", "AsyncMemory", "doctor"]
__all__ += _errors.__all__
