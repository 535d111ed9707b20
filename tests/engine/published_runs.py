"""Published training runs and how the engine predicts each (shared by the accuracy tests, the calibration script and
the validation report). Data: tests/data/public-validation-cases.json (sources in its blocks).

Each prediction uses the run's published parallel layout and, where the publication does not state them, the
fastest micro-batch size, recompute choice and interleaving that fit in memory: one set of physics for every run,
nothing tuned per run.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

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
