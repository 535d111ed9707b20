"""The Benchmarks page's uploaded training runs: each run's measured step time against the planner's prediction, and
for every cluster an operator trusts, the figures and ranges before and after calibration (benchmarks_db/step_time.py),
computed as a background job (ui/background.py) so that the page never waits for a work slot."""
import pandas as pd
import streamlit as st

from benchmarks_db.step_time import runs_version
from engine.presentation.formatting import fmt_num
from ui import background, cached, components, escape, work_limits

UPLOAD_HINT = ("Upload a training log (Megatron-LM, TorchTitan, DeepSpeed or MaxText step lines of a short run of "
               "the current scenario's layout) in 'Upload results', or `python -m benchmarks_db ingest LOG --scenario "
               "SCENARIO.json`.")


def _range(b: dict | None, unit: str) -> str:
    if b is None:
        return "—"
    return f"{fmt_num(b['value'])} {unit} ({fmt_num(b['low'])}-{fmt_num(b['high'])})"


def show(viewer: str | None = None) -> None:
    """The runs `viewer` (the signed-on user, None for nobody) may see: shared ones and their own private ones."""
    st.subheader("Your training runs: predicted against measured")
    store = cached.store()
    version = runs_version(store)
    if version[0] == 0:                              # no run stored: nothing to predict, no work slot to wait for
        st.info(UPLOAD_HINT)
        return
    job = background.training_runs(store, viewer, version, awaited=components.awaited)
    if not job.wait(0.05):                           # the page goes on (its Upload tab included) while it runs
        st.info("Predicting the uploaded training runs (an estimate of each, in turn with other people's work); "
                "they appear here when done.")
        components.poll(job, "Training-run predictions")
        return
    try:
        df, calibrated = job.value()
    except work_limits.Busy as err:                  # refused: said so, and asked again on the next visit
        st.warning(str(err))
        return
    if df.empty:
        st.info(UPLOAD_HINT)
        return
    table = pd.DataFrame({
        "upload": df.filename, "accelerator": df.accelerator_id, "framework": df.framework, "GPUs": df.n_gpus,
        "measured s/step": df.measured_s, "measured 10th-90th %": [f"{a:.3g}-{b:.3g}" for a, b in zip(df.p10_s, df.p90_s)],
        "predicted s/step": df.predicted_s, "measured / predicted": df.ratio, "steps": df.n_samples,
        "trusted": df.trusted, "validation": df.validation, "not predicted because": df.problem.fillna("")})
    st.dataframe(escape.csv_safe(table), hide_index=True, key="training_runs_table",
                 column_config={"measured s/step": st.column_config.NumberColumn(format="%.3f"),
                                "predicted s/step": st.column_config.NumberColumn(format="%.3f"),
                                "measured / predicted": st.column_config.NumberColumn(format="%.2f")})
    st.caption("Measured: the median step time after the first 10 steps (warm-up). Predicted: the engine on the "
               "scenario stored with the log. Untrusted uploads are shown but change nothing until the operator "
               "trusts them (`python -m benchmarks_db trust SOURCE_ID`).")
    for row in calibrated:
        st.markdown(f"**{escape.md_escape(row['accelerator'])}, {escape.md_escape(row['framework'])}: calibrated** "
                    f"(level x {row['level_scale']:.3f} from {row['n_runs']} trusted run(s) on {row['n_systems']} "
                    "system(s); pick 'calibrated' on the Scenario page to use it)")
        f = row["figures"]
        st.dataframe(pd.DataFrame({
            "figure": ["step time", "training (compute days)"],
            "before: engine (published-run range)": [_range(f["step_time_s"]["before"], "s"),
                                                     _range(f["train_days"]["before"], "days")],
            "after: calibrated (measured range)": [_range(f["step_time_s"]["after"], "s"),
                                                   _range(f["train_days"]["after"], "days")]}),
            hide_index=True, key=f"calibrated_{row['accelerator']}_{row['framework']}")
