"""LLM training capacity planner: the estimation engine.

Public API (engine/api.py): load, estimate, explain, search, compare, plan, and the Scenario model with typed results
(Estimate, SearchResult, Comparison, Plan). The modules underneath are the physics (model, memory, kernels, compute,
comm, schedule, steptime, flops), the planning (search, sizing, plan, vendor) and the economics (cost, energy,
goodput, whole_run, ranges).
"""
from __future__ import annotations

__all__ = ["Scenario", "ScenarioError", "load", "estimate", "explain", "search", "compare", "plan", "export_config", "as_dict",
           "Estimate", "SearchResult", "ClusterSearch", "Comparison", "VendorRow", "Plan", "PlanOption", "Alternative"]


def __getattr__(name: str):
    # imported on first use, so `import engine.catalog` and the command line do not load the whole API
    if name in ("Scenario", "ScenarioError"):
        from engine import scenario
        return getattr(scenario, name)
    if name in __all__:
        from engine import api
        return getattr(api, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
