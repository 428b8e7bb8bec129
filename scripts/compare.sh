#!/usr/bin/env bash
# Compares, on the same vectors and the same model files, our HNSW index with hnswlib (QPS at equal
# recall@10) and our embedding throughput (fastembed) with onnxruntime called directly from Python, and
# prints the ratios. Not part of the main job; needs python3 with venv and pip (hnswlib may compile from
# source, which needs a C++ compiler).
#
# Environment: COMPARE_DIR (default eval-report/compare), COMPARE_VENV (default target/compare-venv),
# COMPARE_SIZE (vectors in the HNSW comparison, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-assets.sh

DIR="${COMPARE_DIR:-eval-report/compare}"
VENV="${COMPARE_VENV:-target/compare-venv}"
SIZE="${COMPARE_SIZE:-20000}"
EVAL=(cargo run --quiet --release -p eval --bin memory-eval --)

mkdir -p "$DIR"
"${EVAL[@]}" dump-vectors --dir "$DIR" --size "$SIZE"
"${EVAL[@]}" bench-hnsw --vectors "$DIR/vectors.bin" > "$DIR/ours_hnsw.json"
"${EVAL[@]}" bench-embed --texts "$DIR/texts.txt" > "$DIR/ours_embed.json"

if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet -r eval/compare/requirements.txt
"$VENV/bin/python" eval/compare/compare.py --dir "$DIR" --assets "${MEMORY_ASSETS_DIR:-assets}"
