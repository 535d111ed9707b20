"""The README keeps exactly two set-up commands: start the app, run the whole suite."""
import re

from tests.conftest import ROOT


def test_setup_has_exactly_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"```bash\n(.*?)```", setup, re.S) == ["bash scripts/start.sh\n", "bash scripts/test.sh\n"]
    assert all((ROOT / script).is_file() for script in ("scripts/start.sh", "scripts/test.sh"))
