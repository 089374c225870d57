#!/usr/bin/env bash
# Installs what Engram needs on a fresh Debian machine: Java 17 + Maven for the
# Kafka broker (apt, only when missing), a virtualenv with the project and its
# test tools, at the versions in deploy/constraints.txt. Idempotent; prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing: ${need_apt[*]} (install them, or run this as root)" >&2
    exit 1
  fi
  echo "• installing ${need_apt[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "Python 3.11+ is required (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "• creating .venv"
  "$PYTHON" -m venv .venv
fi
echo "• installing Engram and its dependencies into .venv"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c deploy/constraints.txt -e ".[dev,embeddings]"
echo "• fetching the local embedding model (first run only)"
.venv/bin/engram fetch-model
