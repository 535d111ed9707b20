"""The store tests run against both backends: every fixture below is parametrized over the embedded DuckDB file and a
PostgreSQL database of the session's throwaway cluster (tests/postgres.py)."""
import shutil

import pytest

from benchmarks_db.seed import seed
from benchmarks_db.store import open_store

BACKENDS = ["duckdb", "postgresql"]


def _target(backend: str, request, tmp_path, name: str, template: str | None = None):
    """A fresh store location: a DuckDB file in tmp_path (a copy of the file `template`), or a new PostgreSQL database
    (a copy of the database `template`), dropped at the end of the test."""
    if backend == "duckdb":
        path = tmp_path / f"{name}.duckdb"
        if template:
            shutil.copy(template, path)
        return path
    pg = request.getfixturevalue("postgres")
    url = pg.new_database(template)
    request.addfinalizer(lambda: pg.drop(url))
    return url


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store(backend, request, tmp_path):
    s = open_store(_target(backend, request, tmp_path, "store"))
    yield s
    s.close()


@pytest.fixture(scope="session", params=BACKENDS)
def seeded_file(request, tmp_path_factory):
    """A seeded store to copy: a DuckDB file, or the name of a PostgreSQL template database."""
    if request.param == "duckdb":
        path = tmp_path_factory.mktemp("seeded") / "seeded.duckdb"
        s = open_store(path)
        seed(s)
        s.close()
        return "duckdb", path
    pg = request.getfixturevalue("postgres")
    url = pg.new_database()
    s = open_store(url)
    seed(s)
    s.close()
    return "postgresql", pg.database(url)


@pytest.fixture(scope="session")
def seeded_ro(seeded_file, request, tmp_path_factory):
    """A seeded store shared by tests that only read."""
    backend, template = seeded_file
    if backend == "duckdb":
        path = tmp_path_factory.mktemp("ro") / "ro.duckdb"
        shutil.copy(template, path)
        s = open_store(path)
    else:
        pg = request.getfixturevalue("postgres")
        s = open_store(pg.new_database(template))
    yield s
    s.close()


@pytest.fixture
def seeded(seeded_file, request, tmp_path):
    """A seeded store of the test's own, to write to."""
    backend, template = seeded_file
    s = open_store(_target(backend, request, tmp_path, "seeded", template))
    yield s
    s.close()


@pytest.fixture
def seeded_copy(seeded_file, request, tmp_path):
    """Where a seeded store of the test's own is (a DuckDB file or a postgresql:// URL), for the command line's --db."""
    backend, template = seeded_file
    return _target(backend, request, tmp_path, "copy", template)


@pytest.fixture
def location(backend, request, tmp_path):
    """Where a fresh store may be made (nothing there yet): a DuckDB file path or a PostgreSQL database's URL."""
    return _target(backend, request, tmp_path, "fresh")
