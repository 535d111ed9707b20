"""Time one full estimate (scenario parsing excluded) and print the figure. Target: under 5 ms."""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.planning.estimate import estimate  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402

SCENARIO = {
    "model": {"preset": "llama3.1-405b"},
    "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 15.6e12},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16384},
    "layout": {"tp": 8, "pp": 2, "dp": 1024, "micro_batch_size": 1, "zero_stage": 3, "sequence_parallel": True,
               "recompute": "selective"},
}


def main(repeats: int = 500) -> None:
    sc = parse_scenario(SCENARIO)
    estimate(sc)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate(sc)
        times.append(time.perf_counter() - t0)
    print(f"estimate (Llama 3.1 405B on 16,384 H100): median {statistics.median(times) * 1e3:.2f} ms, "
          f"p95 {sorted(times)[int(0.95 * len(times))] * 1e3:.2f} ms over {repeats} runs (target < 5 ms)")


if __name__ == "__main__":
    main()
