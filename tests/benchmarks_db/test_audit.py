"""Ownership and audit (issue 22 item 3; benchmarks_db/audit.py): every upload, trust, untrust, removal, change of
who a thing is listed to and saved scenario saved or deleted writes one audit row in the transaction of the change;
a refused or failing change writes neither. Uploads belong to their uploader: only they remove it or make it
private, a private upload is listed to nobody else and calibrates nobody. Real DuckDB files throughout."""
import json
import subprocess
import sys

import pytest

from benchmarks_db import audit, store as store_module, writer
from benchmarks_db.calibration import calibrated_cluster
from benchmarks_db.ingest import INTERNAL_ERROR, Uploader, delete_upload, ingest_bytes
from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.queries import filter_options, microbench_results
from benchmarks_db.scenarios import delete_scenario, save_scenario, set_visibility
from benchmarks_db.step_time import training_runs
from benchmarks_db.store import open_store
from benchmarks_db.trust import set_trusted, set_upload_visibility, uploads
from engine.presentation.edit import default_scenario
from engine.scenario import ScenarioError
from tests.conftest import ROOT

from .helpers import DATA, matmul_result, runner_file
from .test_hostile_input import H100_BF16_PEAK, snapshot
from .test_step_logs import LOGS, TT_SCENARIO

ALICE, BOB = "alice@example.com", "bob@example.com"
H100 = ("H100-SXM5-80GB", "bf16", 8, 8)                      # calibrated_cluster's accelerator, dtype and placement


def _matmul(tflops: float, host: str) -> bytes:
    """A runner file of one 8192^3 bf16 matmul at `tflops` (seven equal timings)."""
    return runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / (tflops * 1e12)] * 7)],
                       hostname_sha256=host)


def trail(store) -> list[tuple]:
    """The audit rows, oldest first: (who, action, object_kind, object_id, details)."""
    return [(who, action, kind, oid, json.loads(details)) for who, action, kind, oid, details in store.rows(
        "SELECT who, action, object_kind, object_id, details FROM audit_event ORDER BY occurred_at, event_id")]


def test_an_upload_writes_its_audit_row_and_a_check_only_writes_none(store):
    checked = ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE), dry_run=True)
    assert checked.dry_run and trail(store) == []
    report = ingest_bytes(store, "a.json", _matmul(700, "a"), submitter="team A", uploader=Uploader(
        submitter="team A", identity=ALICE, visibility="private"))
    assert report.ingested
    assert trail(store) == [(ALICE, "upload", "upload", report.source_id, {
        "filename": "a.json", "runs": 1, "submitter": "team A", "trusted_by": None, "uploaded_by": ALICE,
        "visibility": "private"})]
    (at,), = store.rows("SELECT occurred_at FROM audit_event")
    (ingested,), = store.rows("SELECT ingested_at FROM source WHERE source_id = ?", [report.source_id])
    assert abs((at - ingested).total_seconds()) < 2                     # both UTC, written together


def test_a_refused_upload_writes_no_audit_row(store):
    ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE))
    before = (snapshot(store), trail(store))
    for name, data, uploader in [("b.json", b"{not json", Uploader(identity=ALICE)),
                                 ("a.json", _matmul(700, "a"), Uploader(identity=BOB)),          # the same file
                                 ("c.json", _matmul(701, "c"), Uploader(visibility="private")),  # nobody to own it
                                 ("d.json", _matmul(702, "d"), Uploader(identity=ALICE, visibility="public"))]:
        report = ingest_bytes(store, name, data, uploader=uploader)
        assert not report.ingested and report.errors
        assert (snapshot(store), trail(store)) == before
    report = ingest_bytes(store, "c.json", _matmul(701, "c"), uploader=Uploader(visibility="private"))
    assert report.errors == ["only a signed-on user's upload can be private; this planner names no user "
                             "(APP_IDENTITY_HEADER), so its uploads are listed to everybody"]


def test_an_ingest_that_fails_after_writing_keeps_neither_its_rows_nor_its_audit_row(store, monkeypatch):
    """The audit row is written last in the upload's transaction; when that write fails, the source, runs and
    measurements written before it in the same transaction are rolled back with it."""
    def broken(cur, *args, **kw):
        audit_record(cur, *args, **kw)
        raise OSError("the disk filled up after the audit row")
    audit_record = audit.record
    before = snapshot(store)
    monkeypatch.setattr(audit, "record", broken)
    report = ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE))
    assert not report.ingested and report.errors == [f"a.json: {INTERNAL_ERROR}"]
    assert snapshot(store) == before and trail(store) == []


def test_only_the_uploader_removes_an_upload_and_a_refused_removal_writes_nothing(store):
    mine = ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE)).source_id
    anonymous = ingest_bytes(store, "b.json", _matmul(710, "b")).source_id
    before = (snapshot(store), trail(store))
    for who, source_id, whose in [(BOB, mine, "another user"), (None, mine, "another user"),
                                  (ALICE, anonymous, "an anonymous user")]:
        with pytest.raises(PermissionError) as err:
            delete_upload(store, source_id, who)
        filename = "a.json" if source_id == mine else "b.json"
        assert str(err.value) == (f"{source_id} ({filename}) was uploaded by {whose}; only its uploader, or the "
                                  "operator (python -m benchmarks_db delete-upload), can remove it")
        assert (snapshot(store), trail(store)) == before
    assert delete_upload(store, mine, ALICE) == 1
    assert delete_upload(store, anonymous) == 1                 # the single-user app: anonymous removes anonymous
    assert [row[:4] for row in trail(store)[-2:]] == [(ALICE, "delete_upload", "upload", mine),
                                                      (None, "delete_upload", "upload", anonymous)]
    assert trail(store)[-2][4] == {"by_operator": False, "filename": "a.json", "runs": 1, "uploaded_by": ALICE}
    assert store.rows("SELECT count(*) FROM source WHERE kind = 'user_submitted'") == [(0,)]


def test_a_private_upload_is_listed_to_its_uploader_only_and_calibrates_nobody(seeded):
    """Alice's private matmul at 700 TFLOP/s: Bob and anonymous viewers do not see it; the operator cannot trust it
    while it is private; shared and trusted, it calibrates (700 / 989.4 = 0.7075); made private again it stops."""
    report = ingest_bytes(seeded, "a.json", _matmul(700, "a"),
                          uploader=Uploader(identity=ALICE, visibility="private", trusted=True))
    assert report.ingested and report.trusted_by is None             # a trusted uploader's private upload: untrusted
    listed = lambda viewer: set(microbench_results(seeded, "matmul_tflops", "H100-SXM5-80GB",
                                                   "user_submitted", viewer=viewer).run_id)
    assert listed(ALICE) == set(report.run_ids) and listed(BOB) == set() and listed(None) == set()
    assert set(uploads(seeded, ALICE).source_id) == {report.source_id} and uploads(seeded, BOB).empty
    with pytest.raises(PermissionError, match="is private to its uploader, and a private upload calibrates nobody"):
        set_trusted(seeded, report.source_id, "ops")
    with pytest.raises(PermissionError, match="belongs to another user: only its uploader can change who"):
        set_upload_visibility(seeded, report.source_id, BOB, "shared")
    assert [row[1] for row in trail(seeded)] == ["upload"]
    published = calibrated_cluster(seeded, *H100)["overrides"]
    assert set_upload_visibility(seeded, report.source_id, ALICE, "shared") == f"{report.source_id}: listed to everybody"
    assert listed(BOB) == set(report.run_ids)
    set_trusted(seeded, report.source_id, "ops@example.com")
    assert calibrated_cluster(seeded, *H100)["overrides"] != published
    assert set_upload_visibility(seeded, report.source_id, ALICE, "private") == \
        f"{report.source_id}: listed to you only and no longer used for calibration"
    assert calibrated_cluster(seeded, *H100)["overrides"] == published and listed(BOB) == set()
    assert [(who, action, details.get("trust_taken_back_from")) for who, action, _, _, details in trail(seeded)] == [
        (ALICE, "upload", None), (ALICE, "share", None), ("ops@example.com", "trust", None),
        (ALICE, "unshare", "ops@example.com")]


def test_no_filter_names_what_only_another_users_private_upload_holds(store):
    """An accelerator only Alice's private upload names (the file's own device name, not in the catalog) is a
    filter choice for her, for nobody else."""
    data = runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / 700e12] * 7)],
                       device_name="Prototype X9 (not announced)")
    report = ingest_bytes(store, "x9.json", data, uploader=Uploader(identity=ALICE, visibility="private"))
    assert report.ingested
    assert "Prototype X9 (not announced)" in filter_options(store, ALICE)["accelerators"]
    for viewer in (BOB, None):
        options = filter_options(store, viewer)
        assert options["accelerators"] == [] and options["source_kinds"] == [] and options["metrics"] == []


def test_trusting_calibrates_by_the_measured_figure_and_both_are_recorded(store):
    report = ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE))
    set_trusted(store, report.source_id, "ops@example.com")
    assert calibrated_cluster(store, *H100)["overrides"] == {"matmul_efficiency": round(700 / H100_BF16_PEAK, 4)}
    set_trusted(store, report.source_id, None, who="ops@example.com")
    assert [row[:2] + (row[4]["trusted_by"], row[4]["was_trusted_by"]) for row in trail(store)[1:]] == [
        ("ops@example.com", "trust", "ops@example.com", None),
        ("ops@example.com", "untrust", None, "ops@example.com")]


def test_a_private_training_run_is_left_out_of_other_users_training_runs(seeded):
    data = (LOGS / "torchtitan-pr3393.log").read_bytes()
    report = ingest_bytes(seeded, "tt.log", data, scenario=TT_SCENARIO,
                          uploader=Uploader(identity=ALICE, visibility="private"))
    assert report.ingested
    assert list(training_runs(seeded, ALICE).source_id) == [report.source_id]
    assert training_runs(seeded, BOB).empty and training_runs(seeded).empty


def test_saved_scenarios_record_save_share_and_delete_and_a_refused_delete_records_nothing(store):
    saved = save_scenario(store, default_scenario(), "70B plan", owner=ALICE, visibility="private")
    assert not save_scenario(store, default_scenario(), "again", owner=ALICE).new      # nothing changed: no row
    with pytest.raises(ScenarioError, match="belongs to another user: only its owner can delete it"):
        delete_scenario(store, saved.scenario_id, BOB)
    set_visibility(store, saved.scenario_id, ALICE, "private")                          # no change: no row
    set_visibility(store, saved.scenario_id, ALICE, "shared")
    delete_scenario(store, saved.scenario_id, ALICE)
    sid = saved.scenario_id
    assert trail(store) == [
        (ALICE, "save_scenario", "saved_scenario", sid, {"name": "70B plan", "visibility": "private"}),
        (ALICE, "share", "saved_scenario", sid, {"name": "70B plan", "visibility": "shared"}),
        (ALICE, "delete_scenario", "saved_scenario", sid, {"name": "70B plan", "visibility": "shared"})]


def test_the_audit_command_lists_the_operators_commands_with_by(seeded_copy):
    db = seeded_copy
    store = open_store(db)
    report = ingest_bytes(store, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE))
    store.close()
    cli = lambda *args: subprocess.run([sys.executable, "-m", "benchmarks_db", *args, "--db", str(db)], cwd=ROOT,
                                       capture_output=True, text=True, timeout=120)
    assert cli("trust", report.source_id, "--by", "ops@example.com").returncode == 0
    assert cli("delete-upload", report.source_id, "--by", "ops@example.com").returncode == 0
    done = cli("audit", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["who"], r["action"], r["object_id"]) for r in rows] == [
        ("ops@example.com", "delete_upload", report.source_id), ("ops@example.com", "trust", report.source_id),
        (ALICE, "upload", report.source_id)]
    assert rows[0]["details"] == {"by_operator": True, "filename": "a.json", "runs": 1, "uploaded_by": ALICE}
    assert all(r["occurred_at"].endswith("Z") for r in rows)
    alice = cli("audit", "--who", ALICE)
    assert alice.returncode == 0 and alice.stdout.count("\n") == 2 and " upload " in alice.stdout
    assert [json.loads(line)["action"] for line in cli("audit", "--json", "--limit", "1").stdout.splitlines()] == \
        ["delete_upload"]
    assert cli("audit", "--who", BOB).stdout == f"no audit events of {BOB}\n"
    bad = cli("audit", "--limit", "0")
    assert bad.returncode == 2 and "'0' is not a whole number from 1 to 1000000" in bad.stderr


def test_the_command_line_records_the_operating_system_user_without_by(seeded_copy):
    import getpass
    db = seeded_copy
    done = subprocess.run([sys.executable, "-m", "benchmarks_db", "ingest", "--db", str(db), "--trusted",
                           str(DATA / "nccl_tests_allreduce_seed003.txt")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    store = open_store(db)
    try:
        (who, action, _, _, details), = trail(store)
        assert (who, action, details["trusted_by"], details["uploaded_by"]) == \
            (getpass.getuser(), "upload", getpass.getuser(), None)
    finally:
        store.close()


def test_a_store_from_before_the_audit_upgrades_with_its_uploads_shared_and_an_empty_trail(tmp_path, monkeypatch):
    path = tmp_path / "old.duckdb"
    before_audit = next(i for i, (_, sql) in enumerate(MIGRATIONS) if "CREATE TABLE audit_event" in sql)
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:before_audit])
    monkeypatch.setattr(writer, "SOURCE", {k: v for k, v in writer.SOURCE.items() if k != "visibility"})
    monkeypatch.setattr(audit, "record", lambda *args, **kw: None)      # that schema had no audit_event table
    old = open_store(path)
    report = ingest_bytes(old, "a.json", _matmul(700, "a"), uploader=Uploader(identity=ALICE))
    assert report.ingested
    old.close()
    monkeypatch.undo()
    new = open_store(path)
    try:
        assert new.schema_version() == len(MIGRATIONS)
        assert new.rows("SELECT uploaded_by, visibility FROM source") == [(ALICE, "shared")]
        assert trail(new) == [] and set(microbench_results(new, viewer=BOB).run_id) == set(report.run_ids)
    finally:
        new.close()
