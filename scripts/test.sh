#!/usr/bin/env bash
# Run the whole test suite on a fresh Debian machine with Python 3.11 (about 25 minutes on 2 cores; README "Set up").
# Needs root or passwordless sudo: installs Debian's chromium for the browser tests and Debian's postgresql for the
# store tests (tests/postgres.py starts a throwaway cluster of its own) here, and podman, runc and
# debootstrap in the container tests, which build the image (and a debian:bookworm-slim base image with
# debootstrap when podman has none). Python packages go into .venv from requirements-dev.lock (hashes checked).
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif sudo -n true 2>/dev/null; then sudo -n "$@"
  else echo "scripts/test.sh: installing $* needs root or passwordless sudo" >&2; return 1; fi
}
if [ ! -x /usr/bin/chromium ]; then
  echo "Installing Debian's chromium for the browser tests ..."
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "Installing Debian's postgresql for the store tests (both backends) ..."
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
if ! cmp -s requirements-dev.lock .venv/.requirements-dev.lock; then
  echo "Installing the locked test requirements into .venv ..."
  .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes --only-binary :all: \
    -r requirements-dev.lock
  cp requirements-dev.lock .venv/.requirements-dev.lock
  # the dev lock is resolved under the app's lock (scripts/lock.sh), so the app's packages are in place too
  cp requirements.lock .venv/.requirements.lock
fi
# Optional: a local CPU build of torch lets the gloo collectives runner test run (tests skip it without torch).
# Only from a local wheel (not in the lock): a plain `pip install torch` would pull gigabytes of CUDA packages.
for whl in /opt/wheels/torch-2.13.0+cpu-*.whl; do
  [ -f "$whl" ] && .venv/bin/python -m pip install -q --disable-pip-version-check --find-links /opt/wheels "torch==2.13.0+cpu"
  break
done
exec .venv/bin/python -m pytest "$@"
