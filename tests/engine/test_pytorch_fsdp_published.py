"""PyTorch FSDP runs the engine was not fitted on (tests/data/pytorch-fsdp-published-runs.json): LLM Foundry's MPT
tables on H100 and A100 and TorchTitan's A100 table, each at its published layout (FSDP over every GPU, its micro-batch
and checkpointing). The H100 rows check FSDP2's level fitted on TorchTitan's H100 tables; the A100 rows check the level
an uncalibrated stack borrows: Megatron-Core's A100 level times FSDP2's over Megatron-Core's on the H100 (0.790),
where borrowing FSDP2's own H100 level (0.655) put them 20% slow at the median."""
import json
import statistics

import pytest

from engine.inputs import parse_scenario
from engine.planning.estimate import estimate
from tests.conftest import DATA as DATA_DIR

DATA = json.loads((DATA_DIR / "pytorch-fsdp-published-runs.json").read_text())


def _model(name: str) -> dict:
    arch = DATA["sources"]["llm_foundry"]["architectures"].get(name)
    if arch is None:
        return {"preset": name}
    hidden, heads, layers = arch
    return {"n_layers": layers, "hidden_size": hidden, "n_heads": heads, "ffn_hidden_size": 4 * hidden,
            "vocab_size": 50368, "ffn_type": "gelu"}


def predicted_over_published(row: list) -> float:
    model, accelerator, precision, n, seq, mbs, batch, recompute, published = row
    sc = parse_scenario({"model": _model(model),
                         "training": {"seq_len": seq, "global_batch_size": batch, "total_tokens": 1e9,
                                      "precision": precision, "framework": "pytorch_fsdp2"},
                         "cluster": {"accelerator": accelerator, "n_gpus": n},
                         "layout": {"dp": n, "micro_batch_size": mbs, "zero_stage": 3,
                                    "recompute": recompute}})
    return estimate(sc).tokens_per_s / n / published


def _errors(family: str) -> list[float]:
    rows = [r for src in DATA["sources"].values() for r in src["rows"] if r[1].startswith(family)]
    return [predicted_over_published(r) - 1 for r in rows]


@pytest.mark.parametrize("family, runs", [("H100", 26), ("A100", 28)])
def test_fsdp_throughput_within_the_issue_targets(family, runs):
    errors = _errors(family)
    assert len(errors) == runs
    assert statistics.median(abs(e) for e in errors) < 0.10      # issue 21: median under 10%
    assert max(abs(e) for e in errors) < 0.30                    # worst under 30%
    assert abs(statistics.median(errors)) < 0.05                 # no side: neither stack level leans


def test_torchtitan_on_a100_at_the_borrowed_level():
    # 2,973 and 331 tokens/s per GPU published; at FSDP2's own H100 level the engine said 2,382 and 257 (-20%, -22%)
    ratios = [predicted_over_published(r) for r in DATA["sources"]["torchtitan_a100"]["rows"]]
    assert all(0.90 < r < 1.05 for r in ratios)
