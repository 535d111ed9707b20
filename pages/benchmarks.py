"""Benchmarks: published and uploaded results (MLPerf Training, microbenchmarks), system comparisons, measured against
datasheet, the engine's predictions against MLPerf, and the upload of new result files."""
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from benchmarks_db import queries, trust
from benchmarks_db.ingest import Uploader, delete_upload, ingest_bytes
from engine.catalog import load_catalog
from ui import background, cached, charts, components, escape, state, training_runs, work_limits
from ui.settings import load_settings
from ui.work_limits import Busy

STORE_TTL_S = 60             # other sessions' uploads show up within a minute; this session's at once
UPLOAD, SUBMITTER, UPLOAD_ACCEL, LAST_INGEST = "bench_upload", "bench_submitter", "bench_accelerator", "bench_ingest"
UPLOAD_VISIBILITY = "bench_visibility"
VISIBILITY_WORDS = {"shared": "everybody (shared)", "private": "only me (private)"}      # the upload's choice
LISTED_WORDS = {"shared": "shared with everybody", "private": "private: only you"}      # Your uploads' column
MY_UPLOADS_ROWS = 50         # the signed-on user's newest uploads listed with their buttons
ALL = "all"
PAGE_ROWS = 200              # rows of a table shown (and read from the store) at once
RUNNERS = """# on the machine to measure (numpy alone works on a CPU; torch adds CUDA, ROCm or Apple MPS):
python -m benchmarks_db.run all --out results.json            # matmul, memory, host-device copy, collectives, storage
python -m benchmarks_db.run matmul --out matmul.json --quick  # one runner; --quick checks the pipeline in seconds

# collective bandwidth across GPUs and nodes with NVIDIA's nccl-tests (or ROCm's rccl-tests):
./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8 > all_reduce_8gpu.txt

# MLPerf Training: zip the submitter folder (systems/ and results/) or upload one result log (result_0.txt)"""


@st.cache_data(ttl=STORE_TTL_S, show_spinner=False)
def options_in_store(viewer: str | None) -> dict:
    return queries.filter_options(cached.store(), viewer)


@st.cache_data(ttl=STORE_TTL_S, max_entries=64, show_spinner=False)
def mlperf_table(benchmark, accelerator, mlperf_round, source_kind, viewer, page: int = 0) -> pd.DataFrame:
    return queries.mlperf_results(cached.store(), benchmark, accelerator, mlperf_round, source_kind,
                                  limit=PAGE_ROWS, offset=page * PAGE_ROWS, viewer=viewer)


@st.cache_data(ttl=STORE_TTL_S, max_entries=64, show_spinner=False)
def microbench_table(metric, accelerator, source_kind, viewer, page: int = 0) -> pd.DataFrame:
    return queries.microbench_results(cached.store(), metric, accelerator, source_kind, limit=PAGE_ROWS,
                                      offset=page * PAGE_ROWS, viewer=viewer)


@st.cache_data(ttl=STORE_TTL_S, max_entries=64, show_spinner=False)
def systems_table(benchmark, viewer) -> pd.DataFrame:
    return queries.compare_systems(cached.store(), benchmark, viewer=viewer)


@st.cache_data(ttl=STORE_TTL_S, max_entries=64, show_spinner=False)
def datasheet_table(metric, viewer, page: int = 0) -> pd.DataFrame:
    return queries.datasheet_efficiency(cached.store(), metric, limit=PAGE_ROWS, offset=page * PAGE_ROWS,
                                        viewer=viewer)


def paged(table, *args, key: str) -> pd.DataFrame:
    """One page of PAGE_ROWS rows of a store table (the store counts and cuts them: no view loads every row), with
    a page chooser when there are more; the rows without their count."""
    page = st.session_state.get(key, 1)
    df = table(*args, page - 1)
    if not len(df) and page > 1:                 # the filters changed under a later page
        st.session_state[key] = page = 1
        df = table(*args, 0)
    total = int(df["total_rows"].iloc[0]) if len(df) else 0
    if total > PAGE_ROWS:
        pages = -(-total // PAGE_ROWS)
        st.number_input(f"Page (of {pages:,}; {total:,} rows, {PAGE_ROWS} a page)", min_value=1, max_value=pages,
                        step=1, key=key)
    return df.drop(columns="total_rows")


def _none_if_all(value):
    return None if value == ALL else value


def _ingest(dry_run: bool) -> None:
    """Check the chosen file (dry_run: nothing is kept) or check and add it; the report and the store's row counts
    before and after go to the page."""
    ss = st.session_state
    file = ss.get(UPLOAD)
    if file is None:
        ss[LAST_INGEST] = {"errors": ["choose a file first"]}
        return
    store = cached.store()
    before = store.counts()
    sender = uploader()
    try:
        with work_limits.slot("upload check"):
            report = ingest_bytes(store, file.name, file.getvalue(), accelerator=ss.get(UPLOAD_ACCEL),
                                  max_bytes=load_settings().max_upload_bytes, dry_run=dry_run, uploader=sender,
                                  scenario=state.scenario_json())     # what a training log ran: this scenario
    except Busy as err:
        ss[LAST_INGEST] = {"input": file.name, "errors": [str(err)], "before": before, "after": before}
        return
    ss[LAST_INGEST] = {**report.model_dump(), "visibility": sender.visibility, "before": before,
                       "after": store.counts()}
    if report.ingested:
        _clear_store_caches()


def uploader() -> Uploader:
    """Who this session's uploads come from: the typed name, the signed-on user (state.signed_in_user) and whether
    that user is one of APP_TRUSTED_UPLOADERS."""
    identity = state.signed_in_user()
    return Uploader(submitter=st.session_state.get(SUBMITTER) or None, identity=identity,
                    trusted=identity is not None and identity in load_settings().trusted_uploaders,
                    visibility=st.session_state.get(UPLOAD_VISIBILITY, "shared") if identity else "shared")


def _remove_upload(source_id: str) -> None:
    """Remove an upload of the signed-on user (or, without one, of this session); someone else's is refused with
    the store's message (benchmarks_db.ingest.delete_upload)."""
    store = cached.store()
    before = store.counts()
    try:
        n_runs = delete_upload(store, source_id, state.signed_in_user())
    except (KeyError, PermissionError) as err:
        st.session_state[LAST_INGEST] = {"input": source_id, "errors": [err.args[0]]}
        return
    st.session_state[LAST_INGEST] = {"removed": source_id, "removed_runs": n_runs, "before": before,
                                     "after": store.counts()}
    _clear_store_caches()


def _set_upload_visibility(source_id: str, visibility: str) -> None:
    """The signed-on user lists their upload to everybody or to themselves only."""
    try:
        done = trust.set_upload_visibility(cached.store(), source_id, state.signed_in_user(), visibility)
    except (KeyError, PermissionError, ValueError) as err:
        st.session_state[LAST_INGEST] = {"input": source_id, "errors": [err.args[0]]}
        return
    st.session_state[LAST_INGEST] = {"changed": done}
    _clear_store_caches()


def your_uploads(user: str) -> None:
    """The signed-on user's uploads, newest first, each with who it is listed to and buttons to change that or to
    remove it; trusting one stays the operator's (python -m benchmarks_db trust)."""
    st.subheader("Your uploads")
    mine = trust.uploads(cached.store(), uploaded_by=user)
    if mine.empty:
        st.caption("Nothing uploaded under your name yet.")
        return
    st.caption("Private uploads are listed to you only and never calibrate the planner; shared ones are listed to "
               "everybody and calibrate once the deployment's operator trusts them.")
    for row in mine.head(MY_UPLOADS_ROWS).itertuples():
        cols = st.columns([4, 2, 1, 1])
        trusted = f", trusted by {row.trusted_by}" if isinstance(row.trusted_by, str) else ""
        cols[0].markdown(f"**{escape.md_escape(row.filename or row.source_id)}** {escape.md_code(row.source_id)}: "
                         f"{row.runs} run(s), {row.ingested_at:%Y-%m-%d %H:%M} UTC{escape.md_escape(trusted)}")
        cols[1].markdown(LISTED_WORDS[row.visibility])
        other = "private" if row.visibility == "shared" else "shared"
        cols[2].button("Make private" if other == "private" else "Share", key=f"vis_{row.source_id}",
                       on_click=_set_upload_visibility, args=(row.source_id, other))
        cols[3].button("Delete", key=f"del_{row.source_id}", on_click=_remove_upload, args=(row.source_id,))
    if len(mine) > MY_UPLOADS_ROWS:
        st.caption(f"The newest {MY_UPLOADS_ROWS} of your {len(mine)} uploads.")


def _clear_store_caches() -> None:
    for cache in (options_in_store, mlperf_table, microbench_table, systems_table, datasheet_table,
                  cached.calibration_of):
        cache.clear()


def _plot_texts(part: pd.DataFrame, columns: list[str]) -> list[list]:
    """Columns of store data as plotly customdata, text escaped (plotly draws the HTML tags in hover labels)."""
    return [[escape.plot_text(v) if isinstance(v, str) else v for v in row] for row in part[columns].values.tolist()]


def systems_figure(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for accelerator, part in df.groupby("accelerator", sort=True):
        fig.add_scatter(x=part["n_accelerators"], y=part["best_minutes"], mode="lines+markers",
                        name=escape.plot_text(accelerator),
                        customdata=_plot_texts(part.assign(name=accelerator), ["submitter", "round", "name"]),
                        hovertemplate="%{customdata[2]}: %{x} accelerators, %{y:.1f} min<br>%{customdata[0]} "
                                      "%{customdata[1]}<extra></extra>")
    charts.log_axis(fig, "x", df["n_accelerators"], title="accelerators in the system")
    charts.log_axis(fig, "y", df["best_minutes"], title="best time to train (minutes)")
    fig.update_layout(height=460, margin=dict(t=10, b=10))
    return fig


def efficiency_figure(df: pd.DataFrame) -> go.Figure:
    shown = df.dropna(subset=["efficiency"])
    labels = (shown["accelerator"] + " " + shown["dtype"].fillna("") + " " + shown["op"].fillna("")).map(escape.plot_text)
    colors = ["#4C78A8" if v == "accepted" else "#BAB0AC" for v in shown["validation"]]
    fig = go.Figure(go.Bar(x=shown["efficiency"], y=labels, orientation="h", marker_color=colors,
                           customdata=_plot_texts(shown, ["value", "unit", "peak_value", "source_kind"]),
                           hovertemplate="%{y}: %{x:.0%} of datasheet (%{customdata[0]:.1f} of %{customdata[2]:.1f} "
                                         "%{customdata[1]}, %{customdata[3]})<extra></extra>"))
    fig.update_layout(xaxis_title="measured / datasheet peak", xaxis_tickformat=".0%", yaxis_autorange="reversed",
                      height=max(300, 22 * len(shown)), margin=dict(t=10, b=10))
    return fig


def validation_figure(df: pd.DataFrame) -> go.Figure:
    shown = df.dropna(subset=["predicted_minutes"])
    fig = go.Figure()
    for accelerator, part in shown.groupby("accelerator"):
        fig.add_scatter(x=part["published_minutes"], y=part["predicted_minutes"], mode="markers",
                        name=escape.plot_text(accelerator),
                        customdata=_plot_texts(part, ["n_accelerators", "round", "submitter"]),
                        hovertemplate="%{customdata[0]} accelerators, %{customdata[1]} %{customdata[2]}: published "
                                      "%{x:.1f} min, predicted %{y:.1f} min<extra></extra>")
    if len(shown):
        lo = float(min(shown["published_minutes"].min(), shown["predicted_minutes"].min()))
        hi = float(max(shown["published_minutes"].max(), shown["predicted_minutes"].max()))
        fig.add_scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="prediction = published",
                        line=dict(dash="dash", color="#222"))
    both = [*shown["published_minutes"], *shown["predicted_minutes"]]
    charts.log_axis(fig, "x", both, title="published MLPerf time to train (minutes)")
    charts.log_axis(fig, "y", both, title="engine's prediction (minutes)")
    fig.update_layout(height=460, margin=dict(t=10, b=10))
    return fig


st.title("Benchmarks")
st.caption("Published results (MLPerf Training, MAMF matmul), and results uploaded by users of this planner. "
           "Trustworthy measurements can replace the datasheet efficiencies on the Scenario page.")
viewer = state.signed_in_user()       # the signed-on user sees their private uploads too; nobody else's
found = options_in_store(viewer)
browse, compare_tab, datasheet_tab, validation_tab, upload_tab = st.tabs(
    ["Browse", "Compare systems", "Measured vs datasheet", "Predicted vs MLPerf", "Upload results"])

with browse:
    cols = st.columns(4)
    kind = cols[0].selectbox("Source", [ALL, *found["source_kinds"]], key="f_kind",
                             help="published: from MLCommons or a published table; user_submitted: uploaded here "
                                  "(unverified); illustrative: example values from the seed documents.")
    accel = cols[1].selectbox("Accelerator", [ALL, *found["accelerators"]], key="f_accel")
    bench = cols[2].selectbox("MLPerf benchmark", [ALL, *[b for b in found["benchmarks"]
                                                        if b not in ("matmul", "membw", "h2d", "collectives",
                                                                     "storage")]], key="f_bench")
    rnd = cols[3].selectbox("MLPerf round", [ALL, *found["mlperf_rounds"]], key="f_round")
    st.markdown("**MLPerf Training results** (time to train in minutes; accelerator-hours are derived)")
    mlperf = paged(mlperf_table, _none_if_all(bench), _none_if_all(accel), _none_if_all(rnd), _none_if_all(kind),
                   viewer, key="mlperf_page")
    # the store's rows as stored, wider than any page: the run id stays pinned while the rest scrolls sideways
    st.dataframe(escape.csv_safe(mlperf), hide_index=True, key="mlperf_table",
                 column_config={"run_id": st.column_config.TextColumn(pinned=True),
                                "url": st.column_config.LinkColumn()})
    metric = st.selectbox("Microbenchmark metric", [ALL, *[m for m in found["metrics"] if m != "time_to_train"]],
                          key="f_metric")
    st.markdown("**Microbenchmark results**")
    micro = paged(microbench_table, _none_if_all(metric), _none_if_all(accel), _none_if_all(kind), viewer,
                  key="microbench_page")
    st.dataframe(escape.csv_safe(micro), hide_index=True, key="microbench_table",
                 column_config={"run_id": st.column_config.TextColumn(pinned=True)})

with compare_tab:
    mlperf_benchmarks = [b for b in found["benchmarks"] if b not in ("matmul", "membw", "h2d", "collectives",
                                                                     "storage")]
    if mlperf_benchmarks:
        chosen = st.selectbox("Benchmark", mlperf_benchmarks, key="cmp_bench")
        systems = systems_table(chosen, viewer)
        st.plotly_chart(systems_figure(systems), key="systems_chart")
        st.dataframe(escape.csv_safe(systems), hide_index=True, key="systems_table", row_height=66,
                     column_config={          # fits a laptop's 1,280 px page; long names wrap in the taller rows
                         "accelerator": st.column_config.TextColumn(width=120, pinned=True),
                         "n_accelerators": st.column_config.NumberColumn("accelerators", width=90),
                         "best_minutes": st.column_config.NumberColumn("best minutes", format="%.1f", width=90),
                         "round": st.column_config.TextColumn(width=60),
                         "submitter": st.column_config.TextColumn(width=130),
                         "system_name": st.column_config.TextColumn("system", width=140),
                         "n_results": st.column_config.NumberColumn("results", width=60),
                         "accelerator_hours_derived": st.column_config.NumberColumn(
                             "accelerator-hours", format="%.0f", width=110,
                             help="Derived: accelerators x best minutes / 60.")})
    else:
        st.info("No MLPerf results in the store yet: run `python -m benchmarks_db seed`.")

with datasheet_tab:
    which = st.radio("Measurement", ["matmul_tflops", "mem_bw"], horizontal=True, key="ds_metric",
                     format_func={"matmul_tflops": "Matrix multiply (TFLOP/s)", "mem_bw": "Memory bandwidth (GB/s)"}.get)
    eff = paged(datasheet_table, which, viewer, key="datasheet_page")
    if len(eff):
        st.plotly_chart(efficiency_figure(eff), key="efficiency_chart")
        st.caption("Blue: trusted (accepted); grey: flagged or illustrative. The engine's default matmul efficiency "
                   "is the published MAMF measurement over the datasheet peak.")
        st.dataframe(escape.csv_safe(eff), hide_index=True, key="efficiency_table",
                     column_config={"accelerator": st.column_config.TextColumn(pinned=True)})
    else:
        st.info("No measurement of this kind with a datasheet peak yet.")

with validation_tab:
    st.caption("The engine's predicted time to train for each MLPerf result's model on the submission's system, "
               "against the published minutes. Published minutes include in-run evaluation and the RCP penalty "
               "(scaling factor); so does the prediction (as many evaluations over the evaluation set as the result's log "
               "ran, else its peers' or the benchmark's logged cadence). Where the log measured its training step, "
               "'logged step s' stands beside the 'engine step s': the step alone, without evaluations or stalls.")
    target = st.selectbox("Benchmark to predict", list(background.VALIDATED), key="val_bench")
    job = background.validation(cached.store(), target, awaited=components.awaited)
    if not job.wait(0.05):
        st.info("The predictions are being computed (a layout search per published system, once per server); they "
                "appear here in a few seconds.")
        components.poll(job)
    else:
        try:
            val = job.value()
        except Busy as err:
            st.warning(str(err))
        else:
            st.plotly_chart(validation_figure(val), key="validation_chart")
            # what the table is for (system, published, predicted, ratio) first, beside the pinned system; the
            # rest of the derivation (precision, tokens, layout, diagnosis) scrolls sideways after it
            first = ["system_name", "accelerator", "n_accelerators", "published_minutes", "predicted_minutes", "ratio"]
            components.table(escape.csv_safe(val), hide_index=True, key="validation_table", row_height=66,
                             column_order=first + [c for c in val.columns if c not in first],
                             column_config={"system_name": st.column_config.TextColumn("system", width=150, pinned=True),
                                            "accelerator": st.column_config.TextColumn(width=130),
                                            "n_accelerators": st.column_config.NumberColumn("accelerators", width=90),
                                            "published_minutes": st.column_config.NumberColumn("published minutes",
                                                                                               format="%.2f", width=120),
                                            "predicted_minutes": st.column_config.NumberColumn("predicted minutes",
                                                                                               format="%.2f", width=120),
                                            "ratio": st.column_config.NumberColumn("predicted / published",
                                                                                   format="%.2f", width=140),
                                            "step_time_s": st.column_config.NumberColumn("engine step s", format="%.3f"),
                                            "logged_step_s": st.column_config.NumberColumn("logged step s",
                                                                                           format="%.3f")})
    training_runs.show(viewer)

with upload_tab:
    settings = load_settings()
    if settings.read_only:
        st.info("This deployment is read-only: uploads are off. Ask its administrator to add results to the store.")
    else:
        st.markdown("Upload a result file from the bundled runners, nccl-tests output, an MLPerf result log or a "
                    ".zip of MLPerf results folders. The file is checked completely before anything is stored: a "
                    "file with any error is refused as a whole. A training log (Megatron-LM, TorchTitan, "
                    "DeepSpeed or MaxText step lines) is stored with the current scenario, its layout included, as the run it "
                    "measured: open that scenario (or its shared link) first.")
        # No type= filter: Streamlit rejects a filtered-out name with a traceback; the content decides, with a message.
        st.file_uploader("Result file (.json, .txt, .log, .csv or .zip)", key=UPLOAD,
                         max_upload_size=settings.max_upload_mb)
        if viewer is not None:
            st.radio("Who sees it", list(VISIBILITY_WORDS), format_func=VISIBILITY_WORDS.get, horizontal=True,
                     key=UPLOAD_VISIBILITY, help="Shared: listed to everybody, and the deployment's operator may "
                                                 "trust it for calibration. Private: listed to you only, never used "
                                                 "for calibration; share it later under 'Your uploads'.")
        cols = st.columns(2)
        cols[0].text_input("Your name or team (stored with the upload)", key=SUBMITTER, max_chars=100)
        cat = load_catalog()
        cols[1].selectbox("Accelerator, if the file does not name it", [None, *cat.accelerators], key=UPLOAD_ACCEL,
                          format_func=lambda a: "as named in the file" if a is None else cat.accelerators[a].name)
        buttons = st.columns([1, 2])
        buttons[0].button("Check only", on_click=_ingest, args=(True,),
                          help="Validate the whole file against the store and report what it would add; keep nothing.")
        buttons[1].button("Check and add to the store", on_click=_ingest, args=(False,), type="primary")
    outcome = st.session_state.get(LAST_INGEST)
    if outcome:
        if outcome.get("dry_run"):
            st.info(f"{escape.md_escape(outcome['input'])} ({outcome['format']}) passes every check and would add "
                    + ", ".join(f"{n} {t} rows" for t, n in outcome["rows_added"].items())
                    + ". Nothing was written: use 'Check and add to the store' to keep it.")
        elif outcome.get("removed"):
            st.success(f"Removed upload {outcome['removed']} and its {outcome['removed_runs']} run(s) from the store.")
        elif outcome.get("changed"):
            st.success(escape.md_escape(outcome["changed"]))
        elif outcome.get("ingested"):
            st.success(f"Added {escape.md_escape(outcome['input'])} ({outcome['format']}): "
                       + ", ".join(f"{n} {t} rows" for t, n in outcome["rows_added"].items())
                       + f". Run ids: {', '.join(outcome['run_ids'][:10])} (source 'user_submitted' in Browse).")
            if outcome.get("visibility") == "private":
                st.info("Kept private: listed to you only (in Browse and under 'Your uploads' below) and never used "
                        "for calibration. Share it there to let the deployment's operator trust it.")
            elif outcome.get("trusted_by"):
                st.info(f"Trusted on arrival ({escape.md_escape(outcome['trusted_by'])} is one of this deployment's "
                        "trusted uploaders): its accepted runs calibrate the engine for everyone.")
            else:
                st.info("Kept as an untrusted upload: shown in Browse, but used for calibration only once the "
                        "deployment's operator trusts it ("
                        + escape.md_code(f"python -m benchmarks_db trust {outcome['source_id']}") + ").")
            if outcome.get("source_id") and not settings.read_only:
                st.button("Remove this upload", on_click=_remove_upload, args=(outcome["source_id"],),
                          help="Take it out of the store again, e.g. to upload it with the right accelerator.")
        else:
            st.error(f"Refused {escape.md_escape(outcome.get('input', 'the upload'))}: nothing was written to the store.")
        for error in outcome.get("errors", [])[:30]:
            st.markdown(f"- :red[error] {escape.md_escape(error)}")
        for flag in outcome.get("flags", []):
            st.markdown(f"- :orange[flagged] {escape.md_escape(flag)} (kept, but never used for calibration)")
        for warning in outcome.get("warnings", []):
            st.markdown(f"- note: {escape.md_escape(warning)}")
        if "before" in outcome:
            st.dataframe(pd.DataFrame({"before": outcome["before"], "after": outcome["after"]}), key="counts_table")
    if viewer is not None and not settings.read_only:
        your_uploads(viewer)
    st.subheader("Run the bundled benchmarks")
    st.code(RUNNERS, language="bash", wrap_lines=True)
