"""Fit each software stack's in-training level per accelerator and precision class (data/frameworks.json levels) on
the public per-step runs, and print the fit, the per-run errors and the leave-one-out figures.

One set of physics; the only constants fitted here are
- one level per (stack, accelerator, precision class) that has public runs: each run's own level is the one at which
  the engine, with the run's published layout, predicts the published throughput exactly; the group's level is the
  geometric mean of its runs' own levels (so the geometric-mean error over the group is about 0). Dense runs fit;
  MoE runs fit a group only where it has no dense run (their own physics is validated, not absorbed), and
  TorchTitan's eager runs (torch_compile false: their extra element-wise traffic is counted op by op,
  engine.physics.compute eager_elementwise_bytes) are predicted beside the fit, never fitted on;
- PyTorch's async-TP share (frameworks.json pytorch_fsdp2 tp_overlap_share): the share of the exposed TP time at
  which the engine's speed-up of async TP equals TorchTitan's measured one (Table 4, 70B on 256 H100).
Leave-one-out: each run predicted at the geometric mean of the other runs' own levels in its group (a run alone in
its group has none: uncalibrated).

    .venv/bin/python scripts/calibrate_sustained.py            # print the fit
    .venv/bin/python scripts/calibrate_sustained.py --write    # and write the levels to data/frameworks.json
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import engine.frameworks as fw  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402
from benchmarks_db import validation  # noqa: E402
from benchmarks_db.reference_runs import REFERENCE  # noqa: E402
from benchmarks_db.seed import seed  # noqa: E402
from benchmarks_db.store import open_store  # noqa: E402
from engine.catalog import load_catalog  # noqa: E402
from engine.planning import search  # noqa: E402
from tests.engine.published_runs import SOURCE_NAMES, Run, nemo_more_rows, public_runs, torchtitan_2024_12  # noqa: E402

SOURCE_NAMES = {**SOURCE_NAMES, "mlperf": "MLPerf Training results in the store: GPT-3, Llama 3.1 405B and Llama 2 "
                                          "70B LoRA (search's layout, the logged batch)"}

FRAMEWORKS_JSON = ROOT / "data" / "frameworks.json"
ASYNC_TP_PAIR = ("tt24-t4-70b-256gpu-2d", "tt24-t4-70b-256gpu-2d_asynctp")


@contextmanager
def overridden(levels: dict | None = None, stack_fields: dict | None = None):
    """Evaluate with other levels {(framework, accelerator, class): value} or stack fields {framework: {field: v}}."""
    original = fw.frameworks
    doc = original()
    new_levels = list(doc.levels)
    for (framework, acc, pclass), value in (levels or {}).items():
        same = lambda lv: lv.framework == framework and lv.precision_class == pclass
        new_levels = [lv.model_copy(update={"accelerators": [a for a in lv.accelerators if a != acc or not same(lv)]})
                      for lv in new_levels]
        new_levels = [lv for lv in new_levels if lv.accelerators]
        new_levels.append(fw.Level.model_construct(framework=framework, accelerators=[acc], precision_class=pclass,
                                                   value=value, fitted_on="calibration"))
    rows = [r.model_copy(update=(stack_fields or {}).get(r.id, {})) for r in doc.rows]
    patched = doc.model_copy(update={"levels": new_levels, "rows": rows})
    fw.frameworks = lambda: patched
    clear_caches()                             # best layouts and MLPerf predictions are cached per scenario
    try:
        yield
    finally:
        fw.frameworks = original
        clear_caches()


def clear_caches() -> None:
    search._best_json.cache_clear()
    validation._predict.cache_clear()


def group_of(run) -> tuple[str, str, str]:
    """(stack, accelerator, precision class) of a run: the stack it names, else its vendor's default."""
    vendor = load_catalog().accelerator(run.accelerator).vendor
    framework = fw.stack_id(run.framework, vendor)
    return framework, run.accelerator, fw.precision_class(run.precision)


@dataclass(frozen=True)
class MlperfRun:
    """An MLPerf Training result in the store, predicted as benchmarks_db.validation does (the search's best layout
    for the result's logged batch, sequence and tokens); its figure is 1/minutes so that ratios read as throughput."""
    name: str
    accelerator: str
    precision: str
    args: tuple
    published: float
    metric: str = "1/minutes"
    source: str = "mlperf"
    framework: str | None = None
    notes: tuple = ()
    fitted: bool = True
    is_moe: bool = False
    scaling: float = 1.0

    def predict(self) -> dict:
        return validation._predict(*self.args)

    def figure(self, pred: dict) -> float:
        """1 / minutes, the prediction times MLPerf's RCP penalty as benchmarks_db.validation compares them."""
        return 1.0 / (pred["predicted_minutes"] * self.scaling)


# (accelerator, precision class) whose results are held out as checks of the borrowing rules (engine.frameworks.resolve)
# rather than fitted: Google's v3.1 TPU v5e GPT-3 result, the one TPU run in a stated precision (INT8 AQT), which at the
# borrowed H100 16-bit level comes out at 0.945 of its published minutes (docs/validation.md, TPUs)
BORROWING_CHECKS = {("TPU-v5e", "8bit"): "Google's v3.1 GPT-3 result in INT8: the check of the borrowed level at 8 bits"}


def mlperf_runs(vendors=("AMD", "Google", "Intel", "AWS"), covered: frozenset = frozenset()) -> list[MlperfRun]:
    """The store's MLPerf results the engine models (GPT-3, Llama 3.1 405B, Llama 2 70B LoRA) on accelerators of these
    vendors (NVIDIA's are held out: they check the NeMo-fitted levels; so are BORROWING_CHECKS), and NVIDIA's
    pre-training results at a (stack, precision class) that no public per-step run covers (`covered`): NeMo 25.11
    publishes no 4-bit row, so NVIDIA's MLPerf v5.1 NVFP4 Llama 3.1 405B results are the public 4-bit data (their
    LoRA results stay held out: thin-scale LoRA has a cost the engine does not model, docs/validation.md)."""
    store = open_store(str(Path(tempfile.mkdtemp()) / "calibration.duckdb"))
    seed(store)
    df = validation.predicted_vs_measured(store)
    params = dict(store.rows("SELECT run_id, params FROM run WHERE suite = 'mlperf_training'"))
    out = []
    # a result whose log was not read is predicted at the reference run's batch: not the run it measured
    for r in df[(df.status == "predicted") & df.token_basis.map(validation.from_own_log)].itertuples():
        acc = load_catalog().accelerators.get(r.accelerator)
        if acc is None:
            continue
        stack, _, pclass = group_of(r)
        if (acc.id, pclass) in BORROWING_CHECKS:
            continue
        uncovered = (stack, pclass) not in covered
        pretraining = "method" not in REFERENCE[r.benchmark].get("training", {})
        if acc.vendor not in vendors and not (acc.vendor == "NVIDIA" and uncovered and pretraining):
            continue
        seq, gbs, tokens, _, evals = validation._logged_tokens(r.run_id, r.benchmark,
                                                               json.loads(params.get(r.run_id) or "{}"))
        args = (r.benchmark, seq, gbs, tokens, r.precision, acc.id, int(r.n_accelerators), r.framework, evals)
        scaling = float(json.loads(params.get(r.run_id) or "{}").get("scaling_factor") or 1.0)
        out.append(MlperfRun(f"{r.round} {r.submitter} {r.benchmark} {int(r.n_accelerators)}", acc.id, r.precision,
                             args, 1.0 / r.published_minutes, scaling=scaling, framework=r.framework))
    return out


def ratio_at(run: Run, group, level: float) -> float:
    with overridden({group: level}):
        est = run.predict()
    return run.figure(est) / run.published


def own_level(run, group, start: float, lo: float = 0.1, hi: float = 2.0) -> float:
    """The level at which the run is predicted exactly (log ratio rises with the level): regula falsi on
    log(ratio) against log(level) inside [lo, hi], from the group's current level."""
    f = lambda level: math.log(ratio_at(run, group, level))
    a, b = math.log(lo), math.log(hi)
    fa, fb = f(lo), f(hi)
    if fa >= 0 or fb <= 0:
        return lo if fa >= 0 else hi                  # the run is not reached inside the range
    x = math.log(start)
    for _ in range(30):
        fx = f(math.exp(x))
        if abs(fx) < 1e-4:
            break
        a, fa, b, fb = (x, fx, b, fb) if fx < 0 else (a, fa, x, fx)
        x = a - fa * (b - a) / (fb - fa)
        if not (min(a, b) < x < max(a, b)) or abs(b - a) < 1e-6:
            x = (a + b) / 2
    return math.exp(x)


def geo(values) -> float:
    values = list(values)
    return math.exp(statistics.mean(math.log(v) for v in values))


def is_moe(run) -> bool:
    return run.is_moe if isinstance(run, MlperfRun) else parse_scenario(run.scenario).arch.is_moe


def fits(run: Run) -> bool:
    return run.fitted and not run.notes


def summary(errors: list[float]) -> str:
    if not errors:
        return "no runs"
    return (f"median |error| {statistics.median(abs(e) for e in errors):.1%}, worst {max(abs(e) for e in errors):.1%}"
            f" ({len(errors)} runs)")


def fit_async_tp() -> float:
    """pytorch_fsdp2 tp_overlap_share at which the engine's async-TP speed-up equals TorchTitan's measured one."""
    runs = {r.name: r for r in torchtitan_2024_12()}
    off, on = (runs[n] for n in ASYNC_TP_PAIR)
    measured = on.published / off.published

    def gain(share: float) -> float:
        with overridden(stack_fields={"pytorch_fsdp2": {"tp_overlap_share": share}}):
            return on.figure(on.predict()) / off.figure(off.predict())

    lo, hi = 0.0, 1.0
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain(mid) < measured else (lo, mid)
    share = round((lo + hi) / 2, 3)
    print(f"pytorch_fsdp2 tp_overlap_share {share:.3f}: async TP measured {measured:.3f}x "
          f"({off.published:g} -> {on.published:g} tokens/s/GPU), predicted {gain(share):.3f}x "
          f"(a complete overlap would give {gain(1.0):.3f}x)")
    return share


# the stack whose MoE runs (NeMo 25.11's on H100) fit the per-expert cost: the only one with moe_fitted
MOE_STACK = "megatron_core"


# NeMo's Blackwell presets run the MoE layer with CUDA graphs over the router and the MoE preprocessing and the
# HybridEP dispatcher (Megatron-Bridge scripts/performance/configs: qwen3_workload_base_configs.py,
# gpt_oss_workload_base_configs.py, deepseek_workload_base_configs.py), its H100 presets without CUDA graphs: the
# per-expert cost is fitted apart for these architectures (catalog `architecture`), on the 25.11 table's MoE rows at
# a level fitted on dense runs (FP8-MX at the FP8 levels of B200, GB200 and GB300)
BLACKWELL_RECIPES = ("Blackwell", "Blackwell Ultra")


def expert_cost(h100_us: float, blackwell_us: float | None = None) -> dict:
    """MOE_STACK's per-expert fields for overridden()."""
    return {"moe_expert_gemm_fixed_us": h100_us,
            **({} if blackwell_us is None else
               {"moe_expert_gemm_fixed_us_by_architecture": {a: blackwell_us for a in BLACKWELL_RECIPES}})}


def blackwell_moe_runs() -> list:
    """NeMo 25.11's MoE rows on Blackwell at the FP8 levels fitted on dense runs, with a layout the rules allow."""
    runs = nemo_more_rows(lambda row: row["container"] == "25.11" and row["precision"] == "FP8-MX")
    return [r for r in runs if is_moe(r) and r.predict() is not None]


def fit_expert_fixed(moe_runs: list, levels: dict, lo: float = 0.0, hi: float = 400.0,
                     fields=lambda c: expert_cost(c)) -> float:
    """The per-expert fixed cost (fields(c): MOE_STACK's fields at c us) minimising the squared log errors of the MoE
    runs, at the levels fitted on dense runs (golden section)."""
    def loss(c: float) -> float:
        with overridden(levels, {MOE_STACK: fields(c)}):
            return sum(math.log(r.figure(r.predict()) / r.published) ** 2 for r in moe_runs)

    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = loss(x1), loss(x2)
    for _ in range(25):
        if f1 < f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = loss(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = loss(x2)
    return round((a + b) / 2, 1)


def main() -> None:
    share = fit_async_tp()
    doc = fw.frameworks()
    public = public_runs()
    runs = public + mlperf_runs(covered=frozenset((g[0], g[2]) for g in map(group_of, public)))
    groups = defaultdict(list)
    for run in runs:
        groups[group_of(run)].append(run)
    fallback = fw.level_row(doc, doc.uncalibrated_fallback.framework, doc.uncalibrated_fallback.accelerator,
                            doc.uncalibrated_fallback.precision_class).value
    current = {g: (fw.level_row(doc, *g).value if fw.level_row(doc, *g) else fallback) for g in groups}
    basis = {}
    for g, rs in groups.items():
        dense = [r for r in rs if fits(r) and not is_moe(r)]
        basis[g] = dense or [r for r in rs if fits(r)]
    dense_groups = [g for g in groups if not any(is_moe(r) for r in basis[g])]
    stacks = {"pytorch_fsdp2": {"tp_overlap_share": share}}
    own, fitted = {}, {}
    with overridden(stack_fields=stacks):
        for g in dense_groups:                              # 1. levels on dense runs
            for r in basis[g]:
                own[id(r)] = own_level(r, g, current[g])
            fitted[g] = round(geo(own[id(r)] for r in basis[g]), 3)
    # 2. the per-expert fixed cost on NeMo's H100 MoE runs, whose levels the dense runs fixed
    moe_fit = [r for g in dense_groups for r in groups[g] if is_moe(r) and r.source == "nemo_25_11"]
    levels = {g: fitted[g] for g in dense_groups}
    expert_us = fit_expert_fixed(moe_fit, levels)
    stacks[MOE_STACK] = expert_cost(expert_us)
    print(f"{MOE_STACK} moe_expert_gemm_fixed_us {expert_us:g} fitted on {len(moe_fit)} runs: "
          + ", ".join(r.name for r in moe_fit))
    for r in moe_fit:
        others = [x for x in moe_fit if x is not r]
        c = fit_expert_fixed(others, levels)
        with overridden(levels, {**stacks, MOE_STACK: expert_cost(c)}):
            e = r.figure(r.predict()) / r.published - 1
        print(f"    leave-one-out: {r.name} with {c:g} us fitted on the others: error {e:+.1%}")
    # 2b. the same on NeMo's Blackwell presets (BLACKWELL_RECIPES), the H100 figure held
    blackwell_fit = blackwell_moe_runs()
    on_blackwell = lambda c: expert_cost(expert_us, c)
    blackwell_us = fit_expert_fixed(blackwell_fit, levels, fields=on_blackwell)
    stacks[MOE_STACK] = on_blackwell(blackwell_us)
    print(f"{MOE_STACK} moe_expert_gemm_fixed_us on {', '.join(BLACKWELL_RECIPES)} {blackwell_us:g} fitted on "
          f"{len(blackwell_fit)} runs: " + ", ".join(r.name for r in blackwell_fit))
    for r in blackwell_fit:
        with overridden(levels, {**stacks}):
            fitted_e = r.figure(r.predict()) / r.published - 1
        c = fit_expert_fixed([x for x in blackwell_fit if x is not r], levels, fields=on_blackwell)
        with overridden(levels, {**stacks, MOE_STACK: on_blackwell(c)}):
            e = r.figure(r.predict()) / r.published - 1
        print(f"    {r.name}: error {fitted_e:+.1%}; leave-one-out with {c:g} us fitted on the others: {e:+.1%}")
    lines, err, loo_err = [], defaultdict(list), defaultdict(list)
    with overridden(levels, stack_fields=stacks):
        for g in groups:                                    # 3. levels of the groups with MoE runs only
            if g not in fitted:
                for r in basis[g]:
                    own[id(r)] = own_level(r, g, current[g])
                fitted[g] = round(geo(own[id(r)] for r in basis[g]), 3)
        for g, rs in sorted(groups.items()):
            level = fitted[g]
            lines.append(f"{g[0]} x {g[1]} x {g[2]}: level {level:.3f} (was {current[g]:.3f}) fitted on "
                         f"{len(basis[g])} runs: {', '.join(sorted({SOURCE_NAMES[r.source] for r in basis[g]}))}")
            for r in rs:
                if id(r) not in own:
                    own[id(r)] = own_level(r, g, level)
                e = ratio_at(r, g, level) - 1
                others = [own[id(x)] for x in basis[g] if x is not r]
                loo = ratio_at(r, g, geo(others)) - 1 if others else None
                used = "fit" if r in basis[g] else ("shown" if r.notes else "validated")
                lines.append(f"    {r.name:<44} own level {own[id(r)]:.3f}  error {e:+6.1%}  leave-one-out "
                             + (f"{loo:+6.1%}" if loo is not None else "  none")
                             + f"  [{used}{'; ' + ', '.join(r.notes) if r.notes else ''}]")
                err[r.source].append(e)
                if loo is not None and r in basis[g]:
                    loo_err[r.source].append(loo)
    print("\n".join(lines))
    print("\nper source, at the fitted levels:")
    for source, es in err.items():
        print(f"  {SOURCE_NAMES[source]}: {summary(es)}; leave-one-out (fitted runs) {summary(loo_err[source])}")
    if "--write" in sys.argv:
        write({g: (fitted[g], basis[g]) for g in groups}, share, expert_us, blackwell_us, blackwell_fit)


def write(fitted: dict, share: float, expert_us: float, blackwell_us: float, blackwell_fit: list) -> None:
    data = json.loads(FRAMEWORKS_JSON.read_text())
    levels = []
    for (framework, acc, pclass), (value, basis) in sorted(fitted.items()):
        sources = sorted({SOURCE_NAMES[r.source] for r in basis})
        levels.append({"framework": framework, "accelerators": [acc], "precision_class": pclass, "value": value,
                       "fitted_on": f"{'; '.join(sources)}: {len(basis)} runs ({', '.join(r.name for r in basis)}), "
                                    + ("each with its published layout" if all(r.source != "mlperf" for r in basis)
                                       else "each with the search's best layout at its logged batch")
                                    + "; scripts/calibrate_sustained.py",
                       **({"moe_only": True} if all(is_moe(r) for r in basis) else {})})
    # parts with the same silicon as a fitted one keep its level, named as such
    same = {"A100-SXM4-40GB": ("A100-SXM4-80GB", "the same GA100 core and clocks"),
            "H200-SXM-141GB": ("H100-SXM5-80GB", "the same GH100 core, clocks and 700 W limit")}
    for part, (ref, why) in same.items():
        for lv in levels:
            if ref in lv["accelerators"]:
                lv["accelerators"].append(part)
                lv["fitted_on"] += f"; {part}: {why}"
    for lv in [lv for lv in levels if lv["value"] > 1.0]:
        print(f"not written: {lv['framework']} x {lv['accelerators'][0]} x {lv['precision_class']} level "
              f"{lv['value']} > 1 (faster than the isolated best kernels: the runs trained in a way the engine "
              "does not model, e.g. MaxText's int8 AQT where the store assumes bf16); it stays uncalibrated")
        levels.remove(lv)
    data["levels"] = levels
    for row in data["rows"]:
        if row["id"] == "pytorch_fsdp2":
            row["tp_overlap_share"] = share
        if row["moe_expert_kernels"] == "host_per_expert":   # measured on MOE_STACK only (each row's note)
            row["moe_expert_gemm_fixed_us"] = expert_us
        if row["id"] == MOE_STACK:            # written after moe_expert_note, the figure they qualify
            fields = {"moe_expert_gemm_fixed_us_by_architecture": {a: blackwell_us for a in BLACKWELL_RECIPES},
                      "moe_expert_by_architecture_note": (
                          "NeMo's Blackwell presets (Megatron-Bridge scripts/performance/configs) run the MoE layer "
                          "with CUDA graphs over the router and the MoE preprocessing and the HybridEP dispatcher, "
                          "where the H100 presets the figure above is fitted on run no CUDA graph; fitted by "
                          f"scripts/calibrate_sustained.py on NeMo 25.11's {len(blackwell_fit)} MoE rows on Blackwell "
                          "at the FP8 levels fitted on dense runs (tests/data/nemo-more-rows.json: "
                          f"{', '.join(r.name for r in blackwell_fit)})")}
            items = [(k, v) for k, v in row.items() if k not in fields]
            at = [k for k, _ in items].index("moe_expert_note") + 1
            row.clear()
            row.update(items[:at] + list(fields.items()) + items[at:])
        row["moe_fitted"] = row["id"] == MOE_STACK
    FRAMEWORKS_JSON.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {FRAMEWORKS_JSON}")


if __name__ == "__main__":
    main()
