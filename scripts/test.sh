#!/usr/bin/env bash
# Runs every test of the workspace. Fetches the model assets first (idempotent), since the tests that
# matter run the real embedding model on small data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-assets.sh
cargo test --workspace --all-features
