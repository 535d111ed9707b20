"""How every command line of the planner starts and ends (python -m engine, python -m benchmarks_db ..., serve.py,
the `planner` command): log lines go to stderr with time, level and module; a reader that closes the pipe early
(`python -m engine search x.json | head`) ends the command quietly instead of with a BrokenPipeError traceback."""
from __future__ import annotations

import logging
import os
import sys
from typing import Callable, NoReturn

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: int = logging.INFO) -> None:
    """Log records of the planner's own modules (and any library that propagates to the root) to stderr."""
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)


def run(main: Callable[[], int | None]) -> NoReturn:
    """sys.exit(main()) with logging set up; on a closed stdout, exit 1 without a traceback (the Python
    documentation's recipe, "Note on SIGPIPE" in the signal module: point stdout at devnull so that the flush at
    exit does not fail again)."""
    setup_logging()
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
