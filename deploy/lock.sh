#!/usr/bin/env bash
# Refreshes deploy/constraints.txt: installs Engram with its extras into a throwaway
# virtualenv, unconstrained (the newest versions pyproject.toml's ranges allow), and writes
# the exact versions it got. Run the tests (bash .ci/run) before committing the result.
# Resolve with the Python the project runs on (PYTHON, default python3; the Dockerfile's is
# 3.11): a pin can differ between Python versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "Python 3.11+ is required (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "• resolving the newest versions in $scratch"
"$PYTHON" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --upgrade pip
"$scratch/venv/bin/python" -m pip install -q -e ".[dev,embeddings]"
{
  echo "# Exact versions Engram's tests last passed with: deploy/install.sh and the Dockerfile install"
  echo "# through them, so a fresh machine gets what CI tested, not a release of today. Refresh with"
  echo "# bash deploy/lock.sh (newest versions within pyproject.toml's ranges), then run the tests."
  "$scratch/venv/bin/python" -m pip freeze --exclude-editable
} > "$scratch/constraints.txt"
mv "$scratch/constraints.txt" deploy/constraints.txt
echo "• deploy/constraints.txt: $(grep -c '==' deploy/constraints.txt) packages pinned"
git --no-pager diff --stat -- deploy/constraints.txt || true
