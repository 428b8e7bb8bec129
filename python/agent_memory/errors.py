"""Exceptions mirroring the memory's error kinds (memory-core's ``ErrorKind``).

Every refusal of the engine raises the class of its kind; each carries ``.kind`` (the kind string the
``memory`` command and the MCP server answer in ``{"error": {"kind", "message"}}``) and ``.message``.
"""

from __future__ import annotations

__all__ = [
    "AgentMemoryError",
    "ConflictError",
    "OperationConflictError",
    "WithdrawnError",
    "TooLargeError",
    "InvalidInputError",
    "BudgetError",
    "DeadlineError",
    "NotFoundError",
    "UnavailableError",
    "StorageError",
    "CorruptError",
    "ForbiddenError",
    "from_kind",
]


class MemoryError(Exception):  # noqa: A001 - the package's base error; `AgentMemoryError` is its alias
    """Base class of every refusal. ``kind`` is the error kind string, ``message`` the explanation."""

    kind: str = "storage"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, message={self.message!r})"


AgentMemoryError = MemoryError


class ConflictError(MemoryError):
    """The expected revision is not the current one (or a thread is bound elsewhere)."""

    kind = "conflict"


class OperationConflictError(MemoryError):
    """An operation id was reused for a different command."""

    kind = "operation-conflict"


class WithdrawnError(MemoryError):
    """The document was withdrawn for good."""

    kind = "withdrawn"


class TooLargeError(MemoryError):
    """A size or count limit was exceeded before any work was done."""

    kind = "too-large"


class InvalidInputError(MemoryError, ValueError):
    """Malformed input: a wrong type, an unknown or missing field, an out-of-range value."""

    kind = "invalid-input"


class BudgetError(MemoryError):
    """A recall's budget could not hold what it must."""

    kind = "budget"


class DeadlineError(MemoryError, TimeoutError):
    """The call's deadline passed."""

    kind = "deadline"


class NotFoundError(MemoryError, KeyError):
    """Nothing has this id (never written, or deleted)."""

    kind = "not-found"

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class UnavailableError(MemoryError):
    """Not possible right now (a busy store, a missing model, a server down): retry later."""

    kind = "unavailable"


class StorageError(MemoryError):
    """The store failed."""

    kind = "storage"


class CorruptError(MemoryError):
    """Stored data is inconsistent."""

    kind = "corrupt"


class ForbiddenError(MemoryError, PermissionError):
    """The caller may not touch this."""

    kind = "forbidden"


_BY_KIND: dict[str, type[MemoryError]] = {
    cls.kind: cls
    for cls in (
        ConflictError,
        OperationConflictError,
        WithdrawnError,
        TooLargeError,
        InvalidInputError,
        BudgetError,
        DeadlineError,
        NotFoundError,
        UnavailableError,
        StorageError,
        CorruptError,
        ForbiddenError,
    )
}


def from_kind(kind: str, message: str) -> MemoryError:
    """The exception for a refusal of ``kind`` (the extension raises what this returns)."""
    cls = _BY_KIND.get(kind)
    if cls is None:
        return MemoryError(message, kind)
    return cls(message)
