import shutil

import pytest

from benchmarks_db.seed import seed
from benchmarks_db.store import open_store


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "store.duckdb")
    yield s
    s.close()


@pytest.fixture(scope="session")
def seeded_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeded") / "seeded.duckdb"
    s = open_store(path)
    seed(s)
    s.close()
    return path


@pytest.fixture(scope="session")
def seeded_ro(seeded_file, tmp_path_factory):
    """A seeded store shared by tests that only read."""
    path = tmp_path_factory.mktemp("ro") / "ro.duckdb"
    shutil.copy(seeded_file, path)
    s = open_store(path)
    yield s
    s.close()


@pytest.fixture
def seeded(seeded_file, tmp_path):
    """A seeded store of the test's own, to write to."""
    path = tmp_path / "seeded.duckdb"
    shutil.copy(seeded_file, path)
    s = open_store(path)
    yield s
    s.close()
