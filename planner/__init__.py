"""The `planner` command (planner/cli.py); installed, planner/app holds the web app (pyproject.toml)."""
