"""Test inputs in the formats the store accepts, built from per-iteration times with the documented definitions
(rate median = work / median time, max = work / min time, min = work / max time)."""
import json
import statistics
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = DATA / "mlperf-samples"
GPT3 = SAMPLES / "v4.1_NVIDIA_eos_n64_ngc24.09_nemo_gpt3"
AMD_LORA = SAMPLES / "v5.0_AMD_MI300X_EPYC_9575F_pytorch_llama2_70b_lora"
DELL_LORA = SAMPLES / "v5.0_Dell_9xXE9712x4GB200_llama2_70b_lora"
GPT3_RESULTS = GPT3 / "NVIDIA" / "results" / "eos_n64_ngc24.09_nemo" / "gpt3"

COMPLETE_SOFTWARE = {"os": "Linux 5.15", "python": "3.11.9", "numpy": "2.1.3", "torch": "2.5.1+cu124",
                     "cuda": "12.4", "driver": "550.54.15", "nccl": "2.21.5"}


def seed003_nccl_sample() -> str:
    """The nccl-tests all_reduce output quoted in seed document 003 (8 ranks, 2 nodes, H100)."""
    return (DATA / "nccl_tests_allreduce_seed003.txt").read_text()


def stats(work, times):
    return ({"median": work / statistics.median(times), "min": work / max(times), "max": work / min(times)},
            {"median": statistics.median(times), "min": min(times), "max": max(times)})


def matmul_result(m, n, k, dtype, times, backend="torch"):
    rate, t = stats(2 * m * n * k / 1e12, times)
    return {"benchmark": "matmul", "unit": "TFLOP/s", "backend": backend, "dtype": dtype, "m": m, "n": n, "k": k,
            "stats": rate, "time_s": t, "n_samples": len(times), "warmup_iters": 10, "cv_pct": 1.0}


def busbw_result(op, message_bytes, n_ranks, times, n_nodes=1, backend="nccl"):
    algbw, t = stats(message_bytes / 1e9, times)
    factor = {"all_reduce": 2 * (n_ranks - 1) / n_ranks}.get(op, (n_ranks - 1) / n_ranks)
    return {"benchmark": "collectives", "unit": "GB/s", "op": op, "backend": backend, "dtype": "fp32",
            "message_bytes": message_bytes, "n_ranks": n_ranks, "n_nodes": n_nodes, "algbw": algbw,
            "stats": {k: v * factor for k, v in algbw.items()}, "time_s": t, "n_samples": len(times),
            "warmup_iters": 5, "cv_pct": 1.0}


def runner_file(results, device_name="NVIDIA H100 80GB HBM3", device_type="gpu", count=8, n_nodes=1,
                software=None, quick=False, started="2026-11-20T10:00:00Z", **system) -> bytes:
    doc = {"schema_version": 1,
           "runner": {"name": "benchmarks_db.run", "version": "1.0", "argv": ["run", "all"], "started_at": started,
                      "duration_s": 12.5, "quick": quick},
           "system": {"device_type": device_type, "device_name": device_name, "device_count": count,
                      "n_nodes": n_nodes, **system},
           "software": COMPLETE_SOFTWARE if software is None else software,
           "results": results}
    return json.dumps(doc).encode()
