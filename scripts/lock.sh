#!/usr/bin/env bash
# Regenerate the lock files (every package the app and the tests install, pinned with their sha256 hashes) from the
# human-edited requirements.txt and requirements-dev.txt, with pip-tools' pip-compile against PyPI alone (this
# machine's pip settings are ignored). Run it after editing either file and commit the .lock files with it.
# The dev lock is constrained by the app's lock, so the two never disagree on a version.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/python" -m pip install -q --disable-pip-version-check pip-tools==7.6.2
export CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT
compile=("$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url
         --index-url https://pypi.org/simple --cache-dir "$tools/cache")
"${compile[@]}" --output-file requirements.lock requirements.txt
"${compile[@]}" --constraint requirements.lock --output-file requirements-dev.lock requirements-dev.txt
