"""Command lines end quietly when their reader stops early (`python -m engine search x.json | head`): no
BrokenPipeError traceback on stderr (engine/command_line.py)."""
import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.engine.helpers import scenario

PIPE_BUFFER_BYTES = 65536          # Linux's default pipe capacity: the command must write more than this to block


def _read_one_line_then_close(cmd: list[str]) -> tuple[str, str, int]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    proc.stdout.close()                                       # what `head -1` does after its line
    _, err = proc.communicate(timeout=120)
    return first, err, proc.returncode


def test_engine_search_into_a_closed_pipe_ends_without_a_traceback(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario()))
    full = subprocess.run([sys.executable, "-m", "engine", "search", str(f), "--top", "20"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert full.returncode == 0 and len(full.stdout) > PIPE_BUFFER_BYTES, full.stderr
    first, err, code = _read_one_line_then_close([sys.executable, "-m", "engine", "search", str(f), "--top", "20"])
    assert first == "{\n"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 1                  # the output was cut short: not a success (the Python documentation's recipe)
