"""Memory page: the per-GPU memory by component against capacity, and what-if controls that change the scenario's
layout at once."""
import json

from engine.presentation.edit import apply_edit, default_scenario
from engine.planning.estimate import estimate
from engine.presentation.tables import MEMORY_PARTS, WORST_STAGE
from engine.presentation.share import decode
from tests.app.conftest import metric, on_page, run_app, texts


def memory_page():
    return on_page(run_app(), "memory")


def chart(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def test_the_chart_stacks_the_engines_components_against_the_capacity_line():
    at = memory_page()
    est = estimate(default_scenario())
    fig = chart(at)
    bars = {t["name"]: t for t in fig["data"] if t["type"] == "bar"}
    assert list(bars) == list(MEMORY_PARTS.values())
    for key, label in MEMORY_PARTS.items():
        assert bars[label]["x"][0] == "this layout"
        assert abs(bars[label]["y"][0] - getattr(est.memory_gib, key)) < 1e-9
    capacity = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert capacity and capacity[0]["y0"] == est.memory_capacity_gib
    assert any(WORST_STAGE[est.worst_stage] in m.value for m in at.markdown)
    assert "ZeRO-3" in bars["Weights"]["x"] and "recompute full" in bars["Weights"]["x"]


def test_the_comparison_bars_are_the_same_layout_with_another_zero_stage():
    at = memory_page()
    zero3 = estimate(apply_edit(default_scenario(), "layout.zero_stage", 3).scenario)
    bars = {t["name"]: t for t in chart(at)["data"] if t["type"] == "bar"}
    i = bars["Optimizer states"]["x"].index("ZeRO-3")
    assert abs(bars["Optimizer states"]["y"][i] - zero3.memory_gib.optimizer_states) < 1e-9


def test_a_what_if_changes_the_layout_the_figures_and_the_link():
    at = memory_page()
    at.selectbox(key="w:layout.tp").set_value(4).run()
    sc = at.session_state["scenario"]
    assert (sc.layout.tp, sc.layout.pp, sc.layout.dp) == (4, 4, 64)
    assert metric(at, "Data parallel (DP)") == "64"
    assert metric(at, "Step time") == f"{estimate(sc).step_time_s:.2f} s"
    assert decode(at.query_params["sc"]).scenario.layout.tp == 4
    at.select_slider(key="w:layout.zero_stage").set_value(3).run()
    at.selectbox(key="w:layout.recompute").set_value("full").run()
    sc = at.session_state["scenario"]
    assert (sc.layout.zero_stage, sc.layout.recompute) == (3, "full")
    bars = {t["name"]: t for t in chart(at)["data"] if t["type"] == "bar"}
    assert abs(bars["Activations"]["y"][0] - estimate(sc).memory_gib.activations) < 1e-9


def test_a_layout_that_breaks_a_rule_is_flagged_and_the_chart_keeps_the_last_valid_one():
    at = memory_page()
    at.selectbox(key="w:layout.micro_batch_size").set_value(32).run()      # dp 32 x 32 = 1024 divides the batch
    assert at.session_state["scenario"].layout.micro_batch_size == 32
    at.selectbox(key="w:layout.tp").set_value(2).run()                      # dp 128 x mbs 32 > global batch 1024
    assert not at.exception
    assert any("global_batch_size=1024 is not divisible" in e for e in texts(at.error)), texts(at.error)
    assert at.session_state["scenario"].layout.tp == 8
    assert at.get("plotly_chart")


def test_a_layout_that_does_not_fit_says_so():
    at = memory_page()
    for key, value in (("w:layout.tp", 1), ("w:layout.pp", 1), ("w:layout.recompute", "none")):
        at.selectbox(key=key).set_value(value).run()
    at.select_slider(key="w:layout.zero_stage").set_value(0).run()
    sc = at.session_state["scenario"]
    assert not estimate(sc).fits
    assert any("Does not fit" in e for e in texts(at.error))


def test_the_optional_layout_settings_appear_where_they_apply_and_change_the_scenario():
    at = memory_page()
    assert not [t for t in at.toggle if t.key == "w:layout.reshard_after_forward"]      # ZeRO-1: does not apply
    at.selectbox(key="w:layout.shard_group").set_value(8).run()
    assert at.session_state["scenario"].layout.shard_group == 8
    assert any("sharded in groups of 8 (HSDP)" in c for c in texts(at.sidebar.caption))
    at.toggle(key="w:layout.tp_comm_overlap").set_value(True).run()
    assert at.session_state["scenario"].layout.tp_comm_overlap
    # 19 + 21 + 21 + 19 = 80 layers, but 5 chunks do not split 21 layers: with 5 virtual stages only the even split
    # is offered (so no split choice), without interleaving the uneven one too
    assert not [s for s in at.selectbox if s.key == "w:layout.stage_split"]
    at.selectbox(key="w:layout.virtual_stages").set_value(1).run()
    assert at.selectbox(key="w:layout.stage_split").options == ["even", "19 first, 19 last"]
    at.selectbox(key="w:layout.stage_split").set_value((19, 19)).run()
    lay = at.session_state["scenario"].layout
    assert (lay.first_stage_layers, lay.last_stage_layers) == (19, 19)
    at.select_slider(key="w:layout.zero_stage").set_value(3).run()
    kept_before = estimate(at.session_state["scenario"]).memory_gib.total
    at.toggle(key="w:layout.reshard_after_forward").set_value(False).run()
    sc = at.session_state["scenario"]
    assert sc.layout.reshard_after_forward is False
    assert estimate(sc).memory_gib.total > kept_before               # gathered weights stay in memory
    at.select_slider(key="w:layout.zero_stage").set_value(1).run()          # keeping weights applies to ZeRO-3 only
    assert at.session_state["scenario"].layout.reshard_after_forward is True
    assert any("Gathered weights are freed" in n for n in texts(at.info))


def test_the_memory_kept_free_is_an_input_and_a_layout_inside_it_is_warned_about():
    at = memory_page()
    est = estimate(default_scenario())
    fig = chart(at)
    dotted = [s for s in fig["layout"]["shapes"] if s["type"] == "line" and s["line"].get("dash") == "dot"]
    assert dotted and abs(dotted[0]["y0"] - 0.935 * est.memory_capacity_gib) < 1e-9      # 6.5% by default
    assert not at.warning
    at.selectbox(key="w:training.accumulate_grads_in_fp32").set_value(True).run()
    sc = at.session_state["scenario"]
    assert sc.training.accumulate_grads_in_fp32 is True
    bars = {t["name"]: t for t in chart(at)["data"] if t["type"] == "bar"}
    assert abs(bars["Gradients"]["y"][0] - 2 * est.memory_gib.gradients) < 2e-3          # 4 bytes, not 2
    rows = [r for r in at.table[0].value.to_dict("records") if r["component"] == "Gradients"]
    assert "4-byte gradients (fp32 accumulation and reduction)" in rows[0]["what it is"]
    fp32 = estimate(sc)                                         # 41.2 of 79.65 GiB: inside a 50% headroom
    at.number_input(key="w:training.memory_headroom_fraction").set_value(50.0).run()
    sc = at.session_state["scenario"]
    assert sc.training.memory_headroom_fraction == 0.5
    assert any(f"uses {fp32.memory_gib.total:.1f} of {fp32.memory_capacity_gib:.1f} GiB" in w
               and "50.0% headroom" in w for w in texts(at.warning)), texts(at.warning)
    assert decode(at.query_params["sc"]).scenario.training.memory_headroom_fraction == 0.5


def test_the_all_to_all_overlap_is_offered_for_megatron_core_moe_layouts_and_speeds_the_step():
    # NeMo's Qwen3-235B-A22B layout on 256 H100 (tp2 pp8 vp4 ep32): Megatron-Core can pair two micro-batches' chunks
    from engine.inputs import parse_scenario
    from engine.presentation.share import encode
    from tests.engine.published_runs import nemo_25_11
    run = next(r for r in nemo_25_11() if r.name == "H100 Qwen3_235B_a22B FP8-CS 256")
    lay = next(x for x in run.layouts if x["recompute"] == "none" and x.get("first_stage_layers") is not None)
    sc = parse_scenario({**run.scenario, "layout": {**lay, "moe_a2a_overlap": False}})
    at = on_page(run_app({"sc": encode(sc)}), "memory")
    exposed = estimate(at.session_state["scenario"]).step_time_s
    at.toggle(key="w:layout.moe_a2a_overlap").set_value(True).run()
    overlapped = at.session_state["scenario"]
    assert overlapped.layout.moe_a2a_overlap and estimate(overlapped).step_time_s < 0.8 * exposed
    assert any("all-to-all overlap" in c for c in texts(at.sidebar.caption))
    at.selectbox(key="w:layout.virtual_stages").set_value(1).run()       # plain 1F1B: no pairing, the overlap goes
    assert not at.session_state["scenario"].layout.moe_a2a_overlap
    assert not [t for t in at.toggle if t.key == "w:layout.moe_a2a_overlap"]
