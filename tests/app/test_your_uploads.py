"""The Benchmarks page's uploads belong to their uploader (issue 22 item 3), in the real app on a real store with two
users the reverse proxy names: Alice uploads privately, Bob sees it nowhere and has nothing to delete, Alice shares
it, then deletes it, and the audit trail names her for each; without an identity header the page is as before."""
import pytest
import streamlit as st

from benchmarks_db import audit
from benchmarks_db.ingest import delete_upload
from tests.app.conftest import button, on_page, run_app, texts
from tests.benchmarks_db.helpers import matmul_result, runner_file

ALICE, BOB = "alice@example.com", "bob@example.com"


def _matmul(tflops: float, host: str) -> bytes:
    return runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / (tflops * 1e12)] * 7)],
                       hostname_sha256=host)


@pytest.fixture
def cleanup(app_store):
    """Every upload of these tests' users taken out again by the operator afterwards."""
    yield
    for source_id, in app_store.rows("SELECT source_id FROM source WHERE uploaded_by IN (?, ?)", [ALICE, BOB]):
        delete_upload(app_store, source_id, operator=True)
    st.cache_data.clear()


def as_user(proxy, who: str | None, at=None):
    """A new session of `who` on the Benchmarks page, or the next run of `at` with `who` signed on."""
    proxy.who = who
    if at is None:
        return on_page(run_app(), "benchmarks")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def listed(at) -> list[str]:
    """The Your uploads rows' first column (file name and source id), as shown."""
    return [t for t in texts(at.markdown) if " run(s), " in t]


def uploaded_runs(at) -> set[str]:
    """The run ids Browse lists under Source 'user_submitted' (a choice only while the viewer may see an upload)."""
    kinds = at.selectbox(key="f_kind")
    if "user_submitted" not in kinds.options:
        return set()
    kinds.set_value("user_submitted").run()
    return set(at.dataframe[1].value["run_id"]) if len(at.dataframe[1].value) else set()


def test_alice_uploads_privately_bob_sees_nothing_alice_shares_and_deletes_it(signed_in, app_store, cleanup):
    alice = as_user(signed_in, ALICE)
    alice.radio(key="bench_visibility").set_value("private")
    alice.file_uploader(key="bench_upload").set_value(("alice.json", _matmul(701, "alice"), "application/json"))
    button(alice, "Check and add to the store").click().run()
    assert any("Kept private: listed to you only" in t for t in texts(alice.info)), texts(alice.info)
    (source_id, run_id), = app_store.rows("SELECT source_id, run_id FROM source JOIN run USING (source_id) "
                                          "WHERE uploaded_by = ?", [ALICE])
    assert app_store.rows("SELECT visibility FROM source WHERE source_id = ?", [source_id]) == [("private",)]
    assert [t.split(" ", 1)[0] for t in listed(alice)] == ["**alice.json**"]
    assert "private: only you" in texts(alice.markdown)
    assert uploaded_runs(alice) >= {run_id}

    bob = as_user(signed_in, BOB)
    assert listed(bob) == [] and "Nothing uploaded under your name yet." in [c.value for c in bob.caption]
    assert not [b for b in bob.button if b.key in (f"del_{source_id}", f"vis_{source_id}")]
    assert run_id not in uploaded_runs(bob)

    alice = as_user(signed_in, ALICE, alice)
    alice.button(key=f"vis_{source_id}").click().run()
    assert f"{source_id}: listed to everybody" in texts(alice.success)
    bob = as_user(signed_in, BOB, bob)
    st.cache_data.clear()                                    # another session's change shows within the cache's minute
    assert run_id in uploaded_runs(bob)

    alice = as_user(signed_in, ALICE, alice)
    alice.button(key=f"del_{source_id}").click().run()
    assert any(f"Removed upload {source_id} and its 1 run(s)" in t for t in texts(alice.success))
    assert listed(alice) == [] and app_store.rows("SELECT count(*) FROM source WHERE source_id = ?", [source_id]) == [(0,)]
    trail = audit.events(app_store, who=ALICE)
    assert list(trail[trail.object_id == source_id].action) == ["delete_upload", "share", "upload"]


def test_bob_cannot_remove_alices_upload_even_with_its_remove_button(signed_in, app_store, cleanup):
    """The page checks nothing itself: the store refuses, with its message, and nothing changes."""
    alice = as_user(signed_in, ALICE)
    alice.file_uploader(key="bench_upload").set_value(("shared.json", _matmul(702, "shared"), "application/json"))
    button(alice, "Check and add to the store").click().run()
    (source_id,), = app_store.rows("SELECT source_id FROM source WHERE uploaded_by = ?", [ALICE])
    events = len(audit.events(app_store))
    signed_in.who = BOB                                      # the same tab, now sent with Bob's identity
    button(alice, "Remove this upload").click().run()
    assert not alice.exception
    assert any(f"was uploaded by another user; only its uploader" in t for t in texts(alice.markdown)), \
        texts(alice.markdown)
    assert app_store.rows("SELECT count(*) FROM source WHERE source_id = ?", [source_id]) == [(1,)]
    assert len(audit.events(app_store)) == events


def test_without_an_identity_header_the_upload_tab_is_as_before(app_store):
    at = on_page(run_app(), "benchmarks")
    assert not [r for r in at.radio if r.key == "bench_visibility"]
    assert "Your uploads" not in [h.value for h in at.subheader]
