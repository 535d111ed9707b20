"""Our MLPerf scoring (benchmarks_db/mlperf.py) against MLCommons' own package, mlperf-logging (a test dependency,
requirements-dev.txt): the bundled result folders score the same under its result_summarizer, with the same runs
dropped, and our required-run table agrees with its benchmark metadata."""
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks_db.ingest import ingest_path
from benchmarks_db.mlperf import REQUIRED_RUNS, olympic_score, parse_log

from .helpers import AMD_LORA, DELL_LORA, GPT3

benchmark_meta = pytest.importorskip("mlperf_logging.benchmark_meta")
summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")

FIRST_ROUND_OURS = (3, 0)          # the store is seeded with MLPerf Training v3.0 on (benchmarks_db/data)


def _max_dropped(benchmark: str) -> int:
    """The summarizer's rule (result_summarizer._compute_strong_score_standalone: 4 for unet3d, else 1)."""
    return 4 if benchmark == "unet3d" else 1


@pytest.mark.parametrize("folder, ruleset", [(GPT3, "4.1.0"), (AMD_LORA, "5.0.0"), (DELL_LORA, "5.0.0")],
                         ids=["gpt3-v4.1", "amd-lora-v5.0", "dell-lora-v5.0"])
def test_bundled_samples_score_the_same_under_mlperf_logging(store, folder, ruleset, tmp_path):
    results = next(folder.rglob("result_0.txt")).parent
    benchmark = results.name
    copy = shutil.copytree(results, tmp_path / benchmark)         # the summarizer reads the folder as it lies
    per_run, _, score, _, scaling = summarizer._compute_strong_score_standalone(
        benchmark, results.parent.name, False, str(copy), "training", ruleset, return_full_scores=True)

    report = next(r for r in ingest_path(store, folder) if r.format == "mlperf_results")
    assert report.ingested, report.errors
    assert report.score_minutes == pytest.approx(score, rel=1e-12)
    ours = {p.name: parse_log(p.read_text(), p.name) for p in sorted(results.glob("result_*.txt"))}
    theirs = {name.rsplit("/", 1)[1]: minutes for name, minutes in per_run.items()}
    assert {n: r.minutes for n, r in ours.items() if r.minutes is not None} == pytest.approx(theirs, rel=1e-12)
    assert {n for n, r in ours.items() if r.minutes is None} == set(ours) - set(theirs)   # the same runs dropped
    assert olympic_score(list(theirs.values()), len(ours) - len(theirs), benchmark, scaling) == \
        pytest.approx(score, rel=1e-12)


def test_required_runs_match_mlperf_loggings_benchmark_metadata():
    counts = benchmark_meta.get_result_file_counts("training")
    rounds = benchmark_meta._ALL_ALLOWED_BENCHMARKS["training"]
    recent = {b for r, names in rounds.items() if tuple(map(int, r.split("."))) >= FIRST_ROUND_OURS for b in names}
    assert REQUIRED_RUNS == {b: counts[b] for b in recent}


@given(minutes=st.lists(st.floats(1.0, 1e4), min_size=1, max_size=45), n_failed=st.integers(0, 6),
       benchmark=st.sampled_from(sorted(REQUIRED_RUNS)), scaling=st.floats(1.0, 1.5))
def test_olympic_score_is_the_summarizers(minutes, n_failed, benchmark, scaling):
    max_drop = _max_dropped(benchmark)
    theirs = summarizer._compute_olympic_average(list(minutes), n_failed, max_drop) if n_failed <= max_drop else None
    ours = olympic_score(minutes, n_failed, benchmark, scaling)
    if theirs is None:
        assert ours is None
    else:
        assert ours == pytest.approx(theirs * scaling, rel=1e-12)
