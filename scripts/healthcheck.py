"""The image's HEALTHCHECK: Streamlit's health endpoint in this container, on STREAMLIT_SERVER_PORT and under
STREAMLIT_SERVER_BASE_URL_PATH (Streamlit serves it at /<base>/_stcore/health when a base path is set)."""
import os
import sys
import urllib.request

base = os.environ.get("STREAMLIT_SERVER_BASE_URL_PATH", "").strip().strip("/")
url = f"http://127.0.0.1:{os.environ.get('STREAMLIT_SERVER_PORT', '8501')}/{base + '/' if base else ''}_stcore/health"
try:
    with urllib.request.urlopen(url, timeout=4) as resp:
        body = resp.read()
except OSError as err:
    sys.exit(f"{url}: {err}")
sys.exit(0 if body == b"ok" else f"{url} answered {body[:80]!r}")
