"""The `planner` command (planner/cli.py); installed, planner/app holds the web app (pyproject.toml)."""
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Installed, the web app lies in planner/app (pyproject.toml); in a checkout, at the repository root.
APP_DIR = HERE / "app" if (HERE / "app" / "serve.py").is_file() else HERE.parent
