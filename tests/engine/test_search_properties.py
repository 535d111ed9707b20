"""Property tests over random valid scenarios: the search enumerates exactly the layouts the rules
(engine/physics/layout_rules.py) allow in its declared space, every returned layout obeys the rules and fits, and
the vectorised evaluation used by the search equals the single estimate exactly.

The scenarios cover uneven first/last pipeline stages (layer counts the stages do not divide), dense-then-MoE models
(leading dense layers, MoE every second layer), shared experts of their own width, multi-head latent attention,
HSDP shard groups and expert tensor parallelism."""
from itertools import product

import numpy as np
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

from engine.catalog import load_catalog
from engine.inputs import parse_scenario
from engine.physics import layout_rules
from engine.physics.layout_rules import divisors, split_choices
from engine.scenario import PRECISION_DTYPE, ScenarioError, rule_facts
from engine.physics.schedule import stage_layers
from engine.planning.search import (HSDP_GROWTH, MAX_MICRO_BATCH_TOKENS, MIN_TOKENS_PER_CP_RANK, enumerate_layouts,
                                    search, search_cluster)
from tests.engine.test_search import assert_same_estimate

COLUMNS = ("tp", "pp", "dp", "cp", "ep", "mbs", "v", "zero", "sp", "rc", "etp", "first", "last", "reshard", "shard",
           "tpo", "a2ao")


@st.composite
def scenarios(draw, gpus=None, max_layers=48):
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    mla = heads > 1 and draw(st.booleans())
    kv = heads if mla else draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if heads % d == 0]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    hidden = heads * head_dim
    width = lambda: draw(st.sampled_from([hidden * 2, hidden * 3, hidden * 4, hidden * 3 // 2, 1100]))
    moe = draw(st.booleans())
    experts = draw(st.sampled_from([2, 4, 8])) if moe else 1
    n_layers = draw(st.integers(1, max_layers))
    arch = {"n_layers": n_layers, "hidden_size": hidden, "n_heads": heads, "n_kv_heads": kv,
            "ffn_hidden_size": width(), "vocab_size": draw(st.integers(256, 200_000)),
            "ffn_type": draw(st.sampled_from(["gelu", "swiglu"])), "tied_embeddings": draw(st.booleans()),
            "n_experts": experts, "experts_per_token": draw(st.integers(1, experts))}
    if mla:
        arch["mla"] = {"q_lora_rank": draw(st.sampled_from([None, hidden // 2])), "kv_lora_rank": hidden // 4,
                       "qk_nope_head_dim": head_dim, "qk_rope_head_dim": 32, "v_head_dim": head_dim}
    if moe:
        arch |= {"n_dense_layers": draw(st.integers(0, min(3, n_layers - 1))),
                 "moe_layer_every": draw(st.sampled_from([1, 1, 2])), "n_shared_experts": draw(st.integers(0, 2))}
        if draw(st.booleans()):
            arch["dense_ffn_hidden_size"] = width()
        if arch["n_shared_experts"] and draw(st.booleans()):
            arch["shared_expert_ffn_hidden_size"] = width()
    # Apple workstations publish no peak, so no precision can run on them (their refusal is tested in test_vendor)
    acc = draw(st.sampled_from(sorted(a.id for a in load_catalog().accelerators.values()
                                      if any(a.peak(d) for d in PRECISION_DTYPE.values()))))
    precisions = [p for p, d in PRECISION_DTYPE.items() if load_catalog().accelerator(acc).peak(d)]
    gpn = load_catalog().accelerator(acc).gpus_per_node
    n = draw(st.sampled_from(gpus or [1, 2, 4] + [gpn * k for k in (1, 2, 4, 8)]))
    training = {"seq_len": draw(st.sampled_from([256, 1024, 2048, 4096, 8192])),
                "global_batch_size": draw(st.sampled_from([8, 16, 32, 48, 64, 128, 256, 512])),
                "total_tokens": draw(st.floats(1e9, 1e13)), "precision": draw(st.sampled_from(precisions)),
                "optimizer": draw(st.sampled_from(["adam", "sgd"])), "attention": draw(st.sampled_from(["flash", "standard"]))}
    try:
        return parse_scenario({"model": arch, "training": training, "cluster": {"accelerator": acc, "n_gpus": n}})
    except ScenarioError:             # e.g. an MoE model whose pattern leaves no layer with experts
        reject()


def _rows(lay) -> np.ndarray:
    return np.stack([np.asarray(getattr(lay, c), dtype=np.int64) for c in COLUMNS], axis=1).reshape(-1, len(COLUMNS))


def rule_space(sc, n: int, allow_span: bool) -> np.ndarray:
    """Every layout the rules allow within the search's declared space, built as the whole product of each
    dimension's candidates and then filtered by the rule table (the search filters dimension by dimension instead).
    The space: tp, cp, pp dividing the cluster (cp down to MIN_TOKENS_PER_CP_RANK tokens a rank, pp up to the
    number of layers, so a one-layer model is not piped as an embedding stage and a layer stage), tp within a node
    unless allowed to span; micro-batches dividing the batch up to MAX_MICRO_BATCH_TOKENS tokens; the pipeline splits
    of schedule.split_options with every interleaving degree; ep dividing the experts, expert TP none or tp; ZeRO
    0-3 over the whole data-parallel group, ZeRO-3 without resharding, and ZeRO-1/3 over HSDP groups of one node's
    data-parallel ranks times HSDP_GROWTH. Dominated choices are not in it: sequence parallelism is on wherever
    tp > 1, TP overlap wherever the stack has it (CUDA), selective recompute only with standard attention; the MoE
    all-to-all overlap is off (search.UNSEARCHED). Offload
    is enumerated only where nothing fits without it (tests/engine/test_finetune.py), so not in this space."""
    arch, tr = sc.arch, sc.training
    gpn = sc.gpus_per_node
    cuda = load_catalog().accelerator(sc.cluster.accelerator).software_stack == "CUDA"
    facts = rule_facts(sc, n)          # the scenario's stack's ZeRO stages included
    rcs = [0, 1, 2] if tr.attention == "standard" else [0, 2]
    out = [np.zeros((0, len(COLUMNS)), dtype=np.int64)]
    for t, c, p in product(divisors(n), repeat=3):
        if n % (t * c * p) or (c > 1 and tr.seq_len // c < MIN_TOKENS_PER_CP_RANK) or p > arch.n_layers:
            continue
        if not allow_span and (t > gpn or gpn % t):
            continue
        d = n // (t * c * p)
        mbs = [b for b in divisors(tr.global_batch_size) if b == 1 or b * (tr.seq_len // c) <= MAX_MICRO_BATCH_TOKENS]
        splits = [(f, l_, v) for f, l_ in split_choices(arch.n_layers, p) for v in range(1, arch.n_layers + 1)]
        experts = [(e, et) for e in divisors(arch.n_experts) for et in sorted({1, t})]
        per_node = max(1, gpn // t)
        groups = sorted({d * c} | {per_node * g for g in HSDP_GROWTH if 1 < per_node * g < d * c})
        zeros = [(z, r, g) for z in range(4) for r in (1, 0) for g in groups if g == d * c or (z in (1, 3) and r)]
        if not splits:                                      # no split for these stages: an empty product
            continue
        grid = np.array(np.meshgrid(np.arange(len(mbs)), np.arange(len(splits)), np.arange(len(experts)),
                                    np.arange(len(zeros)), rcs, indexing="ij")).reshape(5, -1)
        split, expert, zero = np.array(splits)[grid[1]], np.array(experts)[grid[2]], np.array(zeros)[grid[3]]
        cols = layout_rules.columns(tp=t, pp=p, dp=d, cp=c, ep=expert[:, 0], mbs=np.array(mbs)[grid[0]], v=split[:, 2],
                                    zero=zero[:, 0], sp=t > 1, rc=grid[4], etp=expert[:, 1], first=split[:, 0],
                                    last=split[:, 1], reshard=zero[:, 1], shard=zero[:, 2], tpo=cuda and t > 1, off=0,
                                    a2ao=False)
        out.append(_rows(cols)[layout_rules.allowed(facts, cols)])
    return np.concatenate(out)


def _fixed(model: dict, n_gpus: int, accelerator: str = "H100-SXM5-80GB", batch: int = 512):
    return parse_scenario({"model": model, "training": {"seq_len": 4096, "global_batch_size": batch,
                                                        "total_tokens": 1e10}, "cluster": {"accelerator": accelerator,
                                                                                            "n_gpus": n_gpus}})


# cases the random draw reaches only now and then: HSDP groups of 1, 2, 4 and 8 nodes (64 GPUs, one per rank);
# a dense-then-MoE model with a wide shared expert, expert TP and 30 layers on uneven stages; MLA on GB200
DENSE_64 = _fixed({"n_layers": 4, "hidden_size": 256, "n_heads": 4, "ffn_hidden_size": 1024, "vocab_size": 256}, 64)
MOE_16 = _fixed({"n_layers": 30, "hidden_size": 512, "n_heads": 8, "n_kv_heads": 2, "ffn_hidden_size": 384,
                 "vocab_size": 1000, "ffn_type": "swiglu", "n_experts": 8, "experts_per_token": 2,
                 "n_shared_experts": 1, "shared_expert_ffn_hidden_size": 1536, "n_dense_layers": 2,
                 "dense_ffn_hidden_size": 1100}, 16, batch=32)
MLA_16 = _fixed({"n_layers": 9, "hidden_size": 512, "n_heads": 8, "ffn_hidden_size": 1024, "vocab_size": 1000,
                 "n_experts": 4, "experts_per_token": 1, "moe_layer_every": 2,
                 "mla": {"q_lora_rank": None, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                         "v_head_dim": 64}}, 16, accelerator="GB200")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(gpus=(2, 8, 16, 32, 64), max_layers=24), st.booleans())
@example(DENSE_64, False)
@example(MOE_16, False)
@example(MOE_16, True)
@example(MLA_16, False)
def test_the_search_enumerates_exactly_the_layouts_the_rules_allow(sc, allow_span):
    n = sc.cluster.n_gpus
    lay = enumerate_layouts(sc, n, allow_span)
    got = _rows(lay)
    assert len(np.unique(got, axis=0)) == len(got)                        # no layout twice
    want = rule_space(sc, n, allow_span)
    assert np.array_equal(np.unique(got, axis=0), np.unique(want, axis=0))
    # and the scenario's own validation (one layout at a time) accepts what the search enumerates
    for i in np.random.default_rng(len(got)).choice(len(got), size=min(len(got), 5), replace=False):
        data = sc.model_dump(exclude_none=True) | {"layout": lay.layout(int(i)).model_dump()}
        parse_scenario(data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_returned_layouts_obey_rules_fit_and_match_the_single_estimate(sc, allow_span):
    n, arch, tr = sc.cluster.n_gpus, sc.arch, sc.training
    out = search(sc, top=5, allow_span_nodes=allow_span, pareto_sizes=[])
    assert out.feasible + sum(out.rejected.values()) == out.candidates_evaluated
    for r in out.best:
        lo = r.layout
        assert lo.tp * lo.pp * lo.dp * lo.cp == r.n_gpus == n
        assert arch.n_heads % lo.tp == 0 and arch.kv_heads % lo.tp == 0
        stage_layers(arch.n_layers, lo.pp, lo.virtual_stages, lo.first_stage_layers, lo.last_stage_layers)
        assert tr.global_batch_size % (lo.dp * lo.micro_batch_size) == 0
        etp = lo.expert_tp or lo.tp
        assert arch.n_experts % lo.ep == 0 and (lo.tp * lo.dp * lo.cp) % (lo.ep * etp) == 0
        assert tr.seq_len % lo.cp == 0
        assert r.fits and r.memory_gib.total <= r.memory_capacity_gib
        assert r.step_time_s > 0 and np.isfinite(r.train_days)
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
             "pipeline_imbalance", "dp_comm", "optimizer", "offload")   # offload: ZeRO-Offload's exposed host work
    timed = cs.feasible                 # the search times the fastest recompute choice of each layout that fits
    if not timed.any():
        return
    total = sum(cs.ev[p][timed] for p in parts)
    assert np.allclose(total, cs.ev["step_time_s"][timed], rtol=1e-9)
    assert (cs.ev["step_time_s"][timed] > 0).all()
    assert all((cs.ev[p][timed] >= -1e-12).all() for p in parts)
