#!/usr/bin/env bash
# Refreshes deploy/constraints.txt: installs Engram with its extras into a throwaway
# virtualenv, unconstrained (the newest versions pyproject.toml's ranges allow), and writes
# the exact versions it got. Run the tests (bash .ci/run) before committing the result.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "• resolving the newest versions in $scratch"
"$PYTHON" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --upgrade pip
"$scratch/venv/bin/python" -m pip install -q -e ".[dev,embeddings]"
{
  sed -n '1,/^# bash deploy\/lock.sh/p' deploy/constraints.txt
  "$scratch/venv/bin/python" -m pip freeze --exclude-editable
} > "$scratch/constraints.txt"
mv "$scratch/constraints.txt" deploy/constraints.txt
echo "• deploy/constraints.txt: $(grep -c '==' deploy/constraints.txt) packages pinned"
git --no-pager diff --stat -- deploy/constraints.txt || true
