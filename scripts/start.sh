#!/usr/bin/env bash
# Start the app on http://localhost:8501 on a fresh Debian machine with Python 3.11:
# creates .venv, installs the pinned requirements, seeds the embedded DuckDB store, runs Streamlit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
exec .venv/bin/python serve.py --server.port "${PORT:-8501}" --server.headless true --browser.gatherUsageStats false "$@"
