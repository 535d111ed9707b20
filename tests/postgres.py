"""A throwaway PostgreSQL cluster for the tests (Debian's `postgresql` package, which scripts/test.sh installs):
initdb and pg_ctl in a fresh folder, listening on a unix socket only, as the `postgres` user when the tests run as
root (PostgreSQL refuses to run as root); a database per test, made from template databases."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg

from benchmarks_db.backup import find_pg_program

MISSING = ("PostgreSQL's programs (initdb, pg_ctl) are missing: install Debian's postgresql package "
           "(scripts/test.sh does: apt-get install postgresql)")


def pg_bin() -> Path | None:
    """The folder of the newest installed PostgreSQL's programs (Debian keeps them off PATH), or None."""
    initdb = find_pg_program("initdb")
    return Path(initdb).parent if initdb else None


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder

    def url(self, database: str = "postgres", user: str = "postgres", password: str | None = None) -> str:
        who = user + (f":{password}" if password else "")
        return f"postgresql://{who}@/{database}?host={self.folder}"

    def admin(self, sql: str, params=None) -> None:
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(sql, params)

    def new_database(self, template: str | None = None) -> str:
        """A fresh database's URL (a copy of `template`'s, which must have no open connection)."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    @staticmethod
    def database(url: str) -> str:
        """The database a URL of url() names."""
        return url.split("@/", 1)[1].split("?", 1)[0]

    def drop(self, url: str) -> None:
        name = self.database(url)
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def cluster():
    """Start a cluster in a fresh folder under /tmp (readable by the postgres user); stopped and removed after."""
    bindir = pg_bin()
    if bindir is None:
        raise FileNotFoundError(MISSING)
    folder = Path(tempfile.mkdtemp(prefix="planner-pg-"))
    as_owner: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    run = lambda *cmd: subprocess.run([*as_owner, *cmd], check=True, capture_output=True, text=True, timeout=120)
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        # a user that must give its password (scram), for the wrong-password test; everyone else is trusted
        with open(data / "pg_hba.conf", "w") as hba:
            hba.write("local all with_password scram-sha-256\nlocal all all trust\n")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "start",
            "-o", f"-k {folder} -c listen_addresses='' -c fsync=off -c full_page_writes=off")
        c = Cluster(folder)
        c.admin("CREATE ROLE with_password LOGIN SUPERUSER PASSWORD 'right-password'")
        yield c
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
