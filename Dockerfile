# syntax=docker/dockerfile:1
FROM debian:bookworm-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
# a build host behind a TLS-inspecting proxy passes its CA bundle (mounted read-only) as PIP_CERT_FILE
ARG PIP_CERT_FILE=
RUN python3 -m venv /opt/venv \
 && if [ -n "$PIP_CERT_FILE" ]; then export PIP_CERT="$PIP_CERT_FILE"; fi \
 && /opt/venv/bin/pip install -r requirements.txt
COPY . .
EXPOSE 8501
CMD ["/opt/venv/bin/python", "-m", "streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501"]
