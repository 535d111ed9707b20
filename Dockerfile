# syntax=docker/dockerfile:1
# The planner as teams deploy it; README "Deployment" has the build and run commands and every setting.
FROM debian:bookworm-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 planner \
 && useradd --system --uid 10001 --gid planner --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin planner \
 && mkdir /data && chown 10001:10001 /data
WORKDIR /app
COPY requirements.lock .
# a build host behind a TLS-inspecting proxy passes its CA bundle (mounted read-only) as PIP_CERT_FILE
ARG PIP_CERT_FILE=
RUN python3 -m venv /opt/venv \
 && if [ -n "$PIP_CERT_FILE" ]; then export PIP_CERT="$PIP_CERT_FILE"; fi \
 && /opt/venv/bin/pip install --require-hashes --only-binary :all: -r requirements.lock \
 && find /opt/venv -depth -type d -name tests -exec rm -rf {} +
COPY . .
# Streamlit's own settings come from .streamlit/config.toml (headless, no file watcher, no telemetry, no forced GC)
ENV PATH=/opt/venv/bin:$PATH HOME=/tmp APP_DB_PATH=/data/planner.duckdb \
    STREAMLIT_SERVER_ADDRESS=0.0.0.0 STREAMLIT_SERVER_PORT=8501 APP_API_PORT=8000
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8501 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["python", "scripts/healthcheck.py"]
# starts the HTTP API (planner api) on APP_API_PORT in the background, then serve.py: checks the settings, seeds or
# migrates the store on /data, then execs Streamlit (which gets the SIGTERM); arguments go to serve.py as before
ENTRYPOINT ["sh", "scripts/entrypoint.sh"]
