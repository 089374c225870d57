#!/usr/bin/env bash
# The whole stack: Kafka + PostgreSQL/pgvector + the five services, then a short
# demo (remember -> recall -> packet). Leaves everything running; stop it with
# `.venv/bin/engram down`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
.venv/bin/engram up
.venv/bin/engram demo
echo
echo "Engram is running: command http://127.0.0.1:8081, recall http://127.0.0.1:8085"
echo "status: .venv/bin/engram status    stop: .venv/bin/engram down"
