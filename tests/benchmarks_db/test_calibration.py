import pytest

from benchmarks_db.calibration import calibrated_cluster, collective_calibration, matmul_calibration
from benchmarks_db.ingest import Uploader, ingest_bytes
from engine.physics.hardware import resolve_hardware
from engine.inputs import parse_scenario

from .helpers import matmul_result, runner_file
from .test_nccl_tests import _full_format

H100_BF16 = 794.5 / 989.4            # published MAMF over the catalog's dense bf16 peak
OPERATOR = Uploader(identity="ops@example.com", trusted=True)      # an identity the deployment trusts


def test_published_mamf_is_the_default_calibration(seeded_ro):
    out = calibrated_cluster(seeded_ro, "H100-SXM5-80GB", "bf16", 1024, 8)
    assert out["overrides"] == {"matmul_efficiency": round(H100_BF16, 4)}
    assert out["evidence"]["matmul_efficiency"]["runs"] == ["mamf:NVIDIA H100 SXM:bf16"]
    assert set(out["missing"]) == {"intra_node_busbw_gbs", "inter_node_busbw_gbs", "intra_node_latency_us",
                                   "inter_node_latency_us", "level_scale"}
    # the seed document's illustrative fp32 GEMM (60 TFLOP/s) is never used
    assert "matmul_efficiency" in calibrated_cluster(seeded_ro, "H100-SXM5-80GB", "fp32", 8, 8)["missing"]


def test_trusted_uploads_join_the_median_and_flagged_ones_do_not(seeded):
    t700 = 2 * 8192**3 / 700e12                                 # a run whose best shape reaches 700 TFLOP/s
    good = runner_file([matmul_result(8192, 8192, 8192, "bf16", [t700] * 7),
                        matmul_result(2048, 2048, 2048, "bf16", [2 * 2048**3 / 500e12] * 7)])
    assert ingest_bytes(seeded, "mine.json", good, uploader=OPERATOR).ingested
    quick = runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / 900e12] * 7)], quick=True)
    assert ingest_bytes(seeded, "quick.json", quick, uploader=OPERATOR).flags
    out = calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 64, 8)
    assert out["overrides"]["matmul_efficiency"] == round((H100_BF16 + 700 / 989.4) / 2, 4)
    assert out["evidence"]["matmul_efficiency"]["n_runs"] == 2
    row = matmul_calibration(seeded).query("accelerator_id == 'H100-SXM5-80GB' and dtype == 'bf16'").iloc[0]
    assert row.tflops == pytest.approx((794.5 + 700) / 2)


def test_collective_bus_bandwidth_by_scale(store):
    mib = 2**20
    # one node, 8 H100: plateau 360 GB/s busbw at 1 GiB (algbw = busbw / 1.75); small messages are ignored
    t_1g = 1024 * mib / (360 / 1.75) / 1e3                       # us
    intra = _full_format(rows=((mib, 40.0), (64 * mib, 350.0), (1024 * mib, t_1g)))
    assert ingest_bytes(store, "intra.txt", intra.encode(), uploader=OPERATOR).ingested
    # two nodes of 8: 16 ranks, busbw 180 GB/s at 1 GiB (algbw = busbw / (2 * 15 / 16))
    t = 1024 * mib / (180 / (30 / 16)) / 1e3
    inter = _full_format(n_ranks=16, hosts=("a", "b"), rows=((1024 * mib, t),))
    assert ingest_bytes(store, "inter.txt", inter.encode(), uploader=OPERATOR).ingested
    table = collective_calibration(store)
    assert sorted(zip(table.n_nodes, table.n_ranks)) == [(1, 8), (2, 16)]
    out = calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 1024, 8)
    printed = float(f"{1024 * mib / float(f'{t_1g:.2f}') / 1e3 * 1.75:.2f}")      # the file's 2-decimal figure
    assert out["overrides"]["intra_node_busbw_gbs"] == printed == pytest.approx(360, abs=0.01)
    assert out["overrides"]["inter_node_busbw_gbs"] == pytest.approx(180 / 8, abs=0.01)       # per GPU: / 8 per node
    assert "matmul_efficiency" in out["missing"]
    # single-node job: no inter-node override is asked for
    assert "inter_node_busbw_gbs" not in calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 8, 8)["overrides"]


def test_overrides_reach_the_engine(seeded_ro):
    out = calibrated_cluster(seeded_ro, "MI300X", "bf16", 64, 8)
    sc = parse_scenario({"model": {"preset": "llama3.1-8b"},
                         "training": {"seq_len": 8192, "global_batch_size": 64, "total_tokens": 1e9},
                         "cluster": {"accelerator": "MI300X", "n_gpus": 64, **out["overrides"]}})
    hw = resolve_hardware(sc)
    assert hw.provenance["matmul_efficiency"] == round(668.4 / 1307.4, 4)
    assert "cluster.matmul_efficiency" in hw.provenance["matmul_efficiency_source"]


def test_collective_latency_from_a_real_nccl_tests_curve(store):
    # seed document 003's all_reduce_perf on 8 H100 in 2 nodes (4 per node): the 1-8 MiB messages run at
    # 71.42, 97.81, 131.37 and 191.09 us; their intercept is the collective's latency
    import numpy as np
    from .helpers import seed003_nccl_sample
    assert ingest_bytes(store, "all_reduce.txt", seed003_nccl_sample().encode(), accelerator="H100-SXM5-80GB",
                        uploader=OPERATOR).ingested
    size = np.array([1, 2, 4, 8]) * 2**20
    us = np.array([71.42, 97.81, 131.37, 191.09])
    algbw = np.round(size / us / 1e3, 2)                         # the file's 2-decimal algbw, as stored
    intercept_us = np.polyfit(size, size / algbw / 1e3, 1)[1]
    assert 50 < intercept_us < 70                                      # tens of microseconds, as NCCL's model says
    # the engine's model for 8 ranks on 2 nodes is NCCL's tree (shorter than the ring here): 8.4 us base +
    # 2 x (3 intra-node steps x 3.4 us + log2(2) x the network step) -> the network step that reproduces it
    inter = (intercept_us - 8.4 - 2 * 3 * 3.4) / 2
    out = calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 1024, 4)
    assert out["overrides"]["inter_node_latency_us"] == pytest.approx(inter, abs=0.01)
    assert "intra_node_latency_us" in out["missing"]                  # no single-node curve uploaded
    sc = parse_scenario({"model": {"preset": "llama3.1-8b"},
                         "training": {"seq_len": 8192, "global_batch_size": 64, "total_tokens": 1e9},
                         "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64, **out["overrides"]}})
    assert resolve_hardware(sc).inter_latency_s == pytest.approx(inter * 1e-6, rel=1e-3)
