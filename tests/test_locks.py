"""The lock files (scripts/lock.sh) hold what the human-edited requirements ask for: every package pinned with its
hashes, the app's pins unchanged, and the test lock in agreement with the app's lock."""
import re

from tests.conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.M)


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()                        # PEP 503 normalised


def pins(path) -> dict[str, str]:
    return {_name(name): version for name, version in PIN.findall(path.read_text())}


def lock_entries(path) -> dict[str, list[str]]:
    """name -> the sha256 hashes of its entry."""
    entries = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        if found := PIN.match(block):
            entries[_name(found.group(1))] = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
    return entries


def test_every_locked_package_has_hashes():
    for lock in ("requirements.lock", "requirements-dev.lock"):
        entries = lock_entries(ROOT / lock)
        assert len(entries) > 30
        assert {name: hashes for name, hashes in entries.items() if not hashes} == {}, lock


def test_the_locks_keep_the_requirements_pins():
    app, dev = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-dev.lock")
    for name, version in pins(ROOT / "requirements.txt").items():
        assert app[name] == version and dev[name] == version, name
    for name, version in pins(ROOT / "requirements-dev.txt").items():
        assert dev[name] == version, name


def test_the_test_lock_agrees_with_the_app_lock():
    """scripts/test.sh installs the test lock and counts the app's lock as installed with it (scripts/start.sh then
    skips its install): the same version of every package the app uses."""
    app, dev = lock_entries(ROOT / "requirements.lock"), lock_entries(ROOT / "requirements-dev.lock")
    app_pins, dev_pins = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-dev.lock")
    assert set(app) <= set(dev)
    assert {name: (v, dev_pins[name]) for name, v in app_pins.items() if dev_pins[name] != v} == {}
    assert {name for name in app if set(app[name]) != set(dev[name])} == set()
