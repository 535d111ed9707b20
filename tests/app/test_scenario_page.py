"""Scenario page: every input bound to the one scenario, the results next to it, and bad input flagged at the field
while the rest keeps working with the last valid scenario."""
import json

from benchmarks_db.calibration import calibrated_cluster
from engine.catalog import load_catalog
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.planning.estimate import estimate
from engine.inputs import parse_scenario
from engine.presentation.share import decode
from tests.app.conftest import button, metric, on_page, run_app, texts


def scenario_of(at):
    return at.session_state["scenario"]


def test_defaults_show_the_engine_estimate_and_the_url_carries_the_scenario():
    at = run_app()
    assert at.title[0].value == "Scenario"
    est = estimate(default_scenario())
    assert metric(at, "Step time") == f"{est.step_time_s:.2f} s"
    assert metric(at, "MFU") == f"{est.mfu * 100:.1f}%"
    assert metric(at, "Memory per GPU") == f"{est.memory_gib.total:.1f} GiB"
    assert decode(at.query_params["sc"]).scenario == default_scenario()
    assert not at.error


def test_every_input_has_help_text():
    at = run_app()
    widgets = [*at.number_input, *at.selectbox, *at.text_input, *at.radio, *at.checkbox]
    assert len(widgets) > 20
    assert all(w.help for w in widgets), [w.label for w in widgets if not w.help]


def test_a_fields_change_whose_widget_state_a_new_scenario_dropped_is_ignored_not_a_traceback():
    """In a whole-suite CI run, adopting the manager's answer dropped every widget's state (ui/state.commit) in the
    same round trip as the browser's last values of two fields; their change callbacks then read the dropped keys,
    raised KeyError, and the page stopped before 'The scenario is this answer'. A callback whose widget state is gone
    now applies nothing: the widget is re-seeded from the scenario that replaced it."""
    at = run_app()
    before = scenario_of(at)
    at.number_input(key="w:cluster.n_gpus").set_value(512)
    del at.session_state["w:cluster.n_gpus"]            # what commit() does to every widget on a new scenario
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert scenario_of(at) == before
    assert at.number_input(key="w:cluster.n_gpus").value == before.cluster.n_gpus     # re-seeded


def test_changing_the_cluster_size_updates_scenario_results_and_link():
    at = run_app()
    at.number_input(key="w:cluster.n_gpus").set_value(512).run()
    sc = scenario_of(at)
    assert (sc.cluster.n_gpus, sc.layout.dp) == (512, 16)          # tp 8 x pp 4 x dp 16
    expected = estimate(parse_scenario({**DEFAULT_SCENARIO, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 512},
                                        "layout": {**DEFAULT_SCENARIO["layout"], "dp": 16}}))
    assert metric(at, "Step time") == f"{expected.step_time_s:.2f} s"
    assert decode(at.query_params["sc"]).scenario == sc


def test_an_impossible_cluster_size_is_flagged_at_the_field_and_the_last_valid_scenario_stays():
    at = run_app()
    before = metric(at, "Step time")
    at.number_input(key="w:cluster.n_gpus").set_value(1000).run()
    assert not at.exception
    errors = texts(at.error)
    # the nearest sizes in whole nodes of 8 that have a layout: 128 nodes (1,024) and 120 nodes (960)
    assert any("over 1,000 accelerators" in e and "1,024 (128 nodes" in e and "960 (120 nodes" in e for e in errors), errors
    assert any("last valid scenario" in w and "Number of accelerators" in w for w in texts(at.warning))
    assert scenario_of(at).cluster.n_gpus == 1024
    assert metric(at, "Step time") == before
    assert decode(at.query_params["sc"]).scenario.cluster.n_gpus == 1024
    button(at, "Use 960").click().run()                                  # a suggestion is one click
    assert not at.error and not at.warning
    assert scenario_of(at).cluster.n_gpus == 960
    at.number_input(key="w:cluster.n_gpus").set_value(2048).run()
    assert not at.error
    assert scenario_of(at).cluster.n_gpus == 2048


def test_a_refused_value_can_be_undone_and_the_field_shows_the_scenarios_value_again():
    at = run_app()
    at.number_input(key="w:training.seq_len").set_value(0).run()
    assert at.number_input(key="w:training.seq_len").value == 0         # what was typed stays, flagged
    assert any("last valid scenario" in w for w in texts(at.warning))
    button(at, "Undo the refused value").click().run()
    assert not at.error and not at.warning
    assert at.number_input(key="w:training.seq_len").value == 8192


def test_out_of_range_and_unknown_values_get_the_validators_message():
    at = run_app()
    at.number_input(key="w:training.seq_len").set_value(0).run()
    # under the row of fields, at the section's width, named by the field's label
    assert "**Sequence length (tokens)**: Input should be greater than or equal to 1" in texts(at.error)
    assert "Atlantis" not in at.selectbox(key="w:site.region").options      # regions are picked from the grid data
    assert scenario_of(at).training.seq_len == 8192 and scenario_of(at).site is None


def test_picking_a_preset_takes_its_published_training_setup_and_finds_a_layout_that_works():
    at = run_app()
    at.selectbox(key="w:model.preset").set_value("llama3.1-8b").run()
    sc = scenario_of(at)
    defaults = load_catalog().models["llama3.1-8b"].training_defaults
    assert (sc.training.seq_len, sc.training.global_batch_size, sc.training.total_tokens) == \
        (defaults.seq_len, defaults.global_batch_size, defaults.total_tokens)
    assert at.number_input(key="w:training.global_batch_size").value == defaults.global_batch_size
    notes = texts(at.info)
    assert any("published one" in n for n in notes) and any("no longer works" in n for n in notes), notes
    assert estimate(sc).fits                                        # the repaired layout is a real, fitting one


def test_a_custom_architecture_is_edited_field_by_field_and_validated():
    at = run_app()
    at.radio(key="w:model").set_value("custom").run()
    assert at.number_input(key="w:model.n_layers").value == 80      # a copy of Llama 3.1 70B
    at.number_input(key="w:model.n_heads").set_value(60).run()
    assert any("not divisible by n_heads" in e for e in texts(at.error)), texts(at.error)
    at.number_input(key="w:model.n_layers").set_value(40).run()     # 40 layers: pp 4 x 5 virtual stages no longer fit
    sc = scenario_of(at)
    assert sc.arch.n_layers == 40 and sc.arch.n_heads == 64
    assert sc.layout is not None and 40 % (sc.layout.pp * sc.layout.virtual_stages) == 0


def test_switching_accelerator_without_bf16_falls_back_to_fp16():
    at = run_app()
    at.selectbox(key="w:cluster.accelerator").set_value("V100-SXM2-32GB").run()
    assert scenario_of(at).training.precision == "fp16"
    assert at.selectbox(key="w:training.precision").value == "fp16"
    assert any("precision set to fp16" in n for n in texts(at.info))


def test_cost_inputs_reach_the_estimate():
    at = run_app()
    at.number_input(key="w:cost.price_usd_per_gpu_hour").set_value(2.0).run()
    sc = scenario_of(at)
    assert sc.cost.price_usd_per_gpu_hour == 2.0
    assert metric(at, "Cost") == "$" + f"{estimate(sc).cost_usd / 1e6:.3g}M"
    at.selectbox(key="w:cost.provider").set_value("aws").run()
    assert scenario_of(at).cost.provider == "aws"
    at.selectbox(key="w:cost.provider").set_value("cheapest of all").run()
    assert scenario_of(at).cost.provider is None


def test_calibrated_efficiencies_come_from_the_store_and_name_their_runs(app_store):
    sc = default_scenario()
    expected = calibrated_cluster(app_store, sc.cluster.accelerator, "bf16", sc.cluster.n_gpus, 8)
    assert expected["overrides"], "the seeded store has a published H100 matmul measurement"
    at = run_app()
    at.radio(key="w:efficiency_source").set_value("calibrated").run()
    cluster = scenario_of(at).cluster
    assert {f: getattr(cluster, f) for f in expected["overrides"]} == expected["overrides"]
    captions = texts(at.caption)
    assert any(run in c for c in captions for run in expected["evidence"]["matmul_efficiency"]["runs"])
    at.radio(key="w:efficiency_source").set_value("datasheet").run()
    assert scenario_of(at).cluster.matmul_efficiency is None


def test_a_scenario_file_replaces_the_scenario_and_a_bad_one_changes_nothing():
    at = run_app()
    good = {"model": {"preset": "llama2-7b"},
            "training": {"seq_len": 4096, "global_batch_size": 256, "total_tokens": 2e12},
            "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": 64}}
    at.file_uploader(key="scenario_upload").set_value(("plan.json", json.dumps(good).encode(), "application/json"))
    at.run()
    sc = scenario_of(at)
    assert (sc.model.preset, sc.cluster.n_gpus) == ("llama2-7b", 64) and sc.layout is not None
    assert any("Loaded the scenario from plan.json" in n for n in texts(at.info))
    for name, data in (("broken.json", b"{not json"), ("wrong.json", b'{"model": {"preset": "gpt-9"}}'),
                       ("huge.json", b" " * 1_100_000), ("binary.json", b"\xff\xfe\x00\x01")):
        at.file_uploader(key="scenario_upload").set_value((name, data, "application/json"))
        at.run()
        assert not at.exception
        assert any(name in e for e in texts(at.error)), (name, texts(at.error))
        assert scenario_of(at) == sc


def test_reset_returns_to_the_defaults():
    at = run_app()
    at.number_input(key="w:cluster.n_gpus").set_value(512).run()
    button(at, "Reset to the default scenario").click().run()
    assert scenario_of(at) == default_scenario()


HF_CONFIGS = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def test_a_hugging_face_config_fills_my_own_architecture():
    at = run_app()
    at.radio(key="w:model").set_value("custom").run()
    data = (HF_CONFIGS / "qwen3-32b.json").read_bytes()
    at.file_uploader(key="hf_config_upload").set_value(("config.json", data, "application/json"))
    at.run()
    assert not at.exception
    arch = scenario_of(at).arch
    assert (arch.n_layers, arch.hidden_size, arch.head_dim, arch.qk_norm) == (64, 5120, 128, "head")   # Qwen3-32B
    assert at.number_input(key="w:model.head_dim").value == 128
    assert any("imported from config.json" in n for n in texts(at.info))
    assert any("32.8 billion parameters" in c for c in texts(at.caption)), texts(at.caption)


def test_a_pasted_config_with_a_missing_key_names_it_and_changes_nothing():
    at = run_app()
    at.radio(key="w:model").set_value("custom").run()
    before = scenario_of(at)
    cfg = json.loads((HF_CONFIGS / "mixtral-8x22b-instruct-v0.1.json").read_text())
    del cfg["num_local_experts"]
    at.text_area(key="hf_config_text").set_value(json.dumps(cfg)).run()
    button(at, "Import the pasted config.json").click().run()
    errors = texts(at.error)
    assert any("num_local_experts" in e and "Mixtral" in e for e in errors), errors
    assert len([e for e in errors if "config.json" in e]) <= 2                 # one heading, one named problem
    assert scenario_of(at) == before
    at.text_area(key="hf_config_text").set_value('{"model_type": "bert"}').run()
    button(at, "Import the pasted config.json").click().run()
    assert any("unknown architecture 'bert'" in e for e in texts(at.error))


def test_the_site_region_is_a_searchable_list_of_named_places():
    at = run_app()
    labels = at.selectbox(key="w:site.region").options                        # what the list shows (and search matches)
    assert "France (FRA)" in labels and "aws us-east-1: US East (N. Virginia)" in labels
    assert "gcp europe-west4: Eemshaven, Netherlands" in labels and "US Virginia (US-VA)" in labels
    at.selectbox(key="w:site.region").set_value("FRA").run()
    assert scenario_of(at).site.region == "FRA"
    est = estimate(scenario_of(at))
    assert est.energy["grid"]["where"] == "France"
    at.selectbox(key="w:site.region").set_value("world average").run()
    assert scenario_of(at).site is None or scenario_of(at).site.region is None


def test_a_stored_lowercase_region_code_still_opens():
    data = json.loads(json.dumps(DEFAULT_SCENARIO))
    data["site"] = {"region": "gcp:europe-west4"}
    sc = parse_scenario(data)
    assert sc.site.region == "gcp:europe-west4"


def test_the_models_published_gpu_hours_are_shown_beside_the_estimate():
    at = run_app()
    assert any(t.startswith("Published (Meta Llama 3.1 model card, 2024-07): 7M GPU-hours") for t in texts(at.info))


def test_numbers_show_as_the_engine_uses_them():
    """0.5 billion tokens shows 0.5 (the "%.0f" it had showed 1 while the engine used 0.5B); every number field shows
    all the digits of the value the engine uses, in the field's unit."""
    at = run_app()
    at.number_input(key="w:training.total_tokens").set_value(0.5).run()
    assert scenario_of(at).training.total_tokens == 5e8
    tokens = at.number_input(key="w:training.total_tokens")
    assert (tokens.value, tokens.proto.format) == (0.5, "%g")
    at.number_input(key="w:site.pue").set_value(1.125).run()
    at.number_input(key="w:cost.on_prem.power_usd_per_kwh").set_value(0.0825).run()   # "%0.2f" showed 1.13 and 0.08
    assert (scenario_of(at).site.pue, scenario_of(at).cost.on_prem.power_usd_per_kwh) == (1.125, 0.0825)
    on_page(at, "memory")
    at.number_input(key="w:training.memory_headroom_fraction").set_value(7.0).run()
    assert scenario_of(at).training.memory_headroom_fraction == 0.07
    assert at.number_input(key="w:training.memory_headroom_fraction").value == 7.0   # not 7.000000000000001
    for page in ("scenario", "memory", "cost_carbon", "layout_search"):
        on_page(at, page)
        rounded = [f.label for f in at.number_input if f.proto.format not in ("%g", "%d")
                   or (f.proto.format == "%d" and f.proto.data_type != f.proto.INT)]
        assert not rounded, (page, rounded)


def test_a_preset_switch_asks_before_replacing_a_batch_and_tokens_set_by_hand():
    at = run_app()
    at.number_input(key="w:training.global_batch_size").set_value(2048).run()
    at.number_input(key="w:training.total_tokens").set_value(0.5).run()
    at.selectbox(key="w:model.preset").set_value("llama3.1-8b").run()
    assert scenario_of(at).model.preset == "llama3.1-70b"                 # nothing replaced until the user says
    question = next(w for w in texts(at.warning) if w.startswith("You set"))
    assert "the global batch to 2,048 sequences (published: 1,024 sequences) and the training tokens" in question
    assert "training tokens to 500M tokens (published: 15.6T tokens)" in question and "Llama 3.1 8B" in question
    button(at, "Keep mine").click().run()
    sc = scenario_of(at)
    assert (sc.model.preset, sc.training.global_batch_size, sc.training.total_tokens) == ("llama3.1-8b", 2048, 5e8)
    assert at.number_input(key="w:training.total_tokens").value == 0.5
    assert any(n.startswith("Kept your global batch (2,048 sequences) and training tokens") for n in texts(at.info))
    assert estimate(sc).fits
    # the other way: the 8B's published setup replaces the hand-set batch and tokens
    at.selectbox(key="w:model.preset").set_value("llama3.1-70b").run()
    button(at, "Use Llama 3.1 70B's").click().run()
    sc, published = scenario_of(at), load_catalog().models["llama3.1-70b"].training_defaults
    assert (sc.model.preset, sc.training.global_batch_size, sc.training.total_tokens) == \
        ("llama3.1-70b", published.global_batch_size, published.total_tokens)
    assert not any(w.startswith("You set") for w in texts(at.warning))


def test_a_moe_model_takes_the_busiest_experts_load_and_a_dense_one_drops_it():
    at = run_app()
    assert not [w for w in at.number_input if w.key == "w:training.expert_load_ratio"]     # dense default model
    at.selectbox(key="w:model.preset").set_value("mixtral-8x7b").run()
    before = estimate(scenario_of(at))
    at.number_input(key="w:training.expert_load_ratio").set_value(1.5).run()
    sc = scenario_of(at)
    assert sc.training.expert_load_ratio == 1.5 and not at.error
    assert estimate(sc).step_time_s > before.step_time_s          # every rank waits for the busiest expert's
    at.number_input(key="w:training.expert_load_ratio").set_value(9.0).run()   # 8 experts, 2 per token: at most 4
    assert any("exceeds 4" in t for t in texts(at.error)) and scenario_of(at).training.expert_load_ratio == 1.5
    at.number_input(key="w:training.expert_load_ratio").set_value(1.5).run()
    at.selectbox(key="w:model.preset").set_value("llama3.1-8b").run()
    assert scenario_of(at).training.expert_load_ratio == 1.0
    assert any("Busiest expert's load reset to 1" in n for n in texts(at.info))


def test_a_pytorch_stack_offers_torch_compile_and_eager_costs_time():
    at = run_app()
    assert not [w for w in at.selectbox if w.key == "w:training.torch_compile"]     # Megatron-Core: fused by itself
    at.selectbox(key="w:training.framework").set_value("pytorch_fsdp2").run()
    compiled = estimate(scenario_of(at))
    field = at.selectbox(key="w:training.torch_compile")
    assert field.value == "compiled (as measured)" and field.help
    field.set_value(False).run()
    sc = scenario_of(at)
    assert sc.training.torch_compile is False and not at.error
    assert estimate(sc).step_time_s > compiled.step_time_s
    assert metric(at, "Step time") == f"{estimate(sc).step_time_s:.2f} s"
    at.selectbox(key="w:training.framework").set_value("megatron_core").run()
    assert scenario_of(at).training.torch_compile is None
    assert not [w for w in at.selectbox if w.key == "w:training.torch_compile"]
    assert any("torch.compile setting cleared" in n for n in texts(at.info))
