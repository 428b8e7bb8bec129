#!/usr/bin/env bash
# Creates the Python virtual environment .venv-python/ (git-ignored; MEMORY_PYTHON_VENV to change)
# with maturin, pytest, pytest-asyncio, langgraph, langmem, numpy (for the bench's InMemoryStore) and
# playwright (its Python API only: the inspector's tests drive Debian's Chromium, scripts/browser-setup.sh)
# from PyPI, then installs the package `agent-memory` from python/ into it with one `pip install`
# (maturin builds the extension).
# Idempotent. The build uses cargo's dev profile (its dependencies are optimized, see Cargo.toml),
# which shares the artifacts of `cargo test`; MEMORY_PYTHON_PROFILE=release builds as a wheel does.
#
# Usage: scripts/python-setup.sh        (prints the venv's python on its last line)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MEMORY_PYTHON_VENV:-.venv-python}"
PROFILE="${MEMORY_PYTHON_PROFILE:-dev}"
command -v python3 >/dev/null || { echo "python-setup: python3 (3.10 or later, with venv) is required" >&2; exit 2; }
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
"$VENV/bin/python" -m pip install --quiet "maturin>=1.5,<2" pytest pytest-asyncio langgraph langmem numpy playwright >&2
# pip runs maturin as the build backend; MATURIN_PEP517_ARGS passes it the cargo profile.
MATURIN_PEP517_ARGS="--profile $PROFILE" \
    "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps ./python >&2
echo "$VENV/bin/python"
