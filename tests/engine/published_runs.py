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

from engine.physics.memory import allocator_reserve_fraction
from engine.planning.estimate import estimate
from engine.planning.results import Estimate
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.planning.search import search
from tests.conftest import DATA
from tests.engine.helpers import gpt

CASES = json.loads((DATA / "public-validation-cases.json").read_text())


@dataclass(frozen=True)
class Run:
    name: str
    accelerator: str
    published: float          # the published figure
    metric: str               # the Estimate field compared with it
    scenario: dict            # model, training, cluster (no layout)
    layouts: list             # candidate layouts (published sizes, unpublished details free)

    def predict(self) -> Estimate | None:
        """The fastest candidate layout that fits (None if none does)."""
        best = None
        for layout in self.layouts:
            try:
                sc = parse_scenario({**self.scenario, "layout": layout})
            except ScenarioError:
                continue
            est = estimate(sc)
            if est.fits and (best is None or est.step_time_s < best.step_time_s):
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
                        layouts))
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
                        layouts))
    return runs


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


TORCHTITAN_PRESETS = {"Llama 3.1 8B": "llama3.1-8b", "Llama 3.1 70B": "llama3.1-70b", "Llama 3.1 405B": "llama3.1-405b"}


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
        scenario = {"model": {"preset": TORCHTITAN_PRESETS[m["name"]]},
                    "training": {"seq_len": m["seq_len"], "global_batch_size": dp * local, "total_tokens": 1e12,
                                 "precision": "bf16" if r["precision"] == "bf16" else "fp8"},
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
