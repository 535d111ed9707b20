"""The public API (engine/api.py): typed results that agree with the functions the app uses, and the notebook
example in docs/notebook-sweep.md runs as written."""
import json
import re

import pytest

import engine
from engine.planning.estimate import estimate as planning_estimate
from tests.conftest import ROOT
from tests.engine.helpers import parse, scenario


def test_top_level_names_and_typed_estimate(tmp_path):
    sc = parse()
    e = engine.estimate(sc)
    assert isinstance(e, engine.Estimate) and e == planning_estimate(sc)
    assert e.layout.dp == 8 and 0 < e.mfu < e.mfu_full_square < 1
    assert e.params_total == pytest.approx(8.03e9, rel=0.01)            # Llama 3.1 8B's published count
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario()))
    assert engine.estimate(f).step_time_s == e.step_time_s              # a path, a dict or a Scenario alike
    assert engine.estimate(scenario()).step_time_s == e.step_time_s
    with pytest.raises(engine.ScenarioError):
        engine.estimate({"model": {"preset": "nope"}})


def test_search_and_plan_are_typed():
    s = engine.search(parse(), top=2, pareto_sizes=[])
    assert isinstance(s, engine.SearchResult) and len(s.best) == 2 and s.best[0].fits
    p = engine.plan(parse(**{"cluster.n_gpus": 64, "layout": None}), deadline_days=60, vendor="same")
    assert isinstance(p, engine.Plan) and p.answer.wall_days <= 60
    assert p.answer.ranges["wall_days"].low < p.answer.wall_days
    assert p.options[0].met and p.options[0].n_gpus == p.answer.n_gpus and p.options[0].wall_days == p.answer.wall_days


def test_cluster_search_and_comparison_rows_are_typed():
    s = engine.search(parse(**{"layout": None}), top=1, pareto_sizes=[], deadline_days=30)
    sized = s.cluster_search
    assert sized.met and sized.best.wall_days <= 30 and sized.nodes * sized.gpus_per_node == sized.n_gpus
    c = engine.compare(parse(**{"layout": None}), accelerators=["H100-SXM5-80GB", "GB200"])
    top = next(r for r in c.rows if r.rank == 1)
    assert top.accelerator == c.recommendation and top.layout is not None and top.wall_days > 0


def test_the_notebook_example_runs_as_written():
    text = (ROOT / "docs" / "notebook-sweep.md").read_text()
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        exec(compile(block, "docs/notebook-sweep.md", "exec"), namespace)
    table = namespace["table"]
    assert list(table.gpus) == [1024, 2048, 3072, 4096, 6144, 8192]
    assert table.days.is_monotonic_decreasing                          # more GPUs finish sooner
    assert namespace["answer"].wall_days <= 30
    assert len(namespace["figure"].data) == 1
