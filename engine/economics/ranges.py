"""Honest ranges around the engine's time-proportional figures (step time, days, GPU-hours, cost, energy, CO2): the
band the engine's measured error on published runs implies for the scenario's regime (data/accuracy.json, written by
scripts/calibrate_ranges.py), for a well-tuned stack or a typical one.

A regime is what the engine's error depends on (issue 21): the training method (pre-training, or a fine-tuning
method), the software stack, the accelerator family (the catalog's architecture), the precision class, dense or MoE,
how data parallelism holds the weights (replicated: ZeRO 0-2; sharded: ZeRO-3/FSDP) and the scale (one node of 8 or
fewer, up to 1,023 accelerators, 1,024 or more). Only runs on a fitted level (engine.frameworks: calibrated) set
centres; a method's runs never pool with another method's.

The centre of a regime (partial pooling down LEVELS, method -> stack -> stack x family -> x precision -> x model x
sharding -> x scale): at each level the mean log(published / predicted time) of the regime's runs there, each source
weighted once (a source's runs share its bias), shrunk toward the centre of the level above with weight
m / (m + KAPPA) for m sources (the level above counts as KAPPA sources). A level without runs stops the descent.
The spread (split conformal, one per support class, SUPPORT): how far runs landed from the centre fitted without
their own source (a jackknife+ over sources), |log ratio - centre|, with each run in the class its regime had without
that source: 'measured' (the stack has runs on the family), 'no family run' (the stack has runs of the method on
other families only), 'no stack run' (the method has runs, not of this stack; each calibrated run against the
centres fitted without every run of its stack and method, as a planner meets the class, where leaving its source out
makes a run stackless only if that source alone ran the stack) and 'uncalibrated' (the accelerator borrows another's
fitted level; its residual is from the engine's own figure). The class's spread is the
ceil(0.8 (n + 1))-th smallest of its n residuals, which bounds at least 80% of a new exchangeable run (10th-90th
percentile, symmetric in logs); a class is never narrower than a better-supported one, and a class with too few
residuals takes the widest. A MoE regime takes the widest band too ('no MoE run', moe_measured) unless MoE runs of
its method and stack on its family come from two sources or more: otherwise its MoE error was never measured out of
source. The widest band (the largest spread, around the engine's figure) is what an
uncalibrated accelerator and a method without published runs get. Every band contains the engine's own figure: the
range is printed beside that figure (and the deadline chance reads it as a percentile), so a band that excluded it
would contradict the figure it qualifies. scripts/calibrate_ranges.py checks the coverage by leaving one source out at
a time.

- tuned: the engine's figure, with its regime's band.
- typical: the tuned figure times the ratio published whole-run GPU-hours bore to the engine's (Llama 2), with the
  regime's band around it.
"""
from __future__ import annotations

import json
import math
import statistics
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from engine import frameworks
from engine.catalog import DATA_DIR, load_catalog
from engine.scenario import ScenarioError

EFFICIENCIES = ("tuned", "typical")
COVERAGE = (0.10, 0.90)          # the band: 10th to 90th percentile of published / predicted time
KAPPA = 1.0                      # the level above weighs as one source in a level's centre
DIMENSIONS = ("method", "framework", "family", "precision", "model", "sharding", "scale")
# coarsest first, each nested in the one before; each a tuple of the dimensions it keeps (the others are pooled)
LEVELS: tuple[tuple[str, ...], ...] = (
    ("method",),
    ("method", "framework"),
    ("method", "framework", "family"),
    ("method", "framework", "family", "precision"),
    ("method", "framework", "family", "precision", "model", "sharding"),
    DIMENSIONS,
)
# the support classes, best supported first: the deepest level with runs (by LEVELS index) that puts a regime in each
SUPPORT = ("measured", "no family run", "no stack run", "uncalibrated")
SCALES = ((8, "one node"), (1023, "9-1,023 accelerators"), (math.inf, "1,024+ accelerators"))
EXPLAIN = {
    "tuned": "A well-tuned stack: the engine's figure for the scenario's software stack run as its publishers run it; "
             "the range is what published runs of the regime took against the engine (10th-90th percentile, checked "
             "by leaving one source out).",
    "typical": "A typical stack: {factor:.2f}x the tuned figure, as Llama 2's published whole-run GPU-hours were, with "
               "the regime's range around it.",
}


class RegimeBand(BaseModel):
    """The band of a scenario's regime: low, median and high multiples of the engine's time (low <= 1 <= high), the
    deepest level with runs that set its centre and the runs there, its support class; measured False: the stack has no
    published run on the family, or the accelerator no fitted level (wider bands, measured for that position)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    regime: dict[str, str]
    measured: bool
    support: str
    level: str
    n_runs: int
    sources: list[str]
    low: float
    median: float
    high: float
    text: str


def scale_of(n_gpus: int) -> str:
    return next(name for limit, name in SCALES if n_gpus <= limit)


def regime_of(method: str, framework: str, accelerator: str, precision_class: str, moe: bool, zero_stage: int,
              n_gpus: int) -> dict[str, str]:
    """The regime of a run: training method, stack, accelerator family (catalog architecture), precision class,
    dense/MoE, data-parallel sharding and scale."""
    return {"method": method, "framework": framework, "family": load_catalog().accelerator(accelerator).architecture,
            "precision": precision_class, "model": "MoE" if moe else "dense",
            "sharding": "sharded" if zero_stage == 3 else "replicated", "scale": scale_of(n_gpus)}


def _centres(runs: list[dict]) -> dict[tuple, dict]:
    """Every (level, key) the calibrated runs reach: its runs, sources and partially pooled centre in logs (see the
    module docstring), keyed by (LEVELS index, key values)."""
    out: dict[tuple, dict] = {}
    for depth, level in enumerate(LEVELS):
        pools: dict[tuple, dict[str, list[float]]] = {}
        for r in runs:
            if r["calibrated"]:
                by_source = pools.setdefault(tuple(r[d] for d in level), {})
                by_source.setdefault(r["source"], []).append(math.log(r["ratio"]))
        for key, by_source in pools.items():
            m = len(by_source)
            mean = statistics.fmean(statistics.fmean(v) for v in by_source.values())
            parent = out[(depth - 1, key[:len(LEVELS[depth - 1])])] if depth else None
            centre = mean if parent is None else (m * mean + KAPPA * parent["centre"]) / (m + KAPPA)
            out[(depth, key)] = {"centre": centre, "n_runs": sum(len(v) for v in by_source.values()),
                                 "sources": sorted(by_source)}
    return out


def _deepest(centres: dict[tuple, dict], regime: dict[str, str]) -> tuple[int, dict] | None:
    """The deepest level of LEVELS whose pool holds the regime (every coarser one does too), or None."""
    found = None
    for depth, level in enumerate(LEVELS):
        pool = centres.get((depth, tuple(regime[d] for d in level)))
        if pool is None:
            break
        found = (depth, pool)
    return found


def _support(depth: int | None, calibrated: bool) -> str | None:
    """The support class of a regime whose deepest level with runs is depth (None: the method has none)."""
    if not calibrated:
        return "uncalibrated"
    return None if depth is None else SUPPORT[max(0, 2 - depth)]


def _conformal(values: list[float]) -> float | None:
    """The ceil(share (n + 1))-th smallest of values, share the band's central share (None: too few for it to bound
    that share of a new value)."""
    v, n = sorted(values), len(values)
    k = math.ceil(round((COVERAGE[1] - COVERAGE[0]) * (n + 1), 9))      # round: 0.8 * 5 is 4, not 4.0000001
    return None if k > n else v[k - 1]


def residuals(runs: list[dict]) -> dict[tuple[str, str], list[float]]:
    """Per training method and support class, |log(published / predicted) - centre| of every run against the centres
    fitted without its source, in the class its regime had without that source (uncalibrated: against the engine's own
    figure); 'no stack run' of every calibrated run against the centres fitted without its stack's runs of the
    method."""
    out: dict[tuple[str, str], list[float]] = {}
    for source in sorted({r["source"] for r in runs}):
        centres = _centres([r for r in runs if r["source"] != source])
        for r in (r for r in runs if r["source"] == source):
            found = _deepest(centres, r)
            cls = _support(None if found is None else found[0], r["calibrated"])
            if cls is not None and cls != "no stack run":
                centre = 0.0 if cls == "uncalibrated" else found[1]["centre"]
                out.setdefault((r["method"], cls), []).append(abs(math.log(r["ratio"]) - centre))
    # 'no stack run' as a planner meets it: each calibrated run against the centres fitted without every run of its
    # stack and method, whichever source published them (leaving its source out makes a run stackless only where
    # that source alone ran the stack)
    for method, framework in sorted({(r["method"], r["framework"]) for r in runs if r["calibrated"]}):
        centres = _centres([r for r in runs if (r["method"], r["framework"]) != (method, framework)])
        for r in runs:
            if (r["method"], r["framework"]) == (method, framework) and r["calibrated"]:
                found = _deepest(centres, r)
                if found is not None and _support(found[0], True) == "no stack run":
                    out.setdefault((method, "no stack run"), []).append(abs(math.log(r["ratio"]) - found[1]["centre"]))
    return out


def _spreads(res: dict[tuple[str, str], list[float]]) -> tuple[dict[str, dict[str, dict]], float]:
    """The spread of each method's support classes (see the module docstring) and the widest spread, in logs: the
    conformal quantile of the method's residuals in the class, else of the class's over every method (fewer than the
    quantile needs), never narrower than a better-supported class of the method. The widest is the largest of these
    and of the uncalibrated runs' over every method; uncalibrated regimes get it."""
    pooled = {c: [x for (_, k), v in res.items() if k == c for x in v] for c in SUPPORT}
    # an uncalibrated run's spread is the borrowed levels' over every method: what any borrowed level was off by
    calibrated = [v for (_, c), v in res.items() if c != "uncalibrated"]
    quantiles = [q for v in (*calibrated, *pooled.values()) if (q := _conformal(v)) is not None]
    if not quantiles:
        raise ValueError("no support class has enough published runs for a band")
    widest = max(quantiles)
    out = {}
    for method in sorted({m for m, _ in res}):
        out[method], floor = {}, 0.0
        for c in SUPPORT:
            own, every = res.get((method, c), []), pooled[c]
            q = widest if c == "uncalibrated" else next(
                (x for x in (_conformal(own), _conformal(every)) if x is not None), widest)
            basis = ("the largest spread measured" if c == "uncalibrated" else f"{len(own)} {method} runs"
                     if _conformal(own) is not None else f"{len(every)} runs of every method")
            floor = max(q, floor)
            out[method][c] = {"spread": floor, "factor": math.exp(floor), "basis": basis}
    return out, widest


def fit(runs: list[dict]) -> dict:
    """The spread of every method's support classes, the band of every (level, key) the calibrated runs reach (what a
    regime whose deepest level with runs is that one gets), and the widest band: runs are {source, method, framework,
    family, precision, model, sharding, scale, calibrated, ratio (published / predicted time)}."""
    spreads, widest_q = _spreads(residuals(runs))
    bands = []
    for (depth, key), pool in sorted(_centres(runs).items(), key=lambda kv: kv[0]):
        cls = _support(depth, True)
        q, c = spreads[key[0]][cls]["spread"], pool["centre"]
        bands.append({"level": list(LEVELS[depth]), "key": dict(zip(LEVELS[depth], key)), "support": cls,
                      "n_runs": pool["n_runs"], "sources": pool["sources"],
                      "low": math.exp(c - q), "median": math.exp(c), "high": math.exp(c + q)})
    widest = {"low": math.exp(-widest_q), "median": 1.0, "high": math.exp(widest_q), "n_runs": len(runs),
              "sources": sorted({r["source"] for r in runs}),
              "basis": f"{sum(not r['calibrated'] for r in runs)} runs on a borrowed level"}
    return {"kappa": KAPPA, "spreads": spreads, "bands": bands, "widest": widest}


METHOD_WORDS = {"pretrain": "pre-training", "full": "full fine-tuning", "lora": "LoRA fine-tuning",
                "qlora": "QLoRA fine-tuning"}


def _stack_name(framework: str) -> str:
    return frameworks.stack(framework).short_name if framework in frameworks.FRAMEWORKS else framework


def regime_words(regime: dict[str, str]) -> str:
    """A regime as a reader says it: 'pre-training on Megatron-Core / NeMo, Hopper, 8-bit, dense model, replicated
    data parallelism, 9-1,023 accelerators'."""
    stack = _stack_name(regime["framework"])
    precision = regime["precision"].replace("bit", "-bit")
    sharding = {"sharded": "sharded data parallelism (ZeRO-3/FSDP)"}.get(regime["sharding"],
                                                                         f"{regime['sharding']} data parallelism")
    return (f"{METHOD_WORDS.get(regime['method'], regime['method'])} on {stack}, {regime['family']}, {precision}, "
            f"{regime['model']} model, {sharding}, {regime['scale']}")


def _level_name(level) -> str:
    return " x ".join(d for d in level if d != "method") or "every run of the method"


def moe_sources(fitted: dict, regime: dict[str, str]) -> set[str]:
    """The sources of the calibrated MoE runs of the regime's method and stack on its accelerator family."""
    return {s for b in fitted["bands"] if b["key"].get("model") == "MoE"
            and all(b["key"].get(d) == regime[d] for d in ("method", "framework", "family")) for s in b["sources"]}


def moe_measured(fitted: dict, regime: dict[str, str]) -> bool:
    """False for a MoE regime unless MoE runs of its method and stack on its accelerator family come from two sources
    or more: with one, leaving it out leaves no MoE run, so the MoE-only physics (the per-expert cost fitted on NeMo's
    H100 runs, the all-to-all) was never measured out of source, and a dense regime's spread says nothing of it
    (NeMo's Blackwell MoE rows lay at 0.43-1.36x the engine before their recipes' per-expert cost was fitted on
    them, docs/validation.md)."""
    return regime["model"] != "MoE" or len(moe_sources(fitted, regime)) >= 2


def band_from(fitted: dict, regime: dict[str, str], calibrated: bool = True) -> RegimeBand:
    """The band of a regime from a fit (fit): the band of the deepest level with runs that holds it, or the widest
    band (an uncalibrated accelerator, a method without published runs, a MoE model where the stack has no MoE run
    on the family: moe_measured), saying which and why. The band is widened to contain the engine's figure (1.0)."""
    words = regime_words(regime)
    method = METHOD_WORDS.get(regime["method"], regime["method"])
    stack = _stack_name(regime["framework"])
    found = None
    moe_ok = moe_measured(fitted, regime)
    if calibrated and moe_ok:
        for b in fitted["bands"]:
            deeper = found is None or len(b["level"]) > len(found["level"])
            if deeper and b["key"] == {d: regime[d] for d in b["level"]}:
                found = b
    if found is not None:
        cls, name = found["support"], _level_name(found["level"])
        spread = fitted["spreads"][regime["method"]][cls]
        why = {"measured": "",
               "no family run": f"no published {method} run of {stack} on {regime['family']}; ",
               "no stack run": f"no published {method} run of {stack}; "}[cls]
        pooled = [d for d in DIMENSIONS if d not in found["level"]]
        n_sources = len(found["sources"])
        text = (f"{words}: {why}{found['low']:.2f}-{found['high']:.2f}x the engine's time, from published runs "
                f"(centre {found['median']:.2f}x from {found['n_runs']} runs of {n_sources} "
                f"source{'s' if n_sources > 1 else ''} at "
                f"level {name}" + (f", {', '.join(pooled)} pooled" if pooled else "") + ", shrunk toward the levels "
                f"above; spread x/{spread['factor']:.2f}, the 10th-90th percentile of how far {spread['basis']} "
                f"{'' if cls == 'measured' else f'in the same position ({cls}) '}landed with their source left out)")
        b = found
    else:
        b, name = fitted["widest"], "widest"
        if not calibrated:
            cls = "uncalibrated"
            reason = "the accelerator has no level fitted for this stack and precision (uncalibrated)"
        elif not moe_ok:
            sources = sorted(moe_sources(fitted, regime))
            cls, reason = "no MoE run", (
                f"published {method} runs of MoE models on {stack} and {regime['family']} come from one source "
                f"({sources[0]}), so their error was never measured with it left out" if sources else
                f"no published {method} run of a MoE model on {stack} and {regime['family']} (the per-expert cost "
                "and the all-to-all were measured on another stack or accelerator)")
        else:
            cls, reason = "no data", f"no published {method} run measures the engine's error"
        text = (f"{words}: {reason}; the widest band, {b['low']:.2f}-{b['high']:.2f}x the engine's time (what runs "
                f"on a borrowed level took: the largest spread measured, {fitted['widest']['basis']})")
    return RegimeBand(regime=regime, measured=found is not None and cls == "measured", support=cls, level=name,
                      n_runs=b["n_runs"], sources=b["sources"], low=min(b["low"], 1.0), median=b["median"],
                      high=max(b["high"], 1.0), text=text)


def coverage_interval(inside: int, n: int, level: float = 0.90) -> tuple[float, float]:
    """The Clopper-Pearson interval (at level) of a coverage of inside out of n runs, how far a band's true coverage
    may be from what n runs showed: its ends are the shares p at which the binomial chance of inside or more (low end)
    or of inside or fewer (high end) is (1 - level) / 2, found by bisection on the exact binomial tail."""
    tail = (1 - level) / 2
    at_most = lambda p: sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(inside + 1))

    def solve(f) -> float:                                 # f increases with p and crosses 0 once in [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if inside == 0 else solve(lambda p: (1 - at_most(p) + math.comb(n, inside) * p ** inside
                                                   * (1 - p) ** (n - inside)) - tail)
    high = 1.0 if inside == n else solve(lambda p: tail - at_most(p))
    return low, high


@lru_cache(maxsize=1)
def accuracy() -> dict:
    return json.loads((DATA_DIR / "accuracy.json").read_text())


@lru_cache(maxsize=256)
def _regime_band(items: tuple, calibrated: bool) -> RegimeBand:
    return band_from(accuracy()["fit"], dict(items), calibrated)


def regime_band(regime: dict[str, str], calibrated: bool = True) -> RegimeBand:
    """The band of a regime from the measured fit (data/accuracy.json)."""
    return _regime_band(tuple(regime.items()), calibrated)


def widest() -> RegimeBand:
    """The band of a regime without data (what an unknown stack or accelerator gets)."""
    b = accuracy()["fit"]["widest"]
    return RegimeBand(regime={}, measured=False, support="no data", level="widest", n_runs=b["n_runs"],
                      sources=b["sources"],
                      low=min(b["low"], 1.0), median=1.0, high=max(b["high"], 1.0),
                      text=f"no regime given: the widest band, {b['low']:.2f}-{b['high']:.2f}x the engine's time")


def factor(efficiency: str) -> float:
    """Multiplier on time-proportional figures for the chosen stack."""
    if efficiency not in EFFICIENCIES:
        raise ScenarioError([("efficiency", f"choose one of {', '.join(EFFICIENCIES)}")])
    return 1.0 if efficiency == "tuned" else accuracy()["typical"]["factor"]


def band(value: float | None, rb: RegimeBand, efficiency: str = "tuned") -> dict | None:
    """{"value", "low", "high"} for a time-proportional figure the engine computed (value), with its regime's band
    (rb) for the chosen stack."""
    if value is None:
        return None
    mid = value * factor(efficiency)
    return {"value": mid, "low": mid * rb.low, "high": mid * rb.high}


def explain(efficiency: str, rb: RegimeBand | None = None) -> str:
    """What the chosen stack means and, given the regime's band, where its range comes from."""
    out = EXPLAIN[efficiency].format(factor=accuracy()["typical"]["factor"])
    return out if rb is None else f"{out} {rb.text}."


CHANCES = (0.5, 0.9)              # the chances a target may be met with (quantile): the band's median to its 90th percentile


def _percentiles(rb: RegimeBand) -> list[tuple[float, float]]:
    """(multiple of the engine's figure, percentile) at the band's low, median and high: the 10th, 50th and 90th
    percentile of published/predicted time in the regime."""
    return [(rb.low, 0.1), (min(max(rb.median, rb.low), rb.high), 0.5), (rb.high, 0.9)]


def check_chance(chance: float | None, field: str = "confidence") -> None:
    """A chance of meeting a target must be within CHANCES (None: the engine's own figures); else ScenarioError on
    `field` (the option's name where it was given)."""
    if chance is not None and not CHANCES[0] <= chance <= CHANCES[1]:
        raise ScenarioError([(field, f"a chance from {CHANCES[0]:g} to {CHANCES[1]:g} of meeting the target (e.g. "
                                     "0.9; the ranges are the 10th-90th percentile of published runs), or none for "
                                     "the engine's own figures")])


def quantile(rb: RegimeBand, chance: float) -> float:
    """The multiple of the engine's time that a run of the regime comes in at or under with this chance (CHANCES),
    linearly between the band's 10th, 50th and 90th percentiles: the inverse of chance_within."""
    check_chance(chance)
    points = _percentiles(rb)
    (x0, p0), (x1, p1) = next((a, b) for a, b in zip(points, points[1:]) if a[1] <= chance <= b[1])
    return x0 + (x1 - x0) * (chance - p0) / (p1 - p0)


def chance_within(value: float, limit: float, rb: RegimeBand, efficiency: str = "tuned") -> dict:
    """The chance that a time-proportional figure the engine computed (value) comes in at or under limit, read off
    its regime's band (low, median, high as the 10th, 50th and 90th percentile), linearly between them:
    {"chance": 0.1-0.9, or None outside the band, "text"}."""
    scale = value * factor(efficiency)
    points = [(scale * x, p) for x, p in _percentiles(rb)]
    if limit < points[0][0]:
        return {"chance": None, "text": "under 10%"}
    if limit >= points[-1][0]:
        return {"chance": None, "text": "over 90%"}
    (x0, p0), (x1, p1) = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= limit < b[0])
    chance = p0 if x1 == x0 else p0 + (p1 - p0) * (limit - x0) / (x1 - x0)
    return {"chance": chance, "text": f"about {chance:.0%}"}
