"""The `planner` command that `pip install .` puts on the PATH: one entry to the web app, the engine, the store and
the runners, each forwarded to its own command line unchanged, so every option and every command they gain later
works here too:

    planner serve [--server.port 8501 ...]    serve.py (the web app; options go to `streamlit run`)
    planner api [--host 127.0.0.1 --port 8000] the engine's commands over HTTP (planner/http_api.py)
    planner store seed|info|ingest|...        python -m benchmarks_db seed|info|ingest|uploads|trust|distrust
    planner bench run ...                     python -m benchmarks_db.run
    planner COMMAND ...                       python -m engine COMMAND (estimate, search, compare, catalog, ...)
"""
from __future__ import annotations

import argparse
import os
import sys

from engine.command_line import run
from planner import APP_DIR

OWN_COMMANDS = {
    "serve": "start the web app on http://127.0.0.1:8501 (options go to `streamlit run`, e.g. --server.port 8502)",
    "api": "serve the engine over HTTP on http://127.0.0.1:8000 (--host, --port): POST /v1/estimate, /v1/search, "
           "/v1/compare, /v1/plan, /v1/import-hf; /openapi.json",
    "store": "the benchmark store: seed [--db PATH] (create, upgrade, load the published data), info, ingest FILE..., "
             "uploads, trust, distrust, training-runs [--json] (uploaded step-time runs vs the prediction, before and "
             "after calibration), validate --benchmark NAME [--json] (predicted vs published MLPerf minutes)",
    "bench": "run NAME --out FILE: measure this machine with the bundled runners (matmul, membw, h2d, collectives, "
             "storage, all)",
}


def engine_commands() -> dict[str, str]:
    """The engine command line's subcommands and their help, as engine/__main__.py defines them today."""
    from engine.__main__ import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help or "" for choice in sub._choices_actions}


def usage() -> str:
    width = max(map(len, [*OWN_COMMANDS, *engine_commands()])) + 2
    lines = ["usage: planner COMMAND [ARGS ...]", "", "LLM training capacity planner", ""]
    lines += [f"  {name:<{width}}{text}" for name, text in OWN_COMMANDS.items()]
    lines += [f"  {name:<{width}}{text}" for name, text in engine_commands().items()]
    lines += ["", "`planner COMMAND --help` describes one command and its options."]
    return "\n".join(lines)


def serve(args: list[str]) -> int:
    """serve.py in a process of its own (it becomes Streamlit, which then receives the signals)."""
    script = APP_DIR / "serve.py"
    os.execv(sys.executable, [sys.executable, str(script), *args])
    return 1  # not reached


def store(args: list[str]) -> int:
    from benchmarks_db.__main__ import main as store_main
    return store_main(args)


def bench(args: list[str]) -> int:
    if args[:1] != ["run"]:
        print("usage: planner bench run NAME --out FILE [--quick] ...  (planner bench run --help)", file=sys.stderr)
        return 2
    from benchmarks_db.run import main as bench_run
    return bench_run(args[1:])


def dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, args = argv[0], argv[1:]
    if command == "serve":
        return serve(args)
    if command == "api":
        from planner.http_api import main as api_main
        return api_main(args)
    if command == "store":
        return store(args)
    if command == "bench":
        return bench(args)
    from engine.__main__ import main as engine_main
    return engine_main(argv)


def main() -> None:
    run(lambda: dispatch(sys.argv[1:]))
