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
from benchmarks_db.validation import from_own_log, predicted_vs_measured
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
        if r.ratio is not None and not math.isnan(r.ratio) and from_own_log(r.token_basis):
            zero = int(re.search(r"zero(\d)", r.layout).group(1))
            method = "lora" if r.benchmark.endswith("_lora") else "pretrain"
            logged_step = r.logged_step_s is not None and not math.isnan(r.logged_step_s)
            out.append({"source": f"mlperf {r.round}", "case": r.run_id,
                        # published / predicted time: the LoRA logs' training step where measured, else minutes
                        "ratio": r.logged_step_s / r.step_time_s if logged_step else 1 / r.ratio,
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


def _claimed(section: str) -> dict[str, tuple[int, int, str]]:
    """The rows of a docs/validation.md coverage table: name -> (runs, inside, 90% interval as printed)."""
    doc = (ROOT / "docs" / "validation.md").read_text()
    table = doc.split(section, 1)[1].split("\n\n", 1)[0]
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in table.splitlines()[2:]]
    return {cells[0].strip().replace("\\|", "|"): (int(cells[1]), int(cells[2]), cells[4].strip()) for cells in rows}


def test_the_coverage_interval_is_clopper_pearsons():
    # n of n and 0 of n have closed forms: (0.05)^(1/n) and 1 - (0.05)^(1/n) at 90%
    assert ranges.coverage_interval(9, 9) == pytest.approx((0.05 ** (1 / 9), 1.0), abs=1e-9)
    assert ranges.coverage_interval(0, 2) == pytest.approx((0.0, 1 - 0.05 ** 0.5), abs=1e-9)
    # otherwise the ends are where the binomial tails beyond inside hold 5% each
    low, high = ranges.coverage_interval(29, 37)
    tail = lambda p, ks: sum(math.comb(37, k) * p ** k * (1 - p) ** (37 - k) for k in ks)
    assert tail(low, range(29, 38)) == pytest.approx(0.05, abs=1e-9)
    assert tail(high, range(0, 30)) == pytest.approx(0.05, abs=1e-9)


def _interval(inside: int, n: int) -> str:
    low, high = ranges.coverage_interval(inside, n)
    return f"{low:.0%}-{high:.0%}"


def test_bands_fitted_without_a_source_cover_its_runs_as_docs_validation_claims(runs):
    tables: dict[str, dict] = {"source": {}, "support": {}, "stack": {}, "regime": {}}
    widths = []
    for source in sorted({r["source"] for r in runs}):
        fitted = ranges.fit([r for r in runs if r["source"] != source])
        for r in (r for r in runs if r["source"] == source):
            b = ranges.band_from(fitted, {d: r[d] for d in ranges.DIMENSIONS}, r["calibrated"])
            # every band holds the engine's own figure; an uncalibrated accelerator's is the widest
            assert b.low <= 1 <= b.high
            if not r["calibrated"]:
                assert (b.support, b.level) == ("uncalibrated", "widest") and "uncalibrated" in b.text
            inside = b.low <= r["ratio"] <= b.high
            widths.append(b.high / b.low)
            for table, key in (("source", source), ("support", f"{r['method']} | {b.support}"),
                               ("stack", f"{r['method']} | {r['framework']} | {r['family']}"),
                               ("regime", " | ".join(r[d] for d in ranges.DIMENSIONS))):
                n, k = tables[table].get(key, (0, 0))
                tables[table][key] = (n + 1, k + inside)
    with_interval = {t: {k: (n, i, _interval(i, n)) for k, (n, i) in v.items()} for t, v in tables.items()}
    assert _claimed("| Left-out source |") == with_interval["source"]
    assert _claimed("| Method \\| support |") == with_interval["support"]
    assert _claimed("| Method \\| stack \\| family |") == with_interval["stack"]
    assert _claimed("| Regime (method") == with_interval["regime"]
    n, inside = len(runs), sum(k for _, k in tables["source"].values())
    regimes = tables["regime"].values()
    in_target = sum(0.75 <= k / m <= 0.85 for m, k in regimes)
    doc = (ROOT / "docs" / "validation.md").read_text()
    assert (f"**{inside} inside ({inside / n:.0%})**, median band **{statistics.median(widths):.2f}x** high/low, "
            f"widest band {max(widths):.2f}x. Of {len(regimes)} regimes, {in_target} have a coverage within 75-85%"
            in doc)
    # issue 21's targets, on held-out sources: 75-85% overall and a median band no wider than 1.6x (143 of 174, 82%,
    # at 1.26x): below 75% the bands claim more than they hold, above 85% they are wider than the error they measured
    assert 75 <= round(100 * inside / n) <= 85 and statistics.median(widths) <= 1.6
