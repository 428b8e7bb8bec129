#!/usr/bin/env bash
# The main job: fetches the model assets on first use, then runs the pipeline end to end on the embedded
# default (a SQLite file and the local model) and writes its report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-assets.sh
cargo run --release -p eval --bin memory-eval -- "$@"
