"""Published training runs and how the engine predicts each (shared by the accuracy tests, the calibration script and
the validation report). Data: tests/data/public-validation-cases.json (sources in its blocks).

Each prediction uses the run's published parallel layout and, where the publication does not state them, the
fastest micro-batch size, recompute choice and interleaving that fit in memory: one set of physics for every run,
nothing tuned per run.
"""
from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import dataclass

from engine.catalog import load_catalog
from engine.physics.memory import allocator_reserve_fraction
from engine.physics.schedule import split_options
from engine.planning.estimate import estimate
from engine.planning.results import Estimate
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.planning.search import search
from tests.conftest import DATA
from tests.engine.helpers import gpt

CASES = json.loads((DATA / "public-validation-cases.json").read_text())
SOURCE_NAMES = {"megatron_table1": "Megatron-LM Table 1 (Narayanan et al. 2021)",
                "h100_weak_scaling": "Megatron-LM H100 weak-scaling table (2024)",
                "nemo_25_11": "NeMo 25.11 performance summary", "torchtitan_2024_12": "TorchTitan Llama 3.1 tables (Dec 2024)"}


@dataclass(frozen=True)
class Run:
    name: str
    accelerator: str
    published: float          # the published figure
    metric: str               # the Estimate field compared with it
    scenario: dict            # model, training, cluster (no layout)
    layouts: list             # candidate layouts (published sizes, unpublished details free)
    require_fit: bool = True  # False where the run's memory was measured on a larger part than the catalog's
    source: str = ""          # the published table
    notes: tuple = ()         # what the engine cannot express about the run
    fitted: bool = True       # False: predicted beside the fit, never fitted on (TorchTitan's eager runs)

    @property
    def precision(self) -> str:
        return self.scenario["training"].get("precision", "bf16")

    @property
    def framework(self) -> str | None:
        """The stack the run names (None: its vendor's default)."""
        return self.scenario["training"].get("framework")

    def figure(self, est: Estimate) -> float:
        """The estimate's value of the published metric."""
        if self.metric == "tokens_per_s_per_gpu":
            return est.tokens_per_s / est.n_gpus
        return getattr(est, self.metric)

    def predict(self) -> Estimate | None:
        """The fastest candidate layout that fits (None if none does; any candidate when require_fit is False)."""
        best = None
        for layout in self.layouts:
            try:
                sc = parse_scenario({**self.scenario, "layout": layout})
            except ScenarioError:
                continue
            est = estimate(sc)
            if (est.fits or not self.require_fit) and (best is None or est.step_time_s < best.step_time_s):
                best = est
        return best

    def search_best(self) -> Estimate | None:
        """The layout search's best answer for the same model, cluster, sequence and batch (layout free)."""
        out = search(parse_scenario(self.scenario), top=1, pareto_sizes=[])
        return out.best[0] if out.best else None


def megatron_table1() -> list[Run]:
    """Narayanan et al. 2021 Table 1: GPT models on A100, full recompute, fp16/bf16, the standard attention of 2021;
    the published figure is hardware TFLOP/s per GPU (recompute included, full attention square)."""
    runs = []
    for params_b, heads, hidden, layers, tp, pp, n, gbs, published, _ in CASES["throughput_cases"]["rows"]:
        dp = n // (tp * pp)
        scenario = {"model": gpt(layers, hidden, heads),
                    "training": {"seq_len": 2048, "global_batch_size": gbs, "total_tokens": 3e11, "precision": "bf16",
                                 "attention": "standard"},
                    "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": n}}
        layouts = [{"tp": tp, "pp": pp, "dp": dp, "micro_batch_size": mbs, "recompute": "full"} for mbs in (1, 2, 4, 8)]
        runs.append(Run(f"{params_b:g}B", "A100-SXM4-80GB", published, "hardware_tflops_per_gpu_full_square", scenario,
                        layouts, source="megatron_table1"))
    return runs


def weak_scaling_model(n_layers: int, hidden: int, heads: int) -> dict:
    """The GPT models of Megatron-LM's H100 weak-scaling table: GELU MLP of 4h, multi-head attention, vocabulary
    131072, untied embeddings (which reproduces the table's parameter counts), no dropout, rotary positions."""
    m = gpt(n_layers, hidden, heads, vocab=131072, seq=4096)
    m.update({"learned_position_embeddings": 0, "dropout": False, "tied_embeddings": False})
    return m


def h100_weak_scaling() -> list[Run]:
    """Megatron-LM's H100 weak-scaling table (2024): BF16, sequence 4096, distributed optimizer (ZeRO-1) with
    overlapped gradient reduce-scatter and parameter all-gather, tensor-parallel communication overlap. The published
    figure is model TFLOP/s per GPU as Megatron-LM counted it in 2024 (full attention square)."""
    runs = []
    for params_b, layers, hidden, heads, tp, pp, dp, n, gbs, published, _ in CASES["h100_weak_scaling_cases"]["rows"]:
        scenario = {"model": weak_scaling_model(layers, hidden, heads),
                    "training": {"seq_len": 4096, "global_batch_size": gbs, "total_tokens": 1e12, "precision": "bf16"},
                    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": n}}
        per_stage = layers // pp
        vs = [v for v in range(1, per_stage + 1) if per_stage % v == 0] if pp > 1 and layers % pp == 0 else [1]
        layouts = [{"tp": tp, "pp": pp, "dp": dp, "micro_batch_size": mbs, "recompute": rc, "virtual_stages": v,
                    "zero_stage": 1, "sequence_parallel": tp > 1, "tp_comm_overlap": tp > 1}
                   for mbs, rc, v in itertools.product((1, 2, 4), ("none", "selective", "full"), vs)]
        runs.append(Run(f"{params_b:g}B", "H100-SXM5-80GB", published, "model_tflops_per_gpu_full_square", scenario,
                        layouts, source="h100_weak_scaling"))
    return runs


# NeMo 25.11 performance summary: system -> catalog accelerator, model -> preset (the Llama 3 8B/70B shapes are those of
# Llama 3.1), table precision -> training precision
NEMO_SYSTEMS = {"H100": "H100-SXM5-80GB", "B200": "B200-SXM-180GB", "GB200": "GB200", "GB300": "GB300"}
NEMO_MODELS = {"LLAMA3_8B": "llama3.1-8b", "LLAMA3_70B": "llama3.1-70b", "LLAMA3.1_405B": "llama3.1-405b",
               "GPT_OSS_120B": "gpt-oss-120b", "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
               "DeepSeekV3_noMTP": "deepseek-v3", "DeepSeekV3": "deepseek-v3", "Mixtral_8x7B": "mixtral-8x7b",
               "LLAMA4_Scout": "llama4-scout"}
NEMO_PRECISIONS = {"FP8-CS": "fp8", "BF16": "bf16", "FP8-MX": "mxfp8"}
# NeMo performance-summary rows public-validation-cases.json does not carry (tests/data/nemo-more-rows.json)
NEMO_MORE = json.loads((DATA / "nemo-more-rows.json").read_text())
# The runs whose recipe overlaps the MoE all-to-all across micro-batches (moe_a2a_overlap=True in Megatron-Bridge's
# scripts/performance/configs/qwen/qwen3_workload_base_configs.py, QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V1;
# the H100 Qwen3-30B-A3B and GPT-OSS-120B presets and DeepSeek-V3's GB200 BF16 one leave it off)
NEMO_A2A_OVERLAP = {("H100", "Qwen3_235B_a22B")}


def _splits(n_layers: int, pp: int, v: int) -> list[tuple[int | None, int | None]]:
    """Even split when the layers divide into pp*v chunks, else the uneven first/last splits the rules allow."""
    if n_layers % (pp * v) == 0:
        return [(None, None)]
    return [s for s in split_options(n_layers, pp) if s != (None, None)]


def nemo_25_11(table: dict | None = None) -> list[Run]:
    """NVIDIA NeMo 25.11 performance summary (Megatron-Core, tuned recipes): tokens/s per GPU with the published
    parallel layout; fsdp 1 = Megatron-FSDP (ZeRO-3), else the distributed optimizer (ZeRO-1); TP with sequence
    parallelism and communication overlap; routed experts without tensor parallelism (expert_tp 1, the recipes'
    default); recompute is 'per recipe' (unpublished), so the fastest candidate: the published run ran, so its
    memory fit (NeMo keeps FP8 weights only, and offloads activations on Grace where the recipe says so), whatever
    the engine's memory model says (`require_fit` False; public_case_predictions reports both). table: other rows
    of NeMo's tables in the same columns (nemo_more_rows)."""
    table = table or CASES["nemo_25_11_cases"]
    cols = table["columns"]
    runs = []
    for values in table["rows"]:
        r = dict(zip(cols, values))
        preset = NEMO_MODELS[r["model"]]
        arch = load_catalog().models[preset].arch
        seq = 8192 if r["model"].startswith("LLAMA") else 4096
        scenario = {"model": {"preset": preset},
                    "training": {"seq_len": seq, "global_batch_size": r["global_batch_size"], "total_tokens": 1e12,
                                 "precision": NEMO_PRECISIONS[r["precision"]], "framework": "megatron_core"},
                    "cluster": {"accelerator": NEMO_SYSTEMS[r["system"]], "n_gpus": r["n_gpus"]}}
        tp, pp, cp, v = r["tp"], r["pp"], r["cp"], r["vp"] or 1
        dp = r["n_gpus"] // (tp * pp * cp)
        layouts = [{"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": r["ep"], "virtual_stages": v,
                    "micro_batch_size": r["micro_batch_size"], "zero_stage": 3 if r["fsdp"] else 1,
                    "sequence_parallel": tp > 1, "tp_comm_overlap": tp > 1, "recompute": rc,
                    "moe_a2a_overlap": (r["system"], r["model"]) in NEMO_A2A_OVERLAP,
                    **({"expert_tp": 1} if arch.is_moe else {}),
                    **({"first_stage_layers": first, "last_stage_layers": last} if first is not None else {})}
                   for rc in ("none", "selective", "full") for first, last in _splits(arch.n_layers, pp, v)]
        name = f"{r['system']} {r['model']} {r['precision']} {r['n_gpus']}"
        runs.append(Run(name, NEMO_SYSTEMS[r["system"]], r["tokens_per_s_per_gpu"], "tokens_per_s_per_gpu", scenario,
                        layouts, require_fit=False, source="nemo_25_11"))
    return runs


def nemo_more_rows(keep=lambda row: True) -> list[Run]:
    """The rows of NeMo's performance tables that public-validation-cases.json does not carry
    (tests/data/nemo-more-rows.json: the 25.11 table's FP8-MX and Blackwell MoE rows, earlier containers' MoE rows
    with few experts per GPU), those `keep` (a dict of the columns) selects, predicted like nemo_25_11's."""
    cols = NEMO_MORE["columns"]
    rows = [r for r in NEMO_MORE["rows"] if keep(dict(zip(cols, r)))]
    return nemo_25_11({"columns": cols, "rows": rows})


TORCHTITAN_MODELS = {"Llama 3.1 8B": "llama3.1-8b", "Llama 3.1 70B": "llama3.1-70b", "Llama 3.1 405B": "llama3.1-405b"}


def torchtitan_2024_12() -> list[Run]:
    """TorchTitan's Llama 3.1 tables (Dec 2024; PyTorch FSDP2 with TP, PP, CP; torchao float8): measured tokens/s per
    GPU on H100 96 GB at a 500 W limit, predicted on the catalog's H100 SXM5 (the nearest part: the same GH100 core;
    the lower power limit is in the fitted level). The runs' memory was measured on 96 GB parts, so a layout is
    predicted whether or not it fits 80 GB (`require_fit` False). Unpublished micro-batch sizes (the pipelined runs'
    local batch is given per data-parallel rank) are the fastest of the divisors of that batch. The two eager runs
    (torch_compile false) are predicted with their op-by-op element-wise traffic and never fitted on (`fitted`)."""
    runs = []
    for case in CASES["torchtitan_2024_12_cases"]["rows"]:
        lay, model = case["layout"], case["model"]
        float8 = case["precision"].startswith("float8")
        n = case["n_gpus"]
        dp = lay["dp"]
        local = lay.get("local_batch_per_dp_rank") or (lay["global_batch"] // dp if lay["global_batch"] else None)
        gbs = lay["global_batch"] or local * dp
        scenario = {"model": {"preset": TORCHTITAN_MODELS[model["name"]]},
                    "training": {"seq_len": model["seq_len"], "global_batch_size": gbs, "total_tokens": 1e12,
                                 "precision": "fp8" if float8 else "bf16", "framework": "pytorch_fsdp2",
                                 "torch_compile": lay["torch_compile"]},
                    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": n}}
        rc = "full" if lay["recompute"] == "full" else "selective"
        v = 2 if "Interleaved" in (lay.get("pp_schedule") or "") else 1
        mbs_options = [lay["micro_batch"]] if lay["micro_batch"] else [m for m in (1, 2, 4, 8) if local % m == 0]
        arch = load_catalog().models[TORCHTITAN_MODELS[model["name"]]].arch
        layouts = [{"tp": lay["tp"], "pp": lay["pp"], "dp": dp, "cp": lay["cp"], "micro_batch_size": mbs,
                    "virtual_stages": v, "zero_stage": 3, "sequence_parallel": lay["tp"] > 1,
                    "tp_comm_overlap": bool(lay.get("async_tp")), "recompute": rc,
                    "reshard_after_forward": lay["pp"] == 1,
                    **({"first_stage_layers": first, "last_stage_layers": last} if first is not None else {})}
                   for mbs in mbs_options for first, last in _splits(arch.n_layers, lay["pp"], v)]
        runs.append(Run(case["id"], "H100-SXM5-80GB", case["measured"]["tokens_per_s_per_gpu"], "tokens_per_s_per_gpu",
                        scenario, layouts, require_fit=False, source="torchtitan_2024_12",
                        fitted=lay["torch_compile"]))
    return runs


def public_runs() -> list[Run]:
    """Every public per-step calibration run: Megatron-LM Table 1, the H100 weak-scaling table, NeMo 25.11 and
    TorchTitan Dec 2024."""
    return megatron_table1() + h100_weak_scaling() + nemo_25_11() + torchtitan_2024_12()


def public_case_predictions(runs: list[Run] | None = None) -> list[dict]:
    """One row per public run with the engine's prediction at the run's published layout (the fastest candidate, as
    Run.predict): {source, case_id, framework, accelerator, precision, moe, dp_sharding (zero0/zero1/zero3),
    n_gpus, seq_len, calibrated (the stack's level is fitted for this accelerator and precision), fits_engine_memory,
    metric, predicted, measured, predicted_step_s, measured_step_s, ratio (predicted/measured throughput =
    measured/predicted time), notes (what the engine cannot express about the run)}. The time-based fields compare like with like
    whatever the metric (the published throughput converts to a step time at the run's batch and sequence)."""
    rows = []
    for run in public_runs() if runs is None else runs:
        est = run.predict()
        sc = run.scenario
        tr = sc["training"]
        arch = parse_scenario(sc).arch
        predicted = None if est is None else run.figure(est)
        ratio = None if predicted is None else predicted / run.published
        step = None if est is None else est.step_time_s
        zero = None if est is None else est.layout.zero_stage
        rows.append({
            "source": run.source, "case_id": run.name, "framework": est.framework["id"] if est else None,
            "accelerator": run.accelerator, "precision": tr.get("precision", "bf16"), "moe": arch.is_moe,
            "dp_sharding": None if zero is None else f"zero{zero}", "n_gpus": sc["cluster"]["n_gpus"],
            "seq_len": tr["seq_len"], "calibrated": None if est is None else est.framework["calibrated"],
            "fits_engine_memory": None if est is None else est.fits,
            "metric": run.metric, "predicted": predicted, "measured": run.published,
            "predicted_step_s": step, "measured_step_s": None if ratio is None else step * ratio, "ratio": ratio,
            "notes": list(run.notes)})
    return rows


@dataclass(frozen=True)
class MemoryRun:
    """A published peak of memory per GPU with the layout it was measured on."""
    name: str
    table: str                # the source's table: the unit left out together by the held-out check
    measured_gib: float       # torch.cuda.max_memory_reserved (the caching allocator's reserve at its peak), GiB
    scenario: dict

    def predict(self) -> Estimate:
        return estimate(parse_scenario(self.scenario))

    def predicted_reserved_gib(self) -> float:
        """The estimate's figure for the same quantity: its live tensors with the allocator's reserve."""
        return self.predict().memory_detail_gib["reserved_peak"]


def torchtitan_memory() -> list[MemoryRun]:
    """TorchTitan's Llama 3.1 tables on H100 (Dec 2024): FSDP2 (ZeRO-3 over data- and context-parallel ranks, the
    gathered weights freed after each layer's forward, kept under pipeline parallelism: parallelize_llama.apply_fsdp),
    TP with sequence parallelism, 1F1B or interleaved pipelines, per-op selective or full activation checkpointing,
    bf16 or torchao float8 (per-tensor scaling: fp8 here). What the tables leave out is TorchTitan's default of the
    time, written down in each row's notes: the pipeline runs as many micro-batches as stages (two stages per rank
    for the interleaved schedule) and generate_split_points gives the first and last rank one layer less. The
    96 GB H100 is not in the catalog; the 80 GB one stands in (the estimate of memory does not read the capacity)."""
    runs = []
    for r in CASES["torchtitan_2024_12_cases"]["rows"]:
        lay, m = r["layout"], r["model"]
        pp, dp, cp, tp = lay["pp"], lay["dp"], lay["cp"], lay["tp"]
        table = r["id"].split("-")[1]
        local = {"t5": 32, "t6": 8}.get(table, lay["micro_batch"])      # sequences per data-parallel rank
        v = 2 if "interleaved" in r["id"] else 1
        layout = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "zero_stage": 3, "sequence_parallel": tp > 1,
                  "recompute": "full" if lay["recompute"] == "full" else "selective",
                  "reshard_after_forward": pp == 1, "virtual_stages": v,
                  "micro_batch_size": local // (pp * v) if pp > 1 else local}
        if pp > 1:
            per_rank = m["n_layers"] // pp
            layout.update(first_stage_layers=per_rank, last_stage_layers=per_rank)
        scenario = {"model": {"preset": TORCHTITAN_MODELS[m["name"]]},
                    "training": {"seq_len": m["seq_len"], "global_batch_size": dp * local, "total_tokens": 1e12,
                                 "precision": "bf16" if r["precision"] == "bf16" else "fp8",
                                 "framework": "pytorch_fsdp2", "torch_compile": lay["torch_compile"]},
                    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": r["n_gpus"]},
                    "layout": layout}
        runs.append(MemoryRun(r["id"], table, r["measured"]["peak_memory_gib"], scenario))
    return runs


def reserve_left_out(runs: list[MemoryRun]) -> dict[str, tuple[float, list[float]]]:
    """The held-out check of the one memory constant the published peaks could be fitted on, the allocator's reserve
    (a share of the live tensors): for each table, the reserve that best fits the other tables (median error, on a
    0.1% grid) and the errors it gives that table's runs. {table: (fitted reserve, [relative errors])}."""
    live = {r.name: r.predicted_reserved_gib() / (1 + allocator_reserve_fraction()) for r in runs}
    grid = [i / 1000 for i in range(301)]
    out = {}
    for table in sorted({r.table for r in runs}):
        fit = min(grid, key=lambda f: statistics.median(abs(live[r.name] * (1 + f) / r.measured_gib - 1)
                                                        for r in runs if r.table != table))
        out[table] = (fit, [live[r.name] * (1 + fit) / r.measured_gib - 1 for r in runs if r.table == table])
    return out
