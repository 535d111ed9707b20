"""Layout search: exhaustive, consistent with the single estimate, and explained."""
import json
import subprocess
import sys

import numpy as np
import pytest

from engine.planning.estimate import estimate
from engine.inputs import parse_scenario
from engine.physics.schedule import stage_layers
from engine.planning.search import best_at, enumerate_layouts, explain, search, search_cluster
from engine.planning.sizing import cluster_search, node_counts
from tests.conftest import ROOT
from tests.engine.helpers import gpt, scenario
from tests.engine.published_runs import megatron_table1

NUMERIC = ("step_time_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu",
           "train_days", "gpu_hours")


def _with_layout(sc, layout):
    data = sc.model_dump()
    data["layout"] = layout
    return parse_scenario(data)


def assert_same_estimate(sc, row):
    single = estimate(_with_layout(sc, row.layout))
    for key in NUMERIC:
        assert getattr(single, key) == getattr(row, key), key
    assert single.memory_gib == row.memory_gib
    assert single.time_breakdown_s == row.time_breakdown_s
    assert single.fits == row.fits


@pytest.mark.parametrize("run", megatron_table1(), ids=lambda r: r.name)
def test_megatron_table1_best_layout_fits_and_beats_published(run):
    sc = parse_scenario(run.scenario)
    out = search(sc, top=3, pareto_sizes=[])
    best = out.best[0]
    assert best.fits and best.memory_gib.total <= best.memory_capacity_gib
    assert best.step_time_s <= run.predict().step_time_s * (1 + 1e-12)
    assert_same_estimate(sc, best)


def test_small_model_on_one_node_is_pure_data_parallel():
    # 1.3B GPT (Megatron's smallest config family) on 8 H100: sharding only adds communication
    sc = parse_scenario({"model": gpt(24, 2048, 16), "training": {"seq_len": 2048, "global_batch_size": 256, "total_tokens": 1e11},
                         "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}})
    best = search(sc, top=1, pareto_sizes=[]).best[0].layout
    assert (best.tp, best.pp, best.cp, best.dp) == (1, 1, 1, 8)


def test_model_too_big_for_replicas_must_shard():
    # Llama 3.1 70B needs ~1.1 TB of model states (16 B/param): no 80 GB GPU holds a replica
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-70b", "cluster.n_gpus": 64, "layout": None,
                                    "training.global_batch_size": 512}))
    cs = search_cluster(sc, 64)
    lay = cs.valid_layouts
    unsharded = (lay.tp == 1) & (lay.pp == 1) & (lay.zero < 3)
    assert unsharded.any() and not cs.feasible[unsharded].any()
    out = search(sc, top=20, pareto_sizes=[])
    assert out.feasible > 0 and "does not fit in accelerator memory" in out.rejected
    for r in out.best:
        lo = r.layout
        assert lo.tp * lo.pp > 1 or lo.zero_stage == 3


def test_candidates_satisfy_every_rule_and_counts_add_up():
    sc = parse_scenario(scenario(**{"model.preset": "mixtral-8x7b", "cluster.n_gpus": 64, "layout": None}))
    out = search(sc, top=50, pareto_sizes=[])
    assert out.feasible + sum(out.rejected.values()) == out.candidates_evaluated
    arch = sc.arch
    for r in out.best:
        lo = r.layout
        assert lo.tp * lo.pp * lo.dp * lo.cp == r.n_gpus == 64
        assert arch.n_heads % lo.tp == 0 and arch.kv_heads % lo.tp == 0
        stage_layers(arch.n_layers, lo.pp, lo.virtual_stages, lo.first_stage_layers, lo.last_stage_layers)
        assert sc.training.global_batch_size % (lo.dp * lo.micro_batch_size) == 0
        etp = lo.expert_tp or lo.tp          # MoE parallel folding: expert groups over tp x cp x dp ranks
        assert arch.n_experts % lo.ep == 0 and (lo.tp * lo.dp * lo.cp) % (lo.ep * etp) == 0
        assert lo.tp <= 8                       # tensor parallelism stays inside an 8-GPU node
        assert r.fits
    times = [r.train_days for r in out.best]
    assert times == sorted(times)


def test_search_agrees_with_single_estimate_for_moe_and_pipeline():
    sc = parse_scenario(scenario(**{"model.preset": "deepseek-v3", "cluster.n_gpus": 1024, "layout": None,
                                    "training.global_batch_size": 2048}))
    out = search(sc, top=5, pareto_sizes=[])
    assert out.best
    for r in out.best:
        assert_same_estimate(sc, r)


def test_why_not_tp16():
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-70b", "cluster.n_gpus": 256, "layout": None}))
    cs = search_cluster(sc, 256)
    why = explain(cs, tp=16)
    assert why["feasible"] == 0
    # 16 does not divide the 8 KV heads of Llama 3.1 70B, which the rejection names
    assert set(why["rejected"]) == {"heads, KV heads or MLP width not divisible by tp"}
    spanning = explain(search_cluster(parse_scenario(scenario(**{"model.preset": "gpt3-175b", "cluster.n_gpus": 256,
                                                                 "layout": None})), 256), tp=16)
    assert "tensor-parallel group would span nodes (allow_span_nodes to permit)" in spanning["rejected"]
    ok = explain(cs, tp=8, pp=4)
    assert ok["feasible"] > 0 and ok["best"].layout.tp == 8 and ok["best"].layout.pp == 4


def test_allow_span_nodes_admits_cross_node_tensor_parallel():
    sc = parse_scenario(scenario(**{"model.preset": "gpt3-175b", "cluster.n_gpus": 256, "layout": None,
                                    "training.seq_len": 2048}))
    assert (search_cluster(sc, 256).valid_layouts.tp <= 8).all()
    spanning = search_cluster(sc, 256, allow_span_nodes=True)
    assert (spanning.valid_layouts.tp == 16).any()


def test_cluster_size_search_for_a_deadline():
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-70b", "layout": None, "training.seq_len": 8192,
                                    "training.global_batch_size": 1024, "training.total_tokens": 2e12, "cluster.n_gpus": 1024}))
    tight = cluster_search(sc, deadline_days=20)
    loose = cluster_search(sc, deadline_days=120)
    assert tight.met and loose.met
    assert tight.best.wall_days <= 20 and loose.best.wall_days <= 120
    assert loose.n_gpus < tight.n_gpus and tight.n_gpus % 8 == 0        # whole 8-GPU nodes
    # the next smaller size the layouts allow misses the deadline or costs more, and the answer says which
    near = tight.neighbour
    assert tight.neighbour_gpus < tight.n_gpus
    assert near.wall_days > 20 and "misses the deadline" in tight.neighbour_why or (
        near.cost_usd > tight.best.cost_usd and "costs more" in tight.neighbour_why)
    smaller = search(parse_scenario({**sc.model_dump(), "cluster": {**sc.cluster.model_dump(),
                                                                    "n_gpus": tight.n_gpus - 8}}), top=1,
                     pareto_sizes=[]).best
    assert not smaller or smaller[0].wall_days > 20 or smaller[0].cost_usd >= tight.best.cost_usd
    impossible = cluster_search(sc, deadline_days=0.5)
    assert not impossible.met and "no cluster size meets" in impossible.reason
    budget = cluster_search(sc, deadline_days=20, gpu_hour_budget=1000)
    assert not budget.met


def test_node_counts_are_the_sizes_layouts_can_use():
    # Llama 3.1 70B (64 heads, 80 layers), batch 1,024, sequence 8,192 on 8-GPU nodes: tp, cp and dp are powers of
    # two, so a GPU count is a power of two times a pipeline depth of at most 80 stages: 7 nodes (56 = 7 x 8) and
    # 224 nodes (1,792 = 7 x 256) are sizes, 11 x 8 = 88 is too (pp=11), 1,800 GPUs (225 nodes: 9 x 25) is not
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-70b", "layout": None, "training.seq_len": 8192,
                                    "training.global_batch_size": 1024}))
    counts = node_counts(sc, 1 << 17)
    assert counts[:16] == (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    assert 224 in counts and 225 not in counts and 226 not in counts
    # no other count has a layout: every node count from 220 to 232 searched
    for nodes in range(220, 233):
        assert (best_at(sc, nodes * 8, quick=True) is not None) <= (nodes in counts), nodes


def test_pareto_front_is_non_dominated():
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-8b", "cluster.n_gpus": 64, "layout": None}))
    front = search(sc, top=1).pareto
    assert [p.n_gpus for p in front] == sorted(p.n_gpus for p in front)
    days = [p.wall_days for p in front]
    assert all(a > b for a, b in zip(days, days[1:]))          # more GPUs only where it is faster


def test_enumeration_covers_every_dimension():
    sc = parse_scenario(scenario(**{"model.preset": "mixtral-8x7b", "cluster.n_gpus": 16, "layout": None}))
    lay = enumerate_layouts(sc, 16)
    assert set(np.unique(lay.tp)) == {1, 2, 4, 8}                 # tp=16 would span two 8-GPU nodes
    assert set(np.unique(lay.ep)) == {1, 2, 4, 8}
    assert set(np.unique(lay.zero)) == {0, 1, 2, 3} and set(np.unique(lay.sp)) == {False, True}
    assert (lay.tp * lay.pp * lay.cp * lay.dp == 16).all()


def test_cli_search(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario(**{"layout.tp": 3})))      # the layout is ignored, even an impossible one
    out = subprocess.run([sys.executable, "-m", "engine", "search", str(f), "--top", "2", "--objective", "time"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert {"candidates_evaluated", "feasible", "best", "rejected"} <= set(res)
    assert len(res["best"]) == 2 and "layout" in res["best"][0] and "step_time_s" in res["best"][0]
    bad = subprocess.run([sys.executable, "-m", "engine", "search", str(f), "--deadline-days", "-3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--deadline-days" in bad.stderr


def test_cost_objective_without_a_price_says_why():
    from engine.scenario import ScenarioError
    sc = parse_scenario(scenario(**{"cluster.accelerator": "TPU-v5p", "cluster.n_gpus": 64, "layout": None}))
    with pytest.raises(ScenarioError) as info:
        search(sc, objective="cost", pareto_sizes=[])
    assert "cannot rank by cost" in str(info.value) and "TPU-v5p" in str(info.value)
    priced = parse_scenario(scenario(**{"cluster.n_gpus": 64, "layout": None}))
    by_cost = search(priced, objective="cost", top=3, pareto_sizes=[]).best
    assert [r.cost_usd for r in by_cost] == sorted(r.cost_usd for r in by_cost)


def test_an_absurdly_divisible_cluster_is_refused_with_a_reason():
    from engine.scenario import ScenarioError
    # 7,207,200 = 2^5 3^2 5^2 7 11 13 has 240 divisors: tens of millions of layouts
    sc = parse_scenario(scenario(**{"model.preset": "llama3.1-405b", "cluster.n_gpus": 7_207_200, "layout": None,
                                    "training.global_batch_size": 720_720}))
    with pytest.raises(ScenarioError) as info:
        search(sc, pareto_sizes=[])
    assert "over the search's limit" in str(info.value)
    # counted without the model, the refusal pages give before queueing for a work slot is the search's own
    from engine.planning.search import candidate_problems
    assert candidate_problems(sc) == info.value.problems
    ok = parse_scenario(scenario(**{"cluster.n_gpus": 64, "layout": None}))
    assert candidate_problems(ok) == []
