"""Property tests over random valid scenarios: every returned layout obeys the rules and fits, and the
vectorised evaluation used by the search equals the single estimate exactly."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.catalog import load_catalog
from engine.scenario import PRECISION_DTYPE
from engine.inputs import parse_scenario
from engine.physics.schedule import stage_layers
from engine.planning.search import search, search_cluster
from tests.engine.test_search import assert_same_estimate


@st.composite
def scenarios(draw):
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    kv = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if heads % d == 0]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    hidden = heads * head_dim
    moe = draw(st.booleans())
    experts = draw(st.sampled_from([2, 4, 8])) if moe else 1
    arch = {"n_layers": draw(st.integers(1, 48)), "hidden_size": hidden, "n_heads": heads, "n_kv_heads": kv,
            "ffn_hidden_size": hidden * draw(st.sampled_from([2, 3, 4])), "vocab_size": draw(st.integers(256, 200_000)),
            "ffn_type": draw(st.sampled_from(["gelu", "swiglu"])), "tied_embeddings": draw(st.booleans()),
            "n_experts": experts, "experts_per_token": draw(st.integers(1, experts))}
    # Apple workstations publish no peak, so no precision can run on them (their refusal is tested in test_vendor)
    acc = draw(st.sampled_from(sorted(a.id for a in load_catalog().accelerators.values()
                                      if any(a.peak(d) for d in PRECISION_DTYPE.values()))))
    precisions = [p for p, d in PRECISION_DTYPE.items() if load_catalog().accelerator(acc).peak(d)]
    gpn = load_catalog().accelerator(acc).gpus_per_node
    n = draw(st.sampled_from([1, 2, 4] + [gpn * k for k in (1, 2, 4, 8)]))
    training = {"seq_len": draw(st.sampled_from([256, 1024, 2048, 4096, 8192])),
                "global_batch_size": draw(st.sampled_from([8, 16, 32, 48, 64, 128, 256, 512])),
                "total_tokens": draw(st.floats(1e9, 1e13)), "precision": draw(st.sampled_from(precisions)),
                "optimizer": draw(st.sampled_from(["adam", "sgd"])), "attention": draw(st.sampled_from(["flash", "standard"]))}
    return parse_scenario({"model": arch, "training": training, "cluster": {"accelerator": acc, "n_gpus": n}})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_returned_layouts_obey_rules_fit_and_match_the_single_estimate(sc, allow_span):
    n, arch, tr = sc.cluster.n_gpus, sc.arch, sc.training
    out = search(sc, top=5, allow_span_nodes=allow_span, pareto_sizes=[])
    assert out["feasible"] + sum(out["rejected"].values()) == out["candidates_evaluated"]
    for r in out["best"]:
        lo = r["layout"]
        assert lo["tp"] * lo["pp"] * lo["dp"] * lo["cp"] == n
        assert arch.n_heads % lo["tp"] == 0 and arch.kv_heads % lo["tp"] == 0
        stage_layers(arch.n_layers, lo["pp"], lo["virtual_stages"], lo["first_stage_layers"], lo["last_stage_layers"])
        assert tr.global_batch_size % (lo["dp"] * lo["micro_batch_size"]) == 0
        etp = lo["expert_tp"] or lo["tp"]
        assert arch.n_experts % lo["ep"] == 0 and (lo["tp"] * lo["dp"] * lo["cp"]) % (lo["ep"] * etp) == 0
        assert tr.seq_len % lo["cp"] == 0
        assert r["fits"] and r["memory_gib"]["total"] <= r["memory_capacity_gib"]
        assert r["step_time_s"] > 0 and np.isfinite(r["train_days"])
        assert_same_estimate(sc, r)
    if not allow_span:
        cs = search_cluster(sc, n)
        g = cs.ctx.hw.gpus_per_node
        assert ((cs.layouts.tp <= g) & (g % cs.layouts.tp == 0)).all()      # tensor parallelism stays in a node


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_time_breakdown_sums_to_step_time(sc):
    cs = search_cluster(sc, sc.cluster.n_gpus)
    if not len(cs.valid):
        return
    parts = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm", "pp_comm", "pipeline_bubble",
             "pipeline_imbalance", "dp_comm", "optimizer")
    timed = cs.feasible                 # the search times the fastest recompute choice of each layout that fits
    if not timed.any():
        return
    total = sum(cs.ev[p][timed] for p in parts)
    assert np.allclose(total, cs.ev["step_time_s"][timed], rtol=1e-9)
    assert (cs.ev["step_time_s"][timed] > 0).all()
    assert all((cs.ev[p][timed] >= -1e-12).all() for p in parts)
