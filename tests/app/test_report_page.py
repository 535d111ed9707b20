"""Summary report page: a preview and the downloads (the report content itself is tested in
tests/engine/test_report.py and downloaded end to end in tests/e2e)."""
from tests.app.conftest import on_page, run_app


def test_the_report_page_offers_the_report_and_the_scenario():
    at = on_page(run_app(), "report")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download the summary report (HTML)", "Download the scenario (JSON)"]
    assert len(at.get("iframe")) == 1
    assert not at.warning
