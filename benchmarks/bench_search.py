"""Layout search speed: Llama 3.1 405B (seq 8192, global batch 2048) on 16,384 H100-SXM5-80GB (8 per node), every
dimension. Prints candidates, wall time and candidates per second (target: whole search < 2 s, >= 1M candidates/s),
and separately the raw throughput of the memory/time model on a large batch of valid layouts."""
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.planning.evaluation import evaluate  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402
from engine.planning.search import search, search_cluster  # noqa: E402

SCENARIO = {
    "model": {"preset": "llama3.1-405b"},
    "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 15.6e12},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16384, "gpus_per_node": 8},
}


def main(repeats: int = 5) -> None:
    sc = parse_scenario(SCENARIO)
    search(sc, top=10, pareto_sizes=[])                      # warm caches (catalog, imports)
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = search(sc, top=10, pareto_sizes=[])
        walls.append(time.perf_counter() - t0)
    wall = statistics.median(walls)
    n = out.candidates_evaluated
    print(f"search Llama 3.1 405B on 16,384 H100: {n:,} candidates evaluated "
          f"({out.model_evaluated:,} passed the divisibility and node rules and went through the memory/time "
          f"model, {out.feasible:,} fit), median wall {wall:.3f} s over {repeats} runs, "
          f"{n / wall:,.0f} candidates/s (targets: < 2 s, >= 1,000,000/s)")
    t0 = time.perf_counter()
    full = search(sc, top=10)
    print(f"with the Pareto front over {len(full.pareto)} cluster sizes: {time.perf_counter() - t0:.3f} s")
    best = out.best[0]
    print(f"best: {best.layout.model_dump()} -> {best.train_days:.1f} days, MFU {best.mfu:.1%}, "
          f"{best.memory_gib.total:.1f} GiB per GPU")
    cs = search_cluster(sc, 16384)
    batch = cs.layouts.take(np.tile(cs.valid, 1000))
    t0 = time.perf_counter()
    evaluate(cs.ctx, batch)
    dt = time.perf_counter() - t0
    print(f"memory/time model alone on {len(batch):,} valid layouts: {dt:.2f} s, {len(batch) / dt:,.0f} layouts/s")


# fine-tuning (issue 20): a LoRA search, and a full fine-tune that fits only with offload, which the search then
# enumerates in a second pass (engine.planning.search.search_cluster)
FINE_TUNES = {
    "Llama 2 70B LoRA (MLPerf: seq 8192, batch 8) on 8 H100": {
        "model": {"preset": "llama2-70b"},
        "training": {"seq_len": 8192, "global_batch_size": 8, "total_tokens": 3072 * 8192, "method": "lora"},
        "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}},
    "Llama 2 70B full fine-tune (seq 4096, batch 64) on 8 H100, offload searched": {
        "model": {"preset": "llama2-70b"},
        "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e9, "method": "full"},
        "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}},
}


def fine_tunes(repeats: int = 5) -> None:
    for name, data in FINE_TUNES.items():
        sc = parse_scenario(data)
        search(sc, top=10, pareto_sizes=[])
        walls = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = search(sc, top=10, pareto_sizes=[])
            walls.append(time.perf_counter() - t0)
        best = out.best[0]
        print(f"search {name}: {out.candidates_evaluated:,} candidates, median wall {statistics.median(walls):.3f} s; "
              f"best {best.layout.model_dump(exclude_defaults=True)}: {best.memory_gib.total:.1f} GiB per GPU, "
              f"step {best.step_time_s:.2f} s")


if __name__ == "__main__":
    fine_tunes()
    main()
