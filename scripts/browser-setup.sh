#!/usr/bin/env bash
# Provisions what the inspector's browser tests drive, idempotently: Debian's `chromium` package
# (installed when /usr/bin/chromium is missing, as root only; never a browser download by a test
# tool) and axe-core from the npm registry (into target/axe-core/, injected into each page by the
# tests). Prints the two paths on stdout, one a line, the browser's first (everything else goes to
# stderr), as scripts/test.sh reads them.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "browser-setup: $*" >&2; }
CHROMIUM="${MEMORY_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        log "$CHROMIUM is missing and this is not root: install Debian's 'chromium' package"
        exit 1
    fi
    log "installing the chromium package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium >&2
fi
AXE_DIR=target/axe-core
AXE="$AXE_DIR/node_modules/axe-core/axe.min.js"
if [ ! -f "$AXE" ]; then
    command -v npm >/dev/null || { log "npm is required to fetch axe-core"; exit 1; }
    log "installing axe-core from the npm registry"
    mkdir -p "$AXE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$AXE_DIR" axe-core@4 >&2
fi
echo "$CHROMIUM"
echo "$PWD/$AXE"
