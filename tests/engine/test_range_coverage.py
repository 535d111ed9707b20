"""Ranges per regime on held-out data: every published run the ranges rest on is predicted again from the case list
(tests/data/public-validation-cases.json through tests/engine/published_runs.py, and the MLPerf results of a seeded
store), the stored runs of data/accuracy.json must be those predictions, and each source's runs are counted against
the bands fitted without that source; the coverage docs/validation.md claims must be that count."""
import math
import re
import statistics
import tempfile
from pathlib import Path

import pytest

from benchmarks_db.seed import seed
from benchmarks_db.store import open_store
from benchmarks_db.validation import predicted_vs_measured
from engine import frameworks
from engine.catalog import load_catalog
from engine.economics import ranges
from tests.conftest import ROOT
from tests.engine.published_runs import public_case_predictions, public_runs

pytestmark = pytest.mark.slow


def _regime(method: str, framework, accelerator: str, precision: str, moe: bool, zero: int, n_gpus: int) -> dict:
    acc = load_catalog().accelerator(accelerator)
    stack = frameworks.resolve(framework, acc.vendor, accelerator, precision)
    return {**ranges.regime_of(method, stack.stack.id, accelerator, frameworks.precision_class(precision), moe, zero, n_gpus),
            "calibrated": stack.calibrated}


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    out = []
    cases = public_runs()
    for run, row in zip(cases, public_case_predictions(cases)):
        if row["ratio"] is not None:
            tr = run.scenario["training"]
            out.append({"source": run.source, "case": run.name, "ratio": row["ratio"],
                        **_regime(tr.get("method", "pretrain"), tr.get("framework"), run.accelerator,
                                  tr.get("precision", "bf16"), row["moe"], int(row["dp_sharding"][-1]), row["n_gpus"])})
    store = open_store(str(Path(tempfile.mkdtemp()) / "coverage.duckdb"))
    seed(store)
    for r in predicted_vs_measured(store).itertuples():
        # a result whose log was not read is predicted at the reference batch: not the run it measured
        if r.ratio is not None and not math.isnan(r.ratio) and not str(r.token_basis).startswith("reference run"):
            zero = int(re.search(r"zero(\d)", r.layout).group(1))
            method = "lora" if r.benchmark.endswith("_lora") else "pretrain"
            out.append({"source": f"mlperf {r.round}", "case": r.run_id,
                        "ratio": 1 / r.ratio,       # predicted / published minutes, inverted: published / predicted time
                        **_regime(method, r.framework, r.accelerator, r.precision, False, zero,
                                  int(r.n_accelerators))})
    return out


def test_the_stored_runs_are_the_engines_predictions_of_the_case_list(runs):
    stored = {(r["source"], r["case"]): r for r in ranges.accuracy()["runs"]}
    assert len(stored) == len(runs)
    for r in runs:
        s = stored[(r["source"], r["case"])]
        assert {d: s[d] for d in (*ranges.DIMENSIONS, "calibrated")} == {d: r[d] for d in (*ranges.DIMENSIONS,
                                                                                           "calibrated")}
        assert s["ratio"] == pytest.approx(r["ratio"], rel=1e-3), r["case"]


def _claimed(section: str) -> dict[str, tuple[int, int]]:
    """The rows of a docs/validation.md coverage table: name -> (runs, inside)."""
    doc = (ROOT / "docs" / "validation.md").read_text()
    table = doc.split(section, 1)[1].split("\n\n", 1)[0]
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in table.splitlines()[2:]]
    return {cells[0].strip().replace("\\|", "|"): (int(cells[1]), int(cells[2])) for cells in rows}


def test_bands_fitted_without_a_source_cover_its_runs_as_docs_validation_claims(runs):
    by_source, by_stack, by_regime, widths = {}, {}, {}, []
    for source in sorted({r["source"] for r in runs}):
        fitted = ranges.fit([r for r in runs if r["source"] != source])
        for r in (r for r in runs if r["source"] == source):
            b = ranges.band_from(fitted, {d: r[d] for d in ranges.DIMENSIONS}, r["calibrated"])
            inside = b.low <= r["ratio"] <= b.high
            widths.append(b.high / b.low)
            for table, key in ((by_source, source), (by_stack, f"{r['method']} | {r['framework']} | {r['family']}"),
                               (by_regime, " | ".join(r[d] for d in ranges.DIMENSIONS))):
                n, k = table.get(key, (0, 0))
                table[key] = (n + 1, k + inside)
    assert _claimed("| Left-out source |") == by_source
    assert _claimed("| Method \\| stack \\| family |") == by_stack
    assert _claimed("| Regime (method") == by_regime
    n, inside = len(runs), sum(k for _, k in by_source.values())
    doc = (ROOT / "docs" / "validation.md").read_text()
    assert f"**{inside} inside ({inside / n:.0%})**, median band **{statistics.median(widths):.2f}x**" in doc
