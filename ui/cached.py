"""The process's store handle and the engine's calls cached for every session, keyed on the scenario's JSON: the
estimate, the layout choices, a layout for a scenario without one, the calibration from the store, the vendor
comparison and what fits instead of a layout that does not. The searches run in a work slot (ui/work_limits.py)."""
from __future__ import annotations

import json

import streamlit as st

from benchmarks_db.calibration import calibrated_cluster
from benchmarks_db.store import Store, open_store
from engine.catalog import load_catalog
from engine.presentation.edit import CALIBRATION_FIELDS, Edit, layout_choices, with_layout
from engine.planning.estimate import estimate
from engine.planning.alternatives import fitting_alternatives
from engine.planning.results import Comparison, Estimate, FitOption
from engine.planning.search import best_at, candidate_problems
from engine.planning.sizing import nearest_sizes
from engine.inputs import parse_scenario
from engine.scenario import PRECISION_DTYPE, Scenario, ScenarioError
from engine.planning.vendor import compare, rescore
from ui import work_limits
from ui.settings import load_settings
from ui.state import options, scenario, scenario_json, vendor_weights
from ui.work_limits import Busy


@st.cache_resource(show_spinner=False)
def store() -> Store:
    """The process's one store handle (each use takes its own cursor), read-only in a read-only deployment."""
    settings = load_settings()
    return open_store(settings.store_target, read_only=settings.read_only)


@st.cache_data(max_entries=512, show_spinner=False)
def estimate_of(scenario_json: str) -> Estimate:
    return estimate(parse_scenario(scenario_json))


@st.cache_data(max_entries=512, show_spinner=False)
def layout_choices_of(scenario_json: str) -> dict:
    return layout_choices(parse_scenario(scenario_json))


@st.cache_data(max_entries=32, show_spinner="Searching the best layout on every accelerator ...")
def comparison_of(scenario_json: str, question_json: str, calibrations_json: str,
                  efficiency: str = "tuned") -> Comparison:
    """engine.planning.vendor.compare for the scenario and the plan's question (PlannerOptions.question, as JSON)."""
    question = json.loads(question_json)
    if question["batch_range"] is not None:
        question["batch_range"] = tuple(question["batch_range"])
    with work_limits.slot("vendor comparison"):
        return compare(parse_scenario(scenario_json), calibrations=json.loads(calibrations_json),
                       efficiency=efficiency, **question)


@st.cache_data(max_entries=256, show_spinner="Choosing the fastest layout that fits ...")
def _layout_outcome(scenario_json: str) -> tuple[str | None, list[str], list[tuple[str, str]]]:
    """engine.presentation.edit.with_layout for a scenario without a layout, once per scenario for the whole process (every tab
    that opens the same link shares one search) and in a work slot: (scenario JSON with its layout or None, notes,
    problems). A search the engine refuses (ScenarioError, e.g. too many candidates) is cached as problems too;
    Busy is not cached."""
    sc = parse_scenario(scenario_json)
    if problems := candidate_problems(sc):       # refused by counting, before it queues for a slot
        return None, [], problems
    try:
        with work_limits.slot("layout search"):
            chosen = with_layout(sc)
    except ScenarioError as err:
        return None, [], err.problems
    return (chosen.scenario.model_dump_json() if chosen.scenario else None), chosen.notes, chosen.problems


def with_layout_once(sc: Scenario) -> Edit:
    """The scenario itself when it has a layout, else with the fastest layout that fits (cached per scenario)."""
    if sc.layout is not None:
        return Edit(sc)
    try:
        found, notes, problems = _layout_outcome(sc.model_dump_json())
    except Busy as err:
        return Edit(None, [("layout", str(err))])
    return Edit(parse_scenario(found), notes=notes) if found else Edit(None, problems)


@st.cache_data(ttl=60, show_spinner=False)
def calibration_of(accelerator: str, dtype: str, n_gpus: int, gpus_per_node: int, framework: str | None = None) -> dict:
    """benchmarks_db.calibration.calibrated_cluster for this placement and stack (trusted measurements in the store)."""
    return calibrated_cluster(store(), accelerator, dtype, n_gpus, gpus_per_node, framework)


def current_estimate() -> Estimate:
    return estimate_of(scenario_json())


def calibration_for(sc: Scenario, accelerator: str | None = None) -> dict:
    """Trusted measurements of an accelerator (the scenario's by default) for the scenario's precision and size."""
    return calibration_of(accelerator or sc.cluster.accelerator, PRECISION_DTYPE[sc.training.precision],
                          sc.cluster.n_gpus, sc.gpus_per_node, sc.training.framework)


def efficiency_source(sc: Scenario) -> str:
    """'datasheet' (no measured overrides), 'calibrated' (exactly the store's calibration) or 'custom'."""
    measured = {f: getattr(sc.cluster, f) for f in CALIBRATION_FIELDS if getattr(sc.cluster, f) is not None}
    if not measured:
        return "datasheet"
    return "calibrated" if measured == calibration_for(sc)["overrides"] else "custom"


def calibrations(sc: Scenario) -> dict[str, dict]:
    """The measured overrides per accelerator that the comparison and the plan both take: the scenario's own measured
    efficiencies go with its accelerator; when they are the store's calibration, every other accelerator gets its
    calibration too."""
    found = {}
    if efficiency_source(sc) == "calibrated":
        found = {acc: cal for acc in load_catalog().accelerators if (cal := calibration_for(sc, acc)["overrides"])}
    found[sc.cluster.accelerator] = {f: getattr(sc.cluster, f) for f in CALIBRATION_FIELDS
                                     if getattr(sc.cluster, f) is not None}
    return found


def current_comparison() -> Comparison:
    """engine.planning.vendor.compare of the scenario and the question (cached), re-scored with the page options'
    weights, with the scenario's calibrations."""
    sc = scenario()
    question = options().question(sc.training.global_batch_size)
    searched = comparison_of(scenario_json(), json.dumps(question, sort_keys=True),
                             json.dumps(calibrations(sc), sort_keys=True), options().efficiency)
    return rescore(searched, vendor_weights())       # weights only re-rank: no search reruns


@st.cache_data(max_entries=64, show_spinner="Looking for a layout that fits ...")
def what_fits_of(scenario_json: str) -> tuple[Estimate | None, list[dict], list[FitOption]]:
    """For a scenario whose layout does not fit: the fastest layout that fits on its cluster, else the nearest
    cluster sizes where one fits (engine.planning.sizing) and what would make the job fit
    (engine.planning.alternatives: LoRA, QLoRA, offload to a larger host, more GPUs)."""
    sc = parse_scenario(scenario_json)
    with work_limits.slot("layout search"):
        best = best_at(sc, sc.cluster.n_gpus)
        if best:
            return best, [], []
        return best, nearest_sizes(sc, sc.cluster.n_gpus), fitting_alternatives(sc)
