"""Fine-tuning on the pages: the job choice (pre-training, full fine-tune, LoRA, QLoRA) with its fields shown only
where they apply, the engine's warnings for the job, the Memory page's trainable, frozen and offloaded parts, what
would make a job fit that fits nowhere, and the manager's answer for a LoRA job."""
import json
import math

from engine.inputs import parse_scenario
from engine.planning.alternatives import fitting_alternatives
from engine.planning.estimate import estimate
from engine.planning.plan import plan
from engine.presentation.answer import headline
from engine.presentation.edit import DEFAULT_SCENARIO, with_layout
from engine.presentation.share import PlannerOptions, decode, encode
from engine.presentation.formatting import fmt_days
from engine.presentation.tables import fit_option_text, offered_fit_options
from ui.fields import plain
from ui import background
from ui.answer import planning_scenario
from tests.app.conftest import metric, on_page, run_app, texts

# Llama 3.1 70B, a 0.5-billion-token dataset, one node of 8 H100 80GB
TRAINING = {**DEFAULT_SCENARIO["training"], "total_tokens": 0.5e9}
LORA = with_layout(parse_scenario({"model": DEFAULT_SCENARIO["model"], "training": {**TRAINING, "method": "lora"},
                                   "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}})).scenario
# LoRA's adapters on the four attention projections of 80 layers (hidden 8,192, 8 KV heads of 128):
# 80 x 16 x ((8192 + 8192) + 2 x (8192 + 1024) + (8192 + 8192)) = 65,536,000 (Hu et al. 2021: r x (d_in + d_out))
LORA_PARAMS = 80 * 16 * ((8192 + 8192) + 2 * (8192 + 1024) + (8192 + 8192))
TOKEN_WARNING = "parameters: compute-optimal training uses about 20 tokens per parameter"


def with_training(sc, **training):
    return sc.model_copy(update={"training": sc.training.model_copy(update=training)})


def test_the_job_choice_changes_the_estimate_and_its_fields_show_only_where_they_apply():
    full = with_training(LORA, method="full")           # LoRA's layout, every weight trained
    assert not estimate(full).fits and estimate(LORA).fits
    at = run_app({"sc": encode(full)})
    keys = lambda: {w.key for w in at.number_input} | {w.key for w in at.selectbox}
    assert "w:training.epochs" in keys() and "w:training.lora_rank" not in keys()
    assert any(e.startswith("Does not fit: " + f"{estimate(full).memory_gib.total:.1f} GiB") for e in texts(at.error))

    at.radio(key="w:training.method").set_value("lora").run()
    assert not at.exception
    assert at.session_state["scenario"] == LORA
    assert metric(at, "Memory per GPU") == f"{estimate(LORA).memory_gib.total:.1f} GiB"
    assert any(s.startswith("Fits: ") for s in texts(at.success))
    assert {"w:training.lora_rank", "w:training.lora_targets", "w:training.epochs"} <= keys()

    at.number_input(key="w:training.lora_rank").set_value(64).run()
    at.selectbox(key="w:training.lora_targets").set_value("all_linear").run()
    shared = decode(at.query_params["sc"]).scenario                    # the link carries the new fields
    assert (shared.training.method, shared.training.lora_rank, shared.training.lora_targets) == ("lora", 64,
                                                                                                  "all_linear")
    assert shared == at.session_state["scenario"]

    at.radio(key="w:training.method").set_value("pretrain").run()
    assert "w:training.epochs" not in keys() and "w:training.lora_rank" not in keys()


def test_a_small_fine_tune_gets_no_pre_training_token_warning():
    pretrain = with_training(LORA, method="pretrain")
    at = run_app({"sc": encode(pretrain)})
    assert any(TOKEN_WARNING in w for w in texts(at.warning))            # 0.5B tokens for a 70.6B model
    at = run_app({"sc": encode(LORA)})
    assert not any(TOKEN_WARNING in w for w in texts(at.warning))
    assert texts(at.warning) == (estimate(LORA).warnings or [])        # the engine's warnings, no others


def test_the_memory_page_shows_trainable_frozen_and_what_offload_moves():
    at = on_page(run_app({"sc": encode(LORA)}), "memory")
    rows = {r["part"]: r for r in at.table[-1].value.to_dict("records")}
    assert rows["Trainable parameters"]["amount"] == "65.5M" and LORA_PARAMS == 65_536_000
    assert rows["Frozen parameters"]["amount"] == "70.6B"
    assert rows["Offloaded to CPU memory"]["amount"] == "0.0 GB per GPU"
    parts = {r["component"]: r["what it is"] for r in at.table[0].value.to_dict("records")}
    assert parts["Gradients"].startswith("one gradient per trainable parameter (the LoRA adapters only")

    at.selectbox(key="w:layout.offload").set_value("optimizer").run()
    assert not at.exception
    sc = at.session_state["scenario"]
    assert sc.layout.offload == "optimizer"
    est = estimate(sc)
    rows = {r["part"]: r for r in at.table[-1].value.to_dict("records")}
    offloaded_gb = est.fine_tuning["host_offloaded_gb_per_gpu"]
    assert rows["Offloaded to CPU memory"]["amount"] == f"{offloaded_gb:,.1f} GB per GPU"
    assert est.fine_tuning["host_offloaded_gb_per_gpu"] > 0
    assert rows["CPU memory available"]["amount"] == f"{est.fine_tuning['host_memory_gb_per_gpu']:,.0f} GB per GPU"
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]
    assert bars[0] == "this layout" and "no offload" in bars             # the variant without offload beside it
    at = on_page(at, "scenario")                                         # the layout's line names the offload
    assert any(m.startswith("**Layout:**") and "recompute none, optimizer offloaded to CPU." in m
               for m in texts(at.markdown))


def test_nothing_fits_shows_the_engines_fitting_options_with_their_figures():
    # Llama 2 13B, full fine-tune, on 2 x A100 40GB in a server with 16 GB of CPU memory per GPU: no offload room
    sc = parse_scenario({"model": {"preset": "llama2-13b"},
                         "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 0.5e9,
                                      "method": "full"},
                         "cluster": {"accelerator": "A100-SXM4-40GB", "n_gpus": 2, "host_memory_gb_per_gpu": 16},
                         "layout": {"tp": 2, "dp": 1, "zero_stage": 3, "micro_batch_size": 1}})
    at = run_app({"sc": encode(sc)})
    assert any(e.startswith("Does not fit") for e in texts(at.error))
    expected = offered_fit_options(fitting_alternatives(sc))
    assert {o.option for o in expected if o.fits} >= {"lora", "qlora", "offload"}
    listed = next(m for m in texts(at.markdown) if m.startswith("**What would make it fit**")).split("\n")[1:]
    assert listed == [f"- {plain(fit_option_text(o))}" for o in expected]
    lora = next(o for o in expected if o.option == "lora")
    assert listed[0].startswith(f"- LoRA: train LoRA adapters (rank 16, attention) on the frozen 16-bit model: "
                                f"2 GPUs, {lora.memory_gib:.1f} GiB per GPU, {fmt_days(lora.wall_days)}")
    offload = next(o for o in expected if o.option == "offload")
    assert offload.host_memory_gb_per_gpu > 16                           # it needs a larger host than this one

    next(b for b in at.button if b.label == "Use LoRA").click().run()
    taken = at.session_state["scenario"]
    assert (taken.training.method, taken.layout) == ("lora", lora.layout)     # the option as it was searched
    assert (estimate(taken).memory_gib.total, estimate(taken).wall_days) == (lora.memory_gib, lora.wall_days)

    at = run_app({"sc": encode(sc)})                     # a larger host: the CPU memory it needs, rounded up
    next(b for b in at.button if b.label == "Use Offload to CPU memory").click().run()
    taken = at.session_state["scenario"]
    assert taken.cluster.host_memory_gb_per_gpu == math.ceil(offload.host_memory_gb_per_gpu)
    assert taken.layout == offload.layout and taken.layout.offload != "none"
    assert estimate(taken).fits and estimate(taken).wall_days == offload.wall_days


def test_the_answer_for_a_lora_job_names_the_job_and_gives_the_plans_figures():
    question = PlannerOptions(deadline_days=7.0)
    at = run_app({"sc": encode(LORA, question)})
    background.wait_all()
    at.run()
    assert not at.exception
    planned = plan(parse_scenario(planning_scenario(LORA)), deadline_days=7.0, vendor=question.vendor,
                   efficiency=question.efficiency, batch_range=question.question(LORA.training.global_batch_size)
                   ["batch_range"], max_gpus=question.max_gpus)
    answer = texts(at.success)[0]
    assert answer == ("LoRA fine-tune of Llama 3.1 70B (rank 16, attention; 500 million tokens): "
                      + headline(planned))
    assert planned.answer.nodes == 1 and planned.answer.wall_days <= 7     # a fine-tune is sized from one node up


def test_the_vendor_page_compares_the_lora_job_and_ranks_the_answers_accelerator_first():
    question = PlannerOptions(deadline_days=7.0)
    at = run_app({"sc": encode(LORA, question)})
    background.wait_all()
    at = on_page(at, "vendor")
    planned = plan(parse_scenario(planning_scenario(LORA)), deadline_days=7.0).answer
    first = at.dataframe[0].value.iloc[0]
    assert (first["accelerator"], int(first["GPUs"]), first["days (wall)"]) == (planned.accelerator, planned.n_gpus,
                                                                                planned.wall_days)
    assert any("(LoRA fine-tune of Llama 3.1 70B (rank 16, attention; 500 million tokens))" in c
               for c in texts(at.caption))
