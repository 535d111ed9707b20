#!/bin/sh
# The image's two processes: the HTTP API (`planner api`, planner/http_api.py) on APP_API_PORT (default 8000) in the
# background, then serve.py, which checks the settings, seeds or migrates the store on /data and execs Streamlit on
# STREAMLIT_SERVER_PORT (8501) as the container's main process: it gets the SIGTERM, and when it ends the container
# ends with the API. The API never opens the store (its answers come from the engine alone), so it does not contend
# with the app for the embedded DuckDB file. README "Deployment" has both ports.
set -eu
# a command instead of options (`podman run --rm -v planner-data:/data planner python -m benchmarks_db uploads`)
# runs alone, without the servers
case "${1:-}" in ""|-*) ;; *) exec "$@" ;; esac
python -m planner api --host "${APP_API_HOST:-0.0.0.0}" --port "${APP_API_PORT:-8000}" &
exec python serve.py "$@"
