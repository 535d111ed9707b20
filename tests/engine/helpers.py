"""Scenario builders shared by the engine tests."""
import copy

from engine.inputs import parse_scenario

BASE = {
    "model": {"preset": "llama3.1-8b"},
    "training": {"seq_len": 4096, "global_batch_size": 256, "total_tokens": 1e12, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
    "layout": {"tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 1},
}


# BASE's layout (ZeRO-0) needs 148 GiB per H100 and so has no days or cost; with ZeRO-1 it fits (66 GiB): for the
# tests of the run's time, cost and energy
FITS = {"layout.zero_stage": 1}


def scenario(**overrides):
    """BASE with dotted-path overrides, e.g. scenario(**{"layout.tp": 2, "layout.dp": 4})."""
    data = copy.deepcopy(BASE)
    for path, value in overrides.items():
        node = data
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


def gpt(n_layers, hidden, heads, vocab=51200, seq=2048):
    """A GPT-3-style architecture as in Megatron-LM (MHA, GELU MLP of 4h, tied embeddings, learned positions)."""
    return {"n_layers": n_layers, "hidden_size": hidden, "n_heads": heads, "ffn_hidden_size": 4 * hidden,
            "vocab_size": vocab, "ffn_type": "gelu", "tied_embeddings": True, "learned_position_embeddings": seq,
            "dropout": True}


def parse(**overrides):
    return parse_scenario(scenario(**overrides))
