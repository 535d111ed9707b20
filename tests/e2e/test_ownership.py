"""Uploads belong to their uploader (issue 22 item 3) against the planner as deployed (serve.py) and real Chromium,
with two users the reverse proxy names in X-Forwarded-Email: Alice uploads privately, Bob sees it neither under his
uploads nor in Browse, Alice deletes it, and the operator's `python -m benchmarks_db audit` lists both, by her."""
import json
import re
import subprocess
import sys

import pytest

from serve import local_server
from tests.benchmarks_db.helpers import matmul_result, runner_file
from tests.conftest import ROOT
from tests.e2e.conftest import VIEWPORT, choose, go_to, no_exception, open_page, screenshot, table_cells, upload, \
    wait_for_app

pytestmark = pytest.mark.e2e
ALICE, BOB = "alice@example.com", "bob@example.com"
# one 8192^3 bf16 matmul at 701 TFLOP/s (seven equal timings), a run no seed dataset holds
ALICES_FILE = runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / 701e12] * 7)],
                          hostname_sha256="alice-e2e")


def signed_on(browser, url: str, who: str):
    """A browser of its own whose every request carries the proxy's header naming `who`, on the Benchmarks page."""
    ctx = browser.new_context(viewport=VIEWPORT, extra_http_headers={"X-Forwarded-Email": who})
    page = ctx.new_page()
    open_page(page, url)
    go_to(page, "Benchmarks")
    return ctx, page


def test_alice_uploads_privately_bob_does_not_see_it_alice_deletes_it_and_the_audit_lists_both(browser, tmp_path,
                                                                                               monkeypatch):
    monkeypatch.setenv("APP_IDENTITY_HEADER", "X-Forwarded-Email")
    with local_server(tmp_path) as (url, _pid, _log):
        alice_ctx, alice = signed_on(browser, url, ALICE)
        try:
            alice.get_by_role("tab", name="Upload results").click()
            alice.get_by_text("only me (private)", exact=True).click()
            wait_for_app(alice)
            upload(alice, "alice.json", ALICES_FILE)
            alice.get_by_text("Kept private: listed to you only").wait_for(timeout=30_000)
            screenshot(alice, "ownership-alice-uploaded-privately")
            run_id = re.search(r"Run ids: (run-[0-9a-f]+)", alice.get_by_text("Run ids:").inner_text()).group(1)
            assert alice.get_by_role("button", name="Delete").count() == 1
            assert alice.get_by_text("private: only you", exact=True).count() == 1
            no_exception(alice)
            alice.get_by_role("tab", name="Browse").click()
            choose(alice, "Source", "user_submitted")
            assert run_id in table_cells(alice, 1, awaiting=run_id), table_cells(alice, 1)   # Alice sees her own

            bob_ctx, bob = signed_on(browser, url, BOB)
            try:
                # no upload Bob may see: the Source filter does not even offer uploaded results
                bob.get_by_role("combobox", name="Source", exact=True).click()
                kinds = bob.get_by_role("option").all_inner_texts()
                assert "published" in kinds and "user_submitted" not in kinds, kinds
                bob.keyboard.press("Escape")
                bob.get_by_role("tab", name="Upload results").click()
                assert bob.get_by_text("Nothing uploaded under your name yet.").count() == 1
                assert bob.get_by_role("button", name="Delete").count() == 0
                no_exception(bob)
                screenshot(bob, "ownership-bob-sees-nothing")
            finally:
                bob_ctx.close()

            alice.get_by_role("tab", name="Upload results").click()
            alice.get_by_role("button", name="Delete").click()
            alice.get_by_text("Removed upload upload:").wait_for(timeout=30_000)
            wait_for_app(alice)
            assert alice.get_by_text("Nothing uploaded under your name yet.").count() == 1
            no_exception(alice)
            screenshot(alice, "ownership-alice-deleted")
        finally:
            alice_ctx.close()
    # the operator reads the trail with the planner stopped (every store command takes its serving lock)
    done = subprocess.run([sys.executable, "-m", "benchmarks_db", "audit", "--json", "--db",
                           str(tmp_path / "planner.duckdb")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["who"], r["action"], r["details"]["filename"], r["details"].get("visibility")) for r in rows] == [
        (ALICE, "delete_upload", "alice.json", None), (ALICE, "upload", "alice.json", "private")]
    assert rows[0]["object_id"] == rows[1]["object_id"]
