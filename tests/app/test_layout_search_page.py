"""Layout search page: the search behind a button with progress, the ranked table (the engine's own ranking), the
time breakdown of the selected layout, the Pareto chart, the cluster-size answer and 'why not ...?'."""
import json

from engine.presentation.edit import default_scenario
from engine.presentation.share import PlannerOptions, encode
from engine.planning.search import explain, search, search_cluster
from engine.planning.sizing import cluster_search
from tests.app.conftest import button, on_page, run_app, texts


def search_page(**options):
    at = on_page(run_app(), "layout_search")
    for name, value in options.items():
        widget = {"objective": at.radio, "deadline_days": at.number_input}[name](key="opt:" + name)
        widget.set_value(value).run()
    return at


def run_search(at):
    button(at, "Run layout search").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_nothing_runs_until_asked():
    at = search_page()
    assert any("Run layout search" in i for i in texts(at.info))
    assert not at.dataframe


def test_the_ranked_table_is_the_engines_ranking_and_the_best_can_be_adopted():
    at = run_search(search_page())
    expected = search(default_scenario(), top=20)
    table = at.dataframe[0].value
    assert len(table) == len(expected.best)
    for i, row in enumerate(expected.best[:5]):
        for key in ("tp", "pp", "dp", "cp", "micro_batch_size", "zero_stage", "recompute"):
            assert table.iloc[i][key] == getattr(row.layout, key)
        assert abs(table.iloc[i]["days (compute)"] - row.train_days) < 1e-9
    assert [m.value for m in at.metric][:3] == [f"{expected.candidates_evaluated:,}",
                                                f"{expected.model_evaluated:,}", f"{expected.feasible:,}"]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    breakdown = charts[0]["data"][0]
    best = expected.best[0]
    assert abs(sum(breakdown["x"]) - best.step_time_s) < 1e-6          # the bars add up to the step time
    pareto = charts[1]["data"][0]
    assert pareto["x"] == [p.n_gpus for p in expected.pareto]
    button(at, "Use layout #1 in the scenario").click().run()
    assert at.session_state["scenario"].layout == best.layout
    assert any("current layout" in s for s in texts(at.success))


def test_the_rejection_summary_and_why_not_answers_match_the_engine():
    at = run_search(search_page())
    expected = search(default_scenario(), top=20)
    rejected = at.dataframe[1].value
    assert dict(zip(rejected["reason"], rejected["layouts"])) == expected.rejected
    at.selectbox(key="why_dimension").set_value("tp").run()
    at.selectbox(key="why_value").set_value("16").run()
    answer = explain(search_cluster(default_scenario(), 1024), "time", tp=16)
    assert "best" not in answer                                      # Llama 3.1 70B has 8 KV heads
    text = " ".join(m.value for m in at.markdown)
    assert "No layout with tp=16 is possible here" in text
    assert "heads, KV heads or MLP width not divisible by tp" in text


def test_a_deadline_finds_the_cheapest_cluster_and_says_why_not_its_neighbour():
    at = run_search(search_page(deadline_days=60.0))
    expected = cluster_search(default_scenario(), deadline_days=60.0)
    assert expected.met
    shown = [s for s in texts(at.success) if f"**{expected.n_gpus:,} accelerators**" in s]
    assert shown and shown[0].startswith("Cheapest cluster that meets the target"), texts(at.success)
    # here 3,840 GPUs: no size between has a layout, and its best layout misses the deadline by so many days
    assert expected.neighbour_why and f"{expected.neighbour_gpus:,} accelerators: no size between" in shown[0]
    assert "misses the deadline by" in shown[0]


def test_results_are_marked_stale_when_the_scenario_changes():
    at = run_search(search_page())
    at.radio(key="opt:objective").set_value("cost").run()
    assert any("changed since the last search" in i for i in texts(at.info))
    run_search(at)
    assert at.dataframe[0].value.iloc[0]["cost USD"] == search(default_scenario(), top=1, objective="cost").best[0].cost_usd


def test_a_bad_deadline_is_flagged_at_the_field():
    at = search_page()
    at.number_input(key="opt:deadline_days").set_value(-3.0).run()
    assert any("greater than 0" in e for e in texts(at.error))
    assert at.session_state["options"].deadline_days is None


def test_the_chosen_layout_downloads_as_its_stacks_launch_configuration():
    from engine.presentation.launch_config import export
    at = run_search(search_page())
    choice = at.selectbox(key="launch_format")
    assert choice.value == "megatron"                 # NVIDIA's MLPerf stack for the default H100 scenario
    best = search(default_scenario(), top=1).best[0]
    expected = export(default_scenario().model_copy(update={"layout": best.layout}), "megatron")
    assert any(b.proto.label == f"Download {expected.filename}" for b in at.get("download_button"))
    choice.set_value("torchtitan").run()
    assert not at.exception
    notes = export(default_scenario().model_copy(update={"layout": best.layout}), "torchtitan").notes
    assert any(n in t for n in notes for t in texts(at.caption))
    assert choice.options == ["Megatron-LM arguments", "TorchTitan TOML", "DeepSpeed JSON", "MaxText command line"]
    choice.set_value("maxtext").run()
    maxtext = export(default_scenario().model_copy(update={"layout": best.layout}), "maxtext")
    assert any(b.proto.label == f"Download {maxtext.filename}" for b in at.get("download_button"))
    assert any("the estimate assumed megatron_core" in t for t in texts(at.caption))


def test_the_search_says_which_stack_it_chose_and_by_how_much():
    """The default scenario (H100, no training.framework): Megatron-Core and PyTorch FSDP2 both have fitted H100 levels
    (data/frameworks.json), so both are searched and the faster named, with its gap to the other's best layout."""
    at = run_search(search_page())
    free = default_scenario().model_copy(update={"layout": None})
    named = {fw: search(free.model_copy(update={"training": free.training.model_copy(update={"framework": fw})}),
                        top=1, pareto_sizes=[]).best[0] for fw in ("megatron_core", "pytorch_fsdp2")}
    gap = 1 - named["megatron_core"].wall_days / named["pytorch_fsdp2"].wall_days
    line = next(t for t in texts(at.caption) if t.startswith("**Software stack:**"))
    assert line.startswith(f"**Software stack:** Megatron-Core / NeMo, chosen by the planner: {gap:.0%} faster than "
                           "PyTorch FSDP2 on this job (1,024 GPUs"), line


def test_the_questions_chance_sizes_the_cluster_on_this_page_too():
    """The Scenario page's question asked with a 90% chance: the layout search's cluster sizing meets the deadline at
    the top of its range too, and says so."""
    link = encode(default_scenario(), PlannerOptions(deadline_days=60, confidence=0.9))
    at = run_search(on_page(run_app({"sc": link}), "layout_search"))
    expected = cluster_search(default_scenario(), deadline_days=60.0, confidence=0.9)
    plain = cluster_search(default_scenario(), deadline_days=60.0)
    assert expected.met and expected.best.wall_days * expected.best.time_range.high <= 60
    assert expected.n_gpus >= plain.n_gpus and expected.confidence == 0.9
    shown = [s for s in texts(at.success) if f"**{expected.n_gpus:,} accelerators**" in s]
    assert shown and shown[0].startswith("Cheapest cluster that meets the target with a 90% chance (the question's)")
