"""Plausibility warnings: a scenario the engine can compute but a planner most likely did not mean (a sequence of one
token, fewer tokens than parameters, a run of ten years), and an accelerator known only from its vendor's announcement.
Each warning says what looks wrong and what is usual."""
from __future__ import annotations

from engine import frameworks
from engine.catalog import load_catalog
from engine.physics.memory import headroom_fraction
from engine.physics.model import shape_of
from engine.planning.results import Estimate
from engine.scenario import Scenario

MIN_SEQ_LEN = 128                 # pre-training sequences are 2k-8k tokens (GPT-3 2,048; Llama 3 8,192)
CHINCHILLA_TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022: compute-optimal training uses ~20 tokens per parameter
LONG_RUN_DAYS = 365.0
MAX_SANE_DAYS = 3650.0


def warnings_for(sc: Scenario, estimate: Estimate | None = None) -> list[str]:
    """What looks implausible in this scenario (and, given its estimate, in its result)."""
    out = []
    announced = load_catalog().accelerator(sc.cluster.accelerator).status_note
    if announced:
        out.append(announced + ".")
    tr = sc.training
    params = shape_of(sc.arch).total_params()
    if tr.seq_len < MIN_SEQ_LEN:
        out.append(f"Sequence length {tr.seq_len} is unusually short: pre-training uses 2,048-8,192 tokens per "
                   "sequence, and every step's fixed costs are paid for very few tokens.")
    if tr.trained_tokens < params and not tr.fine_tune:     # a fine-tune's dataset is small by nature
        out.append(f"{tr.trained_tokens:.3g} tokens is fewer than the model's {params:.3g} parameters: compute-optimal "
                   f"training uses about {CHINCHILLA_TOKENS_PER_PARAM} tokens per parameter (Hoffmann et al. 2022); "
                   "check the token count's units.")
    if tr.global_batch_size * tr.seq_len > 128e6:
        out.append(f"A global batch of {tr.global_batch_size * tr.seq_len / 1e6:,.0f}M tokens is larger than any "
                   "published pre-training run (Llama 3 405B: 16M); convergence at this batch is unproven.")
    vendor = load_catalog().accelerator(sc.cluster.accelerator).vendor
    for warning in (frameworks.not_run_on(sc.training.framework, vendor), calibration_warning(sc)):
        if warning:
            out.append(warning[0].upper() + warning[1:] + ("" if warning.endswith(".") else "."))
    if estimate is not None:
        memory = memory_headroom_warning(sc, estimate)
        if memory:
            out.append(memory)
        days = estimate.wall_days                     # None: it never finishes, which its reliability block says
        if days is not None and days > MAX_SANE_DAYS:
            out.append(f"The run would take {days / 365:,.0f} years: add accelerators, or check the token count.")
        elif days is not None and days > LONG_RUN_DAYS:
            out.append(f"The run would take {days:,.0f} days, longer than a year: hardware generations change "
                       "faster than that; a larger cluster or a shorter run is usual.")
    return out


def calibration_warning(sc: Scenario) -> str | None:
    """The one rule for an accelerator without public calibration for the scenario's stack and precision
    (engine.frameworks.resolve): say so, and which level stands in for it."""
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    fw = frameworks.resolve(sc.training.framework, acc.vendor, acc.id, sc.training.precision)
    if fw.calibrated:
        return None
    return (f"{acc.id} is not calibrated for {fw.stack.id} at {sc.training.precision}: no public per-step run of "
            f"this stack, accelerator and precision was fitted, so the time uses {fw.stand_in} ({fw.level:g}) and "
            "can be further off than the ranges of calibrated accelerators say (its range is the widest).")


def memory_headroom_warning(sc: Scenario, estimate: Estimate) -> str | None:
    """A layout that fits but uses the memory the recommendations keep free (engine.physics.memory.headroom_fraction):
    estimated all the same, with what it uses and what is usual."""
    if not estimate.fits:                                               # not fitting is said elsewhere
        return None
    total, capacity = estimate.memory_gib.total, estimate.memory_capacity_gib
    h = headroom_fraction(sc.training)
    if total <= (1 - h) * capacity:
        return None
    return (f"This layout uses {total:.1f} of {capacity:.1f} GiB per accelerator: within the {h:.1%} headroom kept for "
            f"the allocator's reserve and transient peaks (recommended layouts stay under {(1 - h) * capacity:.1f} GiB). "
            "It may run out of memory in practice; more recompute, a higher ZeRO stage or more model parallelism "
            "leaves room.")
