#!/usr/bin/env bash
# Run the whole test suite on a fresh Debian machine with Python 3.11: installs the test dependencies
# (Python packages into .venv, Debian's chromium for the browser tests) and runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
if [ ! -x /usr/bin/chromium ]; then
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
# Optional: a local CPU build of torch lets the gloo collectives runner test run (tests skip it without torch).
# Only from a local wheel: a plain `pip install torch` would pull gigabytes of CUDA packages.
for whl in /opt/wheels/torch-2.13.0+cpu-*.whl; do
  [ -f "$whl" ] && .venv/bin/python -m pip install -q --disable-pip-version-check --find-links /opt/wheels "torch==2.13.0+cpu"
  break
done
exec .venv/bin/python -m pytest "$@"
