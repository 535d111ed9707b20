"""ingest_bytes(dry_run=True): the whole check, the store's own constraints included, and nothing kept."""
import json

from benchmarks_db.ingest import ingest_bytes
from tests.conftest import runner_result


def test_dry_run_reports_the_rows_and_keeps_nothing(tmp_path, store):
    out = tmp_path / "r.json"
    runner_result("membw", out)
    data = out.read_bytes()
    before = store.counts()
    checked = ingest_bytes(store, "r.json", data, dry_run=True)
    assert checked.dry_run and not checked.ingested and not checked.errors
    assert checked.rows_added["measurement"] == len(json.loads(data)["results"])
    assert store.counts() == before
    added = ingest_bytes(store, "r.json", data)
    assert added.ingested and added.rows_added == checked.rows_added
    after = store.counts()
    assert after["measurement"] - before["measurement"] == checked.rows_added["measurement"]
    again = ingest_bytes(store, "r.json", data, dry_run=True)          # a dry run sees duplicates too
    assert not again.dry_run and any("duplicate" in e or "already" in e for e in again.errors)
    assert store.counts() == after
