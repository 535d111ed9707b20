"""Names as people read them ('Llama 3.1 70B on 1,024 x NVIDIA H100 SXM5 80GB'), with the numbers, durations and money
of engine.readable, and the glossary of terms shown in tooltips. Pure: no Streamlit."""
from __future__ import annotations

from engine.catalog import load_catalog
from engine.physics.model import shape_of
from engine.readable import fmt_days, fmt_num, fmt_pct, fmt_rate, fmt_seconds, fmt_usd  # noqa: F401 (the pages' formatters)
from engine.scenario import PresetRef, Scenario


MISSING = "-"
"""What every table of the app shows where a figure is not there (no price, does not fit, never finishes): the row's
note or 'why' says which. Streamlit's own text for a missing cell is 'None' (ui.components.table passes this instead);
CSV exports leave such a cell empty, as spreadsheets read a missing number."""


def model_name(sc: Scenario) -> str:
    if isinstance(sc.model, PresetRef):
        return load_catalog().models[sc.model.preset].name
    arch = sc.arch
    return f"custom model ({arch.n_layers} layers, hidden {arch.hidden_size:,})"


def model_size_text(sc: Scenario) -> str:
    """E.g. '70.6 billion parameters' or '671 billion parameters, 37.5 billion active per token'."""
    shape = shape_of(sc.arch)
    total, active = shape.total_params(), shape.active_params()
    text = f"{fmt_num(total)} parameters".replace("B ", " billion ").replace("M ", " million ")
    if active != total:
        text += f", {fmt_num(active)} active per token".replace("B ", " billion ").replace("M ", " million ")
    return text


def accelerator_name(accelerator_id: str) -> str:
    acc = load_catalog().accelerators.get(accelerator_id)
    return acc.name if acc else accelerator_id


JOB_NAMES = {"pretrain": "Pre-training", "full": "Full fine-tune", "lora": "LoRA fine-tune",
             "qlora": "QLoRA fine-tune"}    # engine.scenario.Training.method in words


def job_text(sc: Scenario) -> str:
    """What the run is, e.g. 'LoRA fine-tune of Llama 3.1 70B (rank 16, attention; 0.5 billion tokens x 3 epochs)'
    or 'Pre-training of Llama 3.1 70B'."""
    tr = sc.training
    text = f"{JOB_NAMES[tr.method]} of {model_name(sc)}"
    if not tr.fine_tune:
        return text
    detail = [f"rank {tr.lora_rank}, {tr.lora_targets.replace('_', ' ')}"] if tr.adapters else []
    tokens = f"{fmt_num(tr.total_tokens)} tokens".replace("T ", " trillion ").replace("B ", " billion ") \
        .replace("M ", " million ")
    detail.append(tokens + (f" x {tr.epochs:g} epochs" if tr.epochs != 1 else ""))
    return f"{text} ({'; '.join(detail)})"


def scenario_title(sc: Scenario) -> str:
    """E.g. 'Llama 3.1 70B on 1,024 x NVIDIA H100 SXM5 80GB'."""
    return f"{model_name(sc)} on {sc.cluster.n_gpus:,} x {accelerator_name(sc.cluster.accelerator)}"



# A short glossary, shown in tooltips wherever the term appears.
GLOSSARY = {
    "MFU": "model FLOPs utilisation: useful model arithmetic (causal attention counted as computed, as current "
           "Megatron-LM counts) as a share of the accelerators' dense peak",
    "HFU": "hardware FLOPs utilisation: like MFU, but counting the recomputed forward work too",
    "goodput": "share of the wall-clock time spent making training progress, after failures, restarts and "
               "checkpoint writes",
    "virtual stages": "interleaved pipeline: each accelerator holds this many smaller chunks of layers instead of "
                      "one block, which shrinks the pipeline bubble at the cost of more pipeline sends",
    "ZeRO": "splits training state across the data-parallel copies instead of repeating it in each: 1 the optimizer "
            "states, 2 also the gradients, 3 also the weights (like PyTorch FSDP)",
    "HSDP": "hybrid sharding: ZeRO splits the state within groups of copies and repeats it across groups, so the "
            "gathers stay inside a group (often one node or a few)",
    "TP overlap": "tensor-parallel communication runs at the same time as the matrix multiplications around it; "
                  "both slow a little, but less time is exposed",
    "tensor parallel": "every layer's matrices split across accelerators, which then exchange results after each "
                       "layer; needs the fast links inside a node",
    "pipeline bubble": "time the first and last pipeline stages wait while the pipeline fills and drains",
    "data parallel": "copies of the model that each train on different data and average their gradients",
    "expert parallel": "a mixture-of-experts model's experts spread over accelerators; tokens travel to their "
                       "experts and back (all-to-all)",
}

