"""No table, report or CSV export shows a raw 'None' or 'nan' where a figure is missing (no price, does not fit, not
ranked): tables show engine.presentation.formatting.MISSING and the row's note says why; CSV cells are left empty.
Checked on every page but Benchmarks for the default scenario (Llama 3.1 70B, 15.6T tokens, 1,024 x H100) alone, with
a 60-day deadline and with a $10M budget, the questions of issue 19."""
import io
import math

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from engine.presentation.edit import default_scenario
from engine.presentation.formatting import MISSING
from engine.presentation.share import PlannerOptions, encode
from ui import background
from tests.app.conftest import button, on_page, run_app

PAGES = ("scenario", "memory", "layout_search", "cost_carbon", "vendor", "report")
QUESTIONS = {"no question": None, "within 60 days": PlannerOptions(deadline_days=60),
             "at most $10M": PlannerOptions(budget_usd=10_000_000)}
RAW = {"None", "nan", "NaN", "<NA>", "NaT", "null"}     # recompute "none" is a value (no recomputation), not a gap


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def raw_cells(df: pd.DataFrame, placeholder: str | None) -> list[tuple]:
    """(column, row, what the browser shows) of every cell that reads None/nan: Streamlit draws a missing value as
    its placeholder, or 'None' without one."""
    out = []
    for col in df.columns:
        for i, value in enumerate(df[col]):
            shown = ("None" if placeholder is None else placeholder) if is_missing(value) else str(value)
            if shown.strip() in RAW:
                out.append((col, i, shown))
    return out


@pytest.fixture
def downloads(monkeypatch) -> list[bytes]:
    """The bytes of every file the app offers for download, as Streamlit stores them."""
    kept = []
    store = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        if isinstance(path_or_data, (bytes, str)):
            kept.append((filename, path_or_data.encode() if isinstance(path_or_data, str) else path_or_data))
        return store(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return kept


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_no_table_report_or_csv_shows_a_raw_none(question, downloads):
    opts = QUESTIONS[question]
    at = run_app({"sc": encode(default_scenario(), opts)} if opts else None)
    background.wait_all()
    at.run()
    found, tables = [], 0
    for page in PAGES:
        on_page(at, page)
        background.wait_all()
        at.run()
        if page == "layout_search":
            button(at, "Run layout search").click().run()
            assert not at.exception, [e.value for e in at.exception]
        for k, table in enumerate(at.dataframe):
            tables += 1
            placeholder = table.proto.placeholder if table.proto.HasField("placeholder") else None
            found += [(page, k, *cell) for cell in raw_cells(table.value, placeholder)]
        for report in at.get("iframe"):
            found += [(page, "report", word) for word in (">None<", " None ", ">nan<", " nan ")
                      if word in report.proto.srcdoc]
    csvs = [(name, data) for name, data in downloads if name and name.endswith(".csv")]
    assert {name for name, _ in csvs} >= {"ranked_layouts.csv", "vendor_comparison.csv"}
    for name, data in csvs:
        df = pd.read_csv(io.BytesIO(data), keep_default_na=False, dtype=str)
        found += [(name, *cell) for cell in raw_cells(df, None)]
    # at least the answer's options, vendors, ranked layouts, rejections and settings (the sourced on-prem and TCO
    # inputs are lists, whose sentences a table would cut off: components.show_inputs)
    assert tables >= 5 and not found, found
    on_page(at, "cost_carbon")        # a price the provider publishes for all its regions says so (Lambda's H100)
    prices = next(t.value for t in at.dataframe if "region" in t.value.columns)
    assert prices.loc[prices["provider"] == "lambda", "region"].tolist() == ["all regions"]
    if opts is not None:      # the answer's table: a figure it has not is the MISSING mark, and its note says why
        on_page(at, "scenario")
        options = next(t for t in at.dataframe if t.proto.placeholder == MISSING and "note" in t.value.columns)
        blank = options.value[options.value["cost USD"].map(is_missing)]
        assert len(blank) and (blank["note"].str.len() > 0).all(), blank
