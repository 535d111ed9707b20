"""The manager's answer at the top of the Scenario page: a deadline, a budget and/or GPU-hours in, on at most so many
accelerators (what one has), with the vendor, the software stack and an optional range of global batches; the
cluster in whole nodes, wall days, cost, energy and
CO2 with their ranges, the layout in plain words and the nearest alternatives out. engine.planning.plan runs in the
background (ui/background.py), once per question for the whole server, so no page rerun waits for it."""
from __future__ import annotations

import json

import streamlit as st
from pydantic import ValidationError

from engine.catalog import load_catalog
from engine.economics import ranges
from engine.planning.plan import plan
from engine.planning.results import Plan
from engine.presentation.answer import (alternative_rows, answer_figures, answer_scenario, job_headline, lever_rows,
                                        option_rows, stack_text)
from engine.presentation.edit import Edit, layout_words
from engine.presentation.share import PlannerOptions
from engine.inputs import parse_scenario
from engine.scenario import Scenario, ScenarioError
from ui import background, binding, cached, components, escape, state
from ui.work_limits import Busy

TARGETS = {"deadline_days": "Deadline (days)", "budget_usd": "Budget (USD)", "gpu_hour_budget": "GPU-hours"}
TARGET_HELP = {"deadline_days": "The cheapest cluster that trains within this many days (wall clock).",
               "budget_usd": "Without a deadline: the fastest cluster that costs at most this much; with one, the "
                             "cheapest that meets both. Only a priced accelerator can be within a budget.",
               "gpu_hour_budget": "An allocation: GPUs x wall-clock hours of the whole run, at most this many."}
TARGET_STEP = {"deadline_days": 1.0, "budget_usd": 1_000_000.0, "gpu_hour_budget": 100_000.0}
TOGETHER = "Set one or several: the answer meets them all."
TARGET_HINT = {"deadline_days": "e.g. 60", "budget_usd": "e.g. 10000000", "gpu_hour_budget": "e.g. 2000000"}
MAX_GPUS_LABEL = "At most (accelerators)"
STACKS = {"tuned": "Well tuned", "typical": "Typical"}
ESTIMATE = "estimate"             # the chance selector's value for the engine's own figures (None in PlannerOptions:
#                                  a selectbox shows None as no choice)
CHANCE_CHOICES = {ESTIMATE: "on the estimate", 0.5: "50% (its range's middle)", 0.8: "80%", 0.9: "90% (its range's top)"}
CHANCE_LABEL = "Chance of meeting it"
LABELS = {**TARGETS, "max_gpus": MAX_GPUS_LABEL, "confidence": CHANCE_LABEL}
ASK = "ask:"                      # keys of the question's widgets
WHERE = "options.answer"          # where refused questions are shown


def target(opts: PlannerOptions) -> dict[str, float]:
    """The targets set in the options (a deadline, a money budget, a GPU-hour budget; several are met together)."""
    return {k: getattr(opts, k) for k in TARGETS if getattr(opts, k) is not None}


def planning_scenario(sc: Scenario) -> str:
    """What the plan depends on: the scenario without its layout and cluster size (the plan lays out and sizes every
    accelerator itself, from one node up; the cluster's own settings, such as measured efficiencies and host memory,
    stay), as JSON; equal questions share one job."""
    data = sc.model_dump(mode="json", exclude_none=True)
    data.pop("layout", None)
    data["cluster"]["n_gpus"] = sc.gpus_per_node
    return parse_scenario(data).model_dump_json()


def _plan(scenario_json: str, targets: tuple, vendor: str, efficiency: str, batches, max_gpus, calibrations_json: str,
          confidence: float | None, progress) -> Plan:
    return plan(parse_scenario(scenario_json), **dict(targets), vendor=vendor, efficiency=efficiency,
                batch_range=batches, max_gpus=max_gpus, calibrations=json.loads(calibrations_json),
                confidence=confidence, progress=progress)


def current_job(sc: Scenario, opts: PlannerOptions) -> background.Job | None:
    """The background job answering the options' question for this scenario (started if needed); None without a
    target."""
    targets = target(opts)
    if not targets:
        return None
    names = {"deadline_days": "deadline_days", "budget_usd": "budget_usd", "gpu_hour_budget": "gpu_hours"}
    args = (planning_scenario(sc), tuple(sorted((names[k], v) for k, v in targets.items())), opts.vendor,
            opts.efficiency, opts.question(sc.training.global_batch_size)["batch_range"], opts.max_gpus,
            json.dumps(cached.calibrations(sc), sort_keys=True), opts.confidence)
    return background.job(("plan", *args), "answer", _plan, *args, progress=True, awaited=components.awaited)


def _vendors() -> list[str]:
    return sorted({a.vendor for a in load_catalog().accelerators.values()})


def _seed(opts: PlannerOptions) -> None:
    ss = st.session_state
    if ASK + "vendor" in ss:
        return
    for name in (*TARGETS, "max_gpus", "vendor", "efficiency", "batch_min", "batch_max"):
        ss[ASK + name] = getattr(opts, name)
    ss[ASK + "confidence"] = ESTIMATE if opts.confidence is None else opts.confidence


def _asked() -> None:
    """The question's form was sent: its answer settings become page options (part of the link)."""
    ss = st.session_state
    ss[state.PROBLEMS].pop(WHERE, None)
    gbs = state.scenario().training.global_batch_size
    lo, hi = ss[ASK + "batch_min"], ss[ASK + "batch_max"]
    if (lo is not None and lo > gbs) or (hi is not None and hi < gbs):
        ss[state.PROBLEMS][WHERE] = [
            f"The accepted global batch range must include the scenario's {gbs:,} sequences (tokens stay fixed, the "
            f"batch may grow for larger clusters): for example {min(lo or gbs, gbs):,} to {max(hi or gbs, gbs * 4):,}."]
        return
    changes = {k: ss[ASK + k] or None for k in TARGETS}
    if ss[ASK + "max_gpus"] and not any(changes.values()):
        ss[state.PROBLEMS][WHERE] = [
            f"At most {ss[ASK + 'max_gpus']:,} accelerators limits a question: give a deadline, a budget or GPU-hours "
            "too (the answer is then the cheapest or the fastest cluster of at most that many)."]
        return
    changes.update(max_gpus=ss[ASK + "max_gpus"], vendor=ss[ASK + "vendor"], efficiency=ss[ASK + "efficiency"],
                   batch_min=lo, batch_max=hi,
                   confidence=None if ss[ASK + "confidence"] == ESTIMATE else ss[ASK + "confidence"])
    try:
        new = PlannerOptions.model_validate({**state.options().model_dump(), **changes})
    except ValidationError as err:
        ss[state.PROBLEMS][WHERE] = [f"{LABELS.get(e['loc'][0], e['loc'][0])}: {e['msg']}"
                                      for e in err.errors(include_url=False, include_input=False)]
        return
    ss[state.OPTIONS] = new


def _use(result: Plan) -> None:
    sc = answer_scenario(state.scenario(), result.answer)
    if state.commit(Edit(sc)):
        st.session_state[state.NOTES] = [f"The scenario is now the answer: {job_headline(sc, result)} Every page "
                                         "shows it."]


def _follow(opts: PlannerOptions) -> None:
    """Options changed outside the question's form (a saved scenario loaded, a link opened): its widgets are seeded
    from them again, so the software stack shown is the one the answer uses (issue 19: 'Well tuned' was shown while a
    typical stack was in effect)."""
    ss = st.session_state
    if ss.get(ASK + "from") not in (None, opts):
        for key in [k for k in ss if k.startswith(ASK) and k != ASK + "from"]:
            del ss[key]
    ss[ASK + "from"] = opts


def show(sc: Scenario, opts: PlannerOptions) -> None:
    """The question and, once worked out, its answer."""
    _follow(opts)
    _seed(opts)
    with st.container(border=True):
        st.subheader("How many accelerators, how long, at what cost?")
        with st.form("ask", border=False):
            cols = st.columns(4, vertical_alignment="bottom")
            for col, (name, label) in zip(cols, TARGETS.items()):
                col.number_input(label, key=ASK + name, min_value=0.0, step=TARGET_STEP[name], format="%g",
                                 placeholder=TARGET_HINT[name], help=f"{TARGET_HELP[name]} {TOGETHER}")
            cols[3].number_input(MAX_GPUS_LABEL, key=ASK + "max_gpus", min_value=1, step=8, placeholder="any number",
                                 help="What you have: the answer uses at most this many accelerators (with Vendor set "
                                      "to 'this accelerator', of the scenario's kind), with the deadline, budget and "
                                      "GPU-hours above.")
            cols = st.columns(4, vertical_alignment="bottom")
            cols[0].selectbox("Vendor", ["any", "same", *_vendors()], key=ASK + "vendor",
                              format_func=lambda v: {"any": "any", "same": "this accelerator"}.get(v, v),
                              help="Which accelerators the answer may use: any, only the scenario's accelerator, or one "
                                   "vendor's.")
            cols[1].selectbox("Stack tuning", list(STACKS), key=ASK + "efficiency", format_func=STACKS.get,
                              help=" ".join(f"{STACKS[k]}: {ranges.explain(k)}" for k in STACKS))
            cols[2].number_input("Batch from", key=ASK + "batch_min", min_value=1, step=1, placeholder="as set",
                                 help="Optional: the smallest global batch (sequences) you accept; tokens stay fixed.")
            cols[3].number_input("Batch to", key=ASK + "batch_max", min_value=1, step=1, placeholder="as set",
                                 help="Optional: the largest global batch (sequences) you accept; larger clusters "
                                      "need larger batches to keep every accelerator busy.")
            cols = st.columns(4, vertical_alignment="bottom")
            chances = [ESTIMATE, *sorted({*CHANCE_CHOICES, opts.confidence} - {ESTIMATE, None})]   # a link: any 0.5-0.9
            cols[0].selectbox(CHANCE_LABEL, chances, key=ASK + "confidence",
                              format_func=lambda v: CHANCE_CHOICES.get(v) or f"{v:.0%}",
                              help="How sure the answer must be to meet the target: on the engine's own figures, or "
                                   "with this chance, read off each accelerator's range (what published runs of its "
                                   "regime took against the engine). An accelerator whose figures are less certain "
                                   "(an uncalibrated one has the widest range) then needs more room to meet it.")
            cols[1].form_submit_button("Answer", type="primary", on_click=_asked)
        binding.field_problems(WHERE)
        st.caption(ranges.explain(opts.efficiency))
        job = current_job(sc, opts)
        if job is None:
            st.caption("Give a deadline, a budget or GPU-hours (one or several, and optionally the most accelerators "
                       "you have) and press **Answer**: every accelerator is sized for it, and the cheapest that "
                       "meets a deadline (the fastest within a budget) is the answer.")
            return
        if not job.wait(0.05):
            components.poll(job, 'Working out the answer')
            return
        try:
            result = job.value()
        except ScenarioError as err:
            st.error("This question cannot be answered: " + escape.problems_text(err.problems))
            return
        except Busy as err:
            st.warning(str(err))
            return
        _draw(sc, result)


def _draw(sc: Scenario, result: Plan) -> None:
    answer = result.answer
    if answer is None:
        st.warning(escape.md_escape(result.reason[0].upper() + result.reason[1:] + "."))
        levers = lever_rows(result)
        if levers:
            st.markdown("**What would make the budget work**\n" + "\n".join(
                f"- {escape.md_escape(r['what it takes'])}" for r in levers))
        _options(result)
        return
    st.success(escape.md_escape(job_headline(sc, result)))
    components.show_figures(answer_figures(answer), width=150)
    st.caption(escape.md_escape(f"Ranges: {answer.estimate.time_range.text}."))    # the answer's own regime
    if answer.deadline_chance and result.confidence is None:
        st.caption(f"To size every option for the top of its range instead, set **{CHANCE_LABEL}** to 90%.")
    st.markdown("**Software stack:** " + escape.md_escape(stack_text(answer.stack)))
    st.markdown("**Layout:** " + escape.md_escape(layout_words(answer.layout.model_dump(), answer.gpus_per_node)))
    st.markdown("**Nearest alternatives**\n" + "\n".join(
        f"- {escape.md_escape(r['alternative'])}: {escape.md_escape(r['what it takes'])}"
        for r in alternative_rows(result)))
    applied = answer_scenario(sc, answer)
    if applied == sc:
        st.caption("The scenario is this answer: every page shows it.")
    else:
        st.button("Use this answer in the scenario", on_click=_use, args=(result,),
                  help="Sets the accelerator, cluster size, batch and layout of the scenario to the answer's, so the "
                       "other pages and the Summary report show it.")
    _options(result)


def _options(result: Plan) -> None:
    with st.expander(f"Every accelerator sized {result.target}"):
        # sized to fit the question's box on a laptop's 1,280 px page: names wrap in rows tall enough for the grid
        # to wrap them (above 64 px); vendor and nodes are in the name and the GPU count (and the toolbar); the
        # notes are sentences, listed under the table
        rows = option_rows(result)
        components.table(rows, hide_index=True, key="answer_options", row_height=66,
                         column_order=["accelerator", "meets the target", "GPUs", "days", "cost USD", "energy MWh",
                                       "CO2 t"],
                         column_config={"accelerator": st.column_config.TextColumn(width=200, pinned=True),
                                        "meets the target": st.column_config.TextColumn("meets", width=60),
                                        "GPUs": st.column_config.NumberColumn(width=60),
                                        "days": st.column_config.NumberColumn(format="%.1f", width=60),
                                        "cost USD": st.column_config.NumberColumn(format="dollar"),
                                        "energy MWh": st.column_config.NumberColumn(format="%.0f"),
                                        "CO2 t": st.column_config.NumberColumn(format="%.0f")})
        notes = [r for r in rows if r["note"]]
        if notes:
            st.markdown("\n".join(f"- **{escape.md_escape(r['accelerator'])}**: {escape.md_escape(r['note'])}"
                                   for r in notes))
