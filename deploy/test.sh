#!/usr/bin/env bash
# The test suite: unit, integration and end-to-end tests against the real Kafka
# broker and the real PostgreSQL. The session fixture starts (or reuses) the
# stack and the five services; nothing is skipped for a missing service.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
exec .venv/bin/python -m pytest -v -ra --durations=15 "$@"
