#!/usr/bin/env bash
# Start the app on a fresh Debian machine with Python 3.11: creates .venv, installs the locked requirements
# (requirements.lock: every package pinned with its sha256; about 2 minutes the first time, skipped afterwards while
# the lock is unchanged), seeds the embedded DuckDB store and serves on http://127.0.0.1:8501 - this machine only.
# Streamlit's own settings choose another port or address, as in the container (README "Deployment"):
#   STREAMLIT_SERVER_PORT=8502 bash scripts/start.sh         (or: bash scripts/start.sh --server.port 8502)
#   STREAMLIT_SERVER_ADDRESS=0.0.0.0 bash scripts/start.sh   every network interface: the planner has no sign-on, so
#                                                            share it as the container behind your proxy instead
# Extra arguments go to `streamlit run`.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { printf 'scripts/start.sh: %s\n' "$*" >&2; exit 1; }
is_311() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; }

if [ ! -x .venv/bin/python ]; then
  python=""
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && is_311 "$candidate"; then python=$candidate; break; fi
  done
  found=$(command -v python3 >/dev/null && python3 --version 2>&1 || echo "no python3 on the PATH")
  [ -n "$python" ] || fail "Python 3.11 is needed (python3.11, or python3 being 3.11; found: $found).
  Debian 12: sudo apt-get install python3 python3-venv
  elsewhere: Python 3.11 from your distribution (Ubuntu: the deadsnakes PPA's python3.11 python3.11-venv), pyenv or python.org"
  "$python" -c 'import ensurepip, venv' 2>/dev/null || fail "Python's venv module is missing for $python.
  Debian / Ubuntu: sudo apt-get install python3-venv (or python3.11-venv), then run this again"
  echo "Creating .venv with $("$python" --version) ..."
  "$python" -m venv .venv || { rm -rf .venv; fail "could not create .venv with $python -m venv (message above)"; }
fi
is_311 .venv/bin/python || fail ".venv is not Python 3.11 ($(.venv/bin/python --version 2>&1)): remove it (rm -rf .venv) and run this again"

# The lock is installed again only when it changed since the last install (.venv/.requirements.lock is its copy).
if ! cmp -s requirements.lock .venv/.requirements.lock; then
  echo "Installing the locked requirements into .venv (first start: 40 packages, 650 MB; 1-2 minutes) ..."
  .venv/bin/python -m pip install --disable-pip-version-check --require-hashes --only-binary :all: \
    -r requirements.lock
  cp requirements.lock .venv/.requirements.lock
fi

echo "Starting the planner (the first start also creates and seeds the store) ..."
exec .venv/bin/python serve.py "$@"
