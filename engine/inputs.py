"""Reading a scenario from outside: the schema and the catalog (engine.scenario), the references to the price and
carbon tables (engine.economics), then the layout rules. Everything that takes input (the API, the command line,
the pages, saved scenarios) reads it through parse_scenario, so one set of checks and messages applies everywhere."""
from __future__ import annotations

from pydantic import ValidationError

from engine import json_input
from engine.catalog import load_catalog
from engine.economics.cost import price_problems
from engine.economics.energy import region_problem
from engine.physics import layout_rules
from engine.scenario import (Scenario, ScenarioError, SchemaError, catalog_problems, layout_problems,
                             raw_catalog_problems, scenario_stack, schema_problems, training_problems)


def parse_scenario(data: dict | str | bytes) -> Scenario:
    """Validate a scenario (dict or JSON text) against the schema, the catalog, the price and carbon tables and the
    layout rules; raise ScenarioError with every problem found."""
    if isinstance(data, (str, bytes)):
        try:
            data = json_input.loads(data)
        except json_input.JsonInputError as err:
            raise ScenarioError([("(scenario)", str(err))]) from None
    if not isinstance(data, dict):
        raise ScenarioError([("(scenario)", "a scenario is a JSON object with model, training, cluster and optionally layout")])
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as err:
        raise SchemaError(schema_problems(err) + raw_catalog_problems(data)) from None
    problems = catalog_problems(sc) + training_problems(sc)
    if sc.cluster.accelerator in load_catalog().accelerators:
        problems += economics_problems(sc)
    if not problems and sc.layout is not None:
        problems = layout_problems(sc, sc.layout) + stack_layout_problems(sc)
    if problems:
        raise ScenarioError(problems)
    return sc


def a2a_overlap_offered(sc: Scenario) -> bool:
    """Whether the scenario's layout may overlap the MoE all-to-all: its stack has the overlap and the layout rule
    (expert parallelism; no pipeline or an interleaved one) holds."""
    lay = sc.layout
    return (lay is not None and sc.arch.is_moe and scenario_stack(sc).moe_a2a_overlap
            and bool(layout_rules.a2a_overlap_allowed(lay.ep, lay.pp, lay.virtual_stages)))


def stack_layout_problems(sc: Scenario) -> list[tuple[str, str]]:
    """Layout settings the scenario's software stack (its vendor's default when unnamed) does not offer."""
    if not sc.layout.moe_a2a_overlap:
        return []
    stack = scenario_stack(sc)
    if stack.moe_a2a_overlap:
        return []
    return [("layout.moe_a2a_overlap", f"{stack.short_name} has no cross-micro-batch all-to-all overlap "
                                       f"({stack.moe_a2a_overlap_note}); turn it off or choose Megatron-Core")]


def economics_problems(sc: Scenario) -> list[tuple[str, str]]:
    """Site region and price references that the data files do not know."""
    problems = []
    if sc.site is not None and sc.site.region is not None and (msg := region_problem(sc.site.region)):
        problems.append(("site.region", msg))
    c = sc.cost
    if c is not None and c.basis == "on_prem" and c.price_usd_per_gpu_hour is not None:
        problems.append(("cost.price_usd_per_gpu_hour", "a cloud price does not apply when cost.basis is on_prem; "
                                                        "remove it or set cost.basis to cloud"))
    problems += price_problems(sc.cluster.accelerator, c)
    return problems
