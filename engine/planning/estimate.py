"""One scenario's estimate: its layout's memory, step time, throughput, days, cost, energy and CO2, read from the same
arrays the layout search ranks (engine.planning.evaluation), with the whole run's phases searched on its cluster."""
from __future__ import annotations

from engine.physics.layouts import Layouts
from engine.physics.memory import model_state_text
from engine.planning.evaluation import evaluate, row
from engine.planning.results import Estimate
from engine.planning.search import context
from engine.planning.sizing import nearest_fit
from engine.planning.sanity import warnings_for
from engine.scenario import Scenario, ScenarioError


def estimate(sc: Scenario) -> Estimate:
    """Full estimate of a scenario with a layout. A layout that does not fit has no days, GPU-hours, cost, energy or
    CO2: `problem` says why and `nearest_fit` names the fastest layout that fits (on this cluster, else the nearest
    size where one does)."""
    if sc.layout is None:
        raise ScenarioError([("layout", "a layout is needed for an estimate; run the layout search to find one")])
    ctx = context(sc)
    lay = Layouts.of([sc.layout])
    ev = evaluate(ctx, lay)
    est = row(ctx, ev, lay, 0, nearest_fit=None if ev["fits"][0] else nearest_fit(sc),
              assumptions={**ctx.hw.provenance, "attention": sc.training.attention,
                           "gradients": model_state_text(sc.training)})
    return est.model_copy(update={"warnings": warnings_for(sc, est if est.fits else None)})  # plausibility, headroom
