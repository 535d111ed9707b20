"""Scenario: the model, the training setup, the cluster, the site and the price; the headline results alongside."""
from dataclasses import replace

import streamlit as st

from engine.catalog import load_catalog
from engine.frameworks import FRAMEWORKS, stack
from engine.economics.cost import PRICING, price_table
from engine.presentation.edit import CALIBRATION_FIELDS, apply_edit, default_scenario, describe_layout, with_layout
from engine.hf_config import MAX_CONFIG_BYTES, HFConfigError, parse_hf_config
from engine.precision import PRECISIONS
from engine.regions import region_choices
from engine.presentation.figures import published_training_note
from engine.presentation.formatting import JOB_NAMES, model_size_text
from engine.economics import ranges
from engine.scenario import PresetRef
from ui import answer, binding, cached, components, escape, state
from ui.fields import F

MAX_SCENARIO_FILE_MB = 1
UPLOAD = "scenario_upload"
HF_UPLOAD = "hf_config_upload"
HF_TEXT = "hf_config_text"
EFFICIENCY = state.WIDGET + "efficiency_source"
SOURCES = {"datasheet": "Published (datasheet and published measurements)",
           "calibrated": "Calibrated (measured, from the benchmark store)", "custom": "My own values (below)"}
cat = load_catalog()
sc = state.scenario()


def short_name(name: str) -> str:
    """An accelerator's name without its parenthesis, e.g. 'NVIDIA GB300' (the full name is shown under the field)."""
    return name.split(" (")[0]


RELIABILITY_SOURCE = {"mtbf_gpu_hours": "mtbf_source", "storage_write_gb_per_s": "storage_source",
                      "restart_s": "restart_source"}


def default_hint(path: str) -> tuple[str, str]:
    """What an empty PUE, owning-the-hardware or reliability field stands for, as the engine resolves it for this
    scenario: a short placeholder ("5.5 (default)") and, for the field's help, the value with its unit and source.
    A field the user has set shows its own value, so only its help is plain."""
    est = cached.current_estimate()
    group, name = path.split(".")[0], path.split(".")[-1]
    if path == "site.pue":
        value, unit, source = (est.energy or {}).get("pue"), "", (est.energy or {}).get("pue_source", "")
        given = sc.site is not None and sc.site.pue is not None
    elif group == "reliability":
        rel = est.reliability or {}
        value, unit, source = rel.get(name), "", rel.get(RELIABILITY_SOURCE[name], "")
        given = sc.reliability is not None and getattr(sc.reliability, name) is not None
    else:
        term = ((est.cost or {}).get("on_prem") or {}).get("inputs", {}).get(name, {})
        value, unit, source = term.get("value"), term.get("unit", ""), term.get("source", "")
        given = term.get("derivation") == "your value"
    if given or value is None:
        return ("none published" if not given and name == "server_capex_usd" else "default"), ""
    shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"
    return f"{shown} (default)", f" Default for this scenario: {shown} {unit}".rstrip() + f" ({source})."


def _model_kind_changed() -> None:
    kind = st.session_state[state.WIDGET + "model"]
    current = state.scenario()
    if kind == "custom":
        edit = binding.edit(current, "model", current.arch.model_dump(exclude_none=True))
    else:
        edit = binding.edit(current, "model.preset", next(iter(cat.models)))
    state.commit(edit, "model")


def _uploaded() -> None:
    file = st.session_state.get(UPLOAD)
    if file is None:
        return
    if file.size > MAX_SCENARIO_FILE_MB * 1_000_000:
        st.session_state[state.PROBLEMS]["(scenario)"] = [
            f"{file.name} is {file.size / 1e6:.1f} MB; a scenario file is a small JSON object (under "
            f"{MAX_SCENARIO_FILE_MB} MB). Nothing was changed."]
        return
    if binding.replace_scenario(file.getvalue()):
        st.session_state[state.NOTES].insert(0, f"Loaded the scenario from {file.name}.")
    else:
        problems = st.session_state[state.PROBLEMS]["(scenario)"]
        problems.insert(0, f"{file.name} is not a usable scenario, so nothing was changed:")


def _import_hf(data: bytes | str, what: str) -> None:
    """Fill 'My own architecture' from a Hugging Face config.json; refusals name the config key and the family."""
    problems = st.session_state[state.PROBLEMS]
    if len(data) > MAX_CONFIG_BYTES:
        problems["model"] = [f"{what} is over {MAX_CONFIG_BYTES // 1000} KB; a config.json is a few KB. Nothing was changed."]
        return
    try:
        arch = parse_hf_config(data)
    except HFConfigError as err:
        problems["model"] = [f"{what} could not be imported, so nothing was changed:"] + \
                            [f"{field}: {msg}" for field, msg in err.problems]
        return
    if state.commit(apply_edit(state.scenario(), "model", arch.model_dump(mode="json", exclude_defaults=True)), "model"):
        st.session_state[state.NOTES].insert(0, f"Architecture imported from {what}.")


def _hf_uploaded() -> None:
    file = st.session_state.get(HF_UPLOAD)
    if file is not None:
        _import_hf(file.getvalue(), file.name)


def _hf_pasted() -> None:
    text = st.session_state.get(HF_TEXT) or ""
    if text.strip():
        _import_hf(text, "the pasted config.json")


def _efficiency_source_changed(overrides: dict) -> None:
    current = state.scenario()
    cluster = {k: v for k, v in current.cluster.model_dump(exclude_none=True).items() if k not in CALIBRATION_FIELDS}
    if st.session_state[EFFICIENCY] == "calibrated":
        cluster.update(overrides)
    state.commit(binding.edit(current, "cluster", cluster), EFFICIENCY)


def _reset() -> None:
    state.commit(with_layout(default_scenario()))


st.title("Scenario")
st.caption("Describe the training run. Every page uses this scenario, and the address bar always carries it.")
answer.show(sc, state.options())
inputs, results = st.columns([1.35, 1], gap="large")

with inputs:
    st.subheader("Model")
    kind_key = state.WIDGET + "model"
    if kind_key not in st.session_state:
        st.session_state[kind_key] = "preset" if isinstance(sc.model, PresetRef) else "custom"
    st.radio("Model source", ["preset", "custom"], key=kind_key, horizontal=True, on_change=_model_kind_changed,
             format_func={"preset": "A published model", "custom": "My own architecture"}.get,
             help="Start from a published model, or describe your own architecture (it starts as a copy of the "
                  "current model).")
    binding.field_problems("model")
    if isinstance(sc.model, PresetRef):
        binding.bind_preset(F["model.preset"], {m: cat.models[m].name for m in cat.models})
    else:
        with st.expander("Import a Hugging Face config.json", expanded=False):
            st.caption("Upload or paste a model's config.json (Llama, Mistral/Mixtral, Qwen2/3, DeepSeek-V2/V3, Kimi K2, "
                       "gpt-oss, Gemma 2/3, OLMo 2, GPT-2, GPT-NeoX): the fields below are filled from it.")
            st.file_uploader("config.json file", key=HF_UPLOAD, on_change=_hf_uploaded,
                             max_upload_size=MAX_SCENARIO_FILE_MB)
            st.text_area("or paste config.json", key=HF_TEXT, height=120, placeholder='{"model_type": "llama", ...}')
            st.button("Import the pasted config.json", on_click=_hf_pasted)
        cols = st.columns(3)
        for i, name in enumerate(("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "ffn_hidden_size",
                                  "vocab_size", "n_experts", "experts_per_token", "n_shared_experts",
                                  "n_dense_layers", "moe_layer_every", "attention_window", "global_attention_every",
                                  "mtp_layers")):
            binding.bind(f"model.{name}", st.number_input, F[f"model.{name}"], container=cols[i % 3], step=1)
        binding.bind("model.ffn_type", st.selectbox, F["model.ffn_type"], container=cols[1],
                    options=["gelu", "swiglu", "geglu"])
        binding.bind("model.tied_embeddings", st.checkbox, F["model.tied_embeddings"], container=cols[2])
        if sc.arch.mla is not None:
            st.caption("This model uses multi-head latent attention (MLA); its ranks are kept as they are (edit them "
                       "in a scenario file).")
    st.caption(model_size_text(sc))

    st.subheader("Training")
    binding.bind("training.method", st.radio, F["training.method"], options=list(JOB_NAMES), format_func=JOB_NAMES.get,
                 horizontal=True)
    if sc.training.fine_tune:
        cols = st.columns(3)
        binding.bind("training.epochs", st.number_input, F["training.epochs"], container=cols[0], step=1.0)
        if sc.training.adapters:
            binding.bind("training.lora_rank", st.number_input, F["training.lora_rank"], container=cols[1], step=1)
            binding.bind("training.lora_targets", st.selectbox, F["training.lora_targets"], container=cols[2],
                         options=["attention", "all_linear"])
    cols = st.columns(3)
    binding.bind("training.seq_len", st.number_input, F["training.seq_len"], container=cols[0], step=1)
    binding.bind("training.global_batch_size", st.number_input, F["training.global_batch_size"], container=cols[1],
                step=1)
    binding.bind("training.total_tokens", st.number_input, F["training.total_tokens"], container=cols[2],
                step=100.0)
    binding.bind("training.precision", st.selectbox, F["training.precision"], container=cols[0],
                options=[p for p in PRECISIONS if p != "fp32"] + ["fp32"])      # the full-precision one last
    binding.bind("training.optimizer", st.selectbox, F["training.optimizer"], container=cols[1],
                options=["adam", "sgd"])
    binding.bind("training.attention", st.selectbox, F["training.attention"], container=cols[2],
                options=["flash", "standard"])
    cols = st.columns(2)
    binding.bind("training.framework", st.selectbox, F["training.framework"], container=cols[0],
                options=[F["training.framework"].blank, *FRAMEWORKS],
                format_func=lambda v: v if v == F["training.framework"].blank else stack(v).short_name)
    if sc.training.framework is not None and stack(sc.training.framework).torch_compile is not None:
        compile_words = {F["training.torch_compile"].blank: F["training.torch_compile"].blank, True: "compiled",
                         False: "eager (no torch.compile)"}
        binding.bind("training.torch_compile", st.selectbox, F["training.torch_compile"], container=cols[1],
                     options=list(compile_words), format_func=compile_words.get)
    if sc.arch.is_moe:
        binding.bind("training.expert_load_ratio", st.number_input, F["training.expert_load_ratio"],
                     container=cols[1], step=0.1)

    st.subheader("Cluster")
    cols = st.columns([2, 1, 1])
    binding.bind("cluster.accelerator", st.selectbox, F["cluster.accelerator"], container=cols[0],
                options=list(cat.accelerators), format_func=lambda a: short_name(cat.accelerators[a].name))
    binding.bind("cluster.n_gpus", st.number_input, F["cluster.n_gpus"], container=cols[1], step=8)
    binding.bind("cluster.gpus_per_node", st.number_input, F["cluster.gpus_per_node"], container=cols[2], step=1,
                placeholder=f"{cat.accelerators[sc.cluster.accelerator].gpus_per_node} (usual)")
    if short_name(cat.accelerators[sc.cluster.accelerator].name) != cat.accelerators[sc.cluster.accelerator].name:
        st.caption(escape.md_escape(cat.accelerators[sc.cluster.accelerator].name))
    with st.expander("Network and measured efficiencies"):
        calibration = cached.calibration_for(sc)
        source = cached.efficiency_source(sc)
        st.session_state.setdefault(EFFICIENCY, source)
        st.radio("Efficiencies", list(SOURCES) if source == "custom" else ["datasheet", "calibrated"],
                 key=EFFICIENCY, format_func=SOURCES.get, on_change=_efficiency_source_changed,
                 args=(calibration["overrides"],), disabled=not calibration["overrides"] and source == "datasheet",
                 help="Calibrated replaces the published matmul efficiency and the modelled bus bandwidths with "
                      "trusted measurements of this accelerator from the Benchmarks page (uploads that passed every "
                      "check, and published tables).")
        binding.field_problems(EFFICIENCY)
        for name, evidence in calibration["evidence"].items():      # run ids and source titles come from uploads
            st.caption(f"{F['cluster.' + name].label} {evidence['value']:g}: {escape.md_escape(evidence['how'])}; "
                       f"runs {escape.md_escape(', '.join(evidence['runs'][:5]))} "
                       f"({escape.md_escape('; '.join(evidence['sources'][:3]))}).")
        for name, why in calibration["missing"].items():
            st.caption(f"{F['cluster.' + name].label}: nothing measured to use yet ({escape.md_escape(why)}); the "
                       "planner models it from the datasheet links.")
        cols = st.columns(2)
        binding.bind("cluster.intra_node_bw_gbs", st.number_input, F["cluster.intra_node_bw_gbs"], container=cols[0],
                    step=10.0, placeholder="catalog")
        binding.bind("cluster.inter_node_bw_gbs", st.number_input, F["cluster.inter_node_bw_gbs"], container=cols[1],
                    step=5.0, placeholder="catalog")
        binding.bind("cluster.host_memory_gb_per_gpu", st.number_input, F["cluster.host_memory_gb_per_gpu"],
                     step=16.0, placeholder="catalog")
        cols = st.columns(2)       # three columns cut the placeholders ("publisl")
        binding.bind("cluster.matmul_efficiency", st.number_input, F["cluster.matmul_efficiency"], container=cols[0],
                    step=0.01, placeholder="published")
        binding.bind("cluster.intra_node_busbw_gbs", st.number_input, F["cluster.intra_node_busbw_gbs"],
                    container=cols[1], step=10.0, placeholder="modelled")
        binding.bind("cluster.inter_node_busbw_gbs", st.number_input, F["cluster.inter_node_busbw_gbs"],
                    container=cols[0], step=5.0, placeholder="modelled")
    st.markdown(f"**Layout:** {describe_layout(sc.layout.model_dump())}. Change it on the **Memory** page, or let "
                "**Layout search** find the best one.")

    st.subheader("Site and cost")
    regions = dict((code, label) for label, code in region_choices())
    stored = sc.site.region if sc.site else None
    region_codes = ([stored] if stored and stored not in regions else []) + list(regions)
    binding.bind("site.region", st.selectbox, F["site.region"],
                options=[F["site.region"].blank, *region_codes], format_func=lambda c: regions.get(c, c))
    cols = st.columns(3)
    placeholder, default = default_hint("site.pue")
    binding.bind("site.pue", st.number_input, replace(F["site.pue"], help=F["site.pue"].help + default),
                 container=cols[0], step=0.05, placeholder=placeholder.replace(" (default)", ""))
    binding.bind("site.market_based_g_per_kwh", st.number_input, F["site.market_based_g_per_kwh"], container=cols[1],
                step=10.0, placeholder="none")
    binding.bind("site.accelerator_power_w", st.number_input, F["site.accelerator_power_w"], container=cols[2],
                step=10.0, placeholder="TDP")
    cols = st.columns(3)
    providers = sorted({r.provider for r in price_table()})
    binding.bind("cost.basis", st.selectbox, F["cost.basis"], container=cols[0], options=["cloud", "on_prem"])
    binding.bind("cost.provider", st.selectbox, F["cost.provider"], container=cols[1],
                options=[F["cost.provider"].blank, *providers])
    binding.bind("cost.pricing", st.selectbox, F["cost.pricing"], container=cols[2], options=list(PRICING))
    cols = st.columns(2)
    binding.bind("cost.price_usd_per_gpu_hour", st.number_input, F["cost.price_usd_per_gpu_hour"], container=cols[0],
                step=0.1, placeholder="published")
    with st.expander("Owning the hardware (on-premises) and reliability"):
        cols = st.columns(2)
        for i, name in enumerate(("server_capex_usd", "gpus_per_server", "depreciation_years", "utilisation",
                                  "power_usd_per_kwh", "ops_usd_per_gpu_year", "storage_capex_usd_per_gpu",
                                  "network_fraction")):
            placeholder, default = default_hint(f"cost.on_prem.{name}")
            spec = F[f"cost.on_prem.{name}"]
            binding.bind(f"cost.on_prem.{name}", st.number_input, replace(spec, help=spec.help + default),
                         container=cols[i % 2], placeholder=placeholder,
                         step=0.05 if name in ("utilisation", "power_usd_per_kwh", "network_fraction") else
                         1 if name == "gpus_per_server" else 1.0)
        cols = st.columns(2)       # three columns cut the defaults shown in the fields ("300 (de")
        for i, name in enumerate(("mtbf_gpu_hours", "storage_write_gb_per_s", "restart_s")):
            placeholder, default = default_hint(f"reliability.{name}")
            spec = F[f"reliability.{name}"]
            binding.bind(f"reliability.{name}", st.number_input, replace(spec, help=spec.help + default),
                         container=cols[i % 2], step=1.0, placeholder=placeholder)

    st.subheader("Scenario file")
    # No type= filter: Streamlit rejects a filtered-out name with a traceback; the content decides, with a message.
    st.file_uploader("Load a scenario file (JSON)", key=UPLOAD, on_change=_uploaded,
                     max_upload_size=MAX_SCENARIO_FILE_MB,
                     help="A scenario JSON as downloaded from the Summary report page or used by "
                          "`python -m engine estimate`.")
    binding.field_problems("(scenario)")
    st.button("Reset to the default scenario", on_click=_reset)

with results:
    st.subheader("Results")
    est = cached.current_estimate()
    if est.fits:
        st.success(f"Fits: {est.memory_gib.total:.1f} of {est.memory_capacity_gib:.0f} GiB per "
                   "accelerator on the fullest one.")
    else:
        st.error(f"Does not fit: {est.memory_gib.total:.1f} GiB needed per accelerator, "
                 f"{est.memory_capacity_gib:.0f} GiB available, so no time or cost is given for this layout.")
        components.show_what_fits(sc)
    components.show_key_figures(est, width=150)
    if est.fits:
        st.caption(ranges.explain(state.options().efficiency, est.time_range) + " The ranges under the figures follow "
                   "from it.")
        published = published_training_note(sc, est, state.options().efficiency)
        if published:
            st.info(escape.md_escape(published))
    for warning in est.warnings or []:
        st.warning(escape.md_escape(warning))
