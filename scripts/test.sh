#!/usr/bin/env bash
# Runs every test of the workspace. Fetches the model assets first (idempotent), since the tests that
# matter run the real embedding model on small data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-assets.sh
# memory-postgres's tests need a server: start a local one unless a URL is given or they are skipped.
if [ -z "${MEMORY_TEST_POSTGRES_URL:-}" ] && [ "${MEMORY_SKIP_POSTGRES:-}" != 1 ]; then
    MEMORY_TEST_POSTGRES_URL="$(bash scripts/postgres-setup.sh)"
    export MEMORY_TEST_POSTGRES_URL
fi
cargo test --workspace --all-features
# The Python package (python/): build and install it into a venv, then its pytest suite (SQLite always,
# PostgreSQL too when MEMORY_TEST_POSTGRES_URL is set; the real model from assets/).
PYTHON="$(bash scripts/python-setup.sh | tail -n 1)"
# The inspector's browser test: Debian's Chromium and axe-core (npm), both provisioned by the script.
BROWSER="$(bash scripts/browser-setup.sh)"
MEMORY_CHROMIUM="$(sed -n 1p <<<"$BROWSER")"
MEMORY_AXE_CORE="$(sed -n 2p <<<"$BROWSER")"
export MEMORY_CHROMIUM MEMORY_AXE_CORE
MEMORY_ASSETS_DIR="${MEMORY_ASSETS_DIR:-$PWD/assets}" "$PYTHON" -m pytest -q python/tests
