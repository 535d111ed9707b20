#!/usr/bin/env bash
# Start the app on http://localhost:8501 on a fresh Debian machine with Python 3.11:
# creates .venv, installs the pinned requirements, seeds the embedded DuckDB store, runs Streamlit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
if [ -f benchmarks_db/__main__.py ]; then .venv/bin/python -m benchmarks_db seed; fi
exec .venv/bin/python -m streamlit run app.py --server.port "${PORT:-8501}" --server.headless true \
  --browser.gatherUsageStats false "$@"
