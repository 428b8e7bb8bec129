#!/usr/bin/env bash
# Compares, on the same vectors and the same model files, our HNSW index with hnswlib (QPS at recall@10
# 0.95, build time), our exact scan with the memory read bandwidth measured in the same run, and our
# embedding throughput (fastembed) with onnxruntime called directly from Python, on the eval texts and on
# a mixed-length set (one text in ten 200+ tokens), and `memory sync` of that set imported as documents
# against our embedder alone on the texts the sync embeds. Prints the summary JSON on standard output
# (hnsw_qps_ratio_at_recall_0.95, hnsw_build_time_ratio, exact_scan_bandwidth_share,
# embed_throughput_ratio.{eval_texts,mixed_length}, sync_embed_time_ratio, sync_peak_rss_bytes); the
# table and progress go to standard error, the details to DIR/compare.json. Not part of the main job;
# needs python3 with venv and pip (hnswlib may compile from source, which needs a C++ compiler).
#
# Environment: COMPARE_DIR (default eval-report/compare), COMPARE_VENV (default target/compare-venv),
# COMPARE_SIZE (vectors in the HNSW comparison, default 20000), COMPARE_ROUNDS (turns each side takes
# at the HNSW comparison, at each embedding set and at the sync comparison, best counts; default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-assets.sh >&2

DIR="${COMPARE_DIR:-eval-report/compare}"
VENV="${COMPARE_VENV:-target/compare-venv}"
SIZE="${COMPARE_SIZE:-20000}"

cargo build --quiet --release -p eval --bin memory-eval -p memory-cli --bin memory >&2
TARGET="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release"
EVAL="$TARGET/memory-eval"

mkdir -p "$DIR"
"$EVAL" dump-vectors --dir "$DIR" --size "$SIZE" >&2

if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV" >&2
fi
"$VENV/bin/python" -m pip install --quiet -r eval/compare/requirements.txt >&2
# compare.py runs `memory-eval bench-hnsw` and `bench-embed` itself, taking turns with hnswlib and
# onnxruntime (COMPARE_ROUNDS each; each side's fastest counts).
"$VENV/bin/python" eval/compare/compare.py --dir "$DIR" --assets "${MEMORY_ASSETS_DIR:-assets}" \
  --eval "$EVAL" --memory "$TARGET/memory" --rounds "${COMPARE_ROUNDS:-3}"
