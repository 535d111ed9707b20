"""The manager's answer (engine/planning/plan.py, engine/planning/sizing.py, engine/economics/ranges.py) on the README's scenario: a deadline or a
budget in, the cluster, days, cost, energy and CO2 with ranges out, and the nearest alternatives."""
import json
import subprocess
import sys

import pytest

from engine import frameworks
from engine.economics import ranges
from engine.presentation.edit import default_scenario
from engine.planning.estimate import estimate
from engine.planning.plan import plan
from engine.planning.sanity import warnings_for
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.planning.search import best_at
from engine.planning.sizing import Target, nearest_sizes, size_for
from engine.planning.vendor import compare, rescore, scenario_on
from engine.catalog import load_catalog
from tests.conftest import ROOT

README = {"model": {"preset": "llama3.1-70b"},
          "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
          "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
          "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
                     "sequence_parallel": True, "recompute": "selective"}}


def test_deadline_sizing_is_in_whole_nodes_and_matches_the_estimate():
    sc = default_scenario()
    sized = size_for(sc, Target(deadline_days=30))
    assert sized.met and sized.n_gpus % 8 == 0 and sized.nodes == sized.n_gpus // 8
    best = sized.best
    assert best.wall_days <= 30
    # the single estimate of the chosen layout gives the same days: one truth
    data = sc.model_dump(mode="json", exclude_none=True)
    data.update(cluster={**data["cluster"], "n_gpus": sized.n_gpus}, layout=best.layout.model_dump())
    assert estimate(parse_scenario(data)).wall_days == pytest.approx(best.wall_days)
    # one size smaller misses the deadline or costs more, and the answer says which
    assert sized.neighbour.wall_days > 30 or sized.neighbour.cost_usd > best.cost_usd
    assert "misses the deadline" in sized.neighbour_why or "costs more" in sized.neighbour_why


def test_the_size_for_a_deadline_does_not_depend_on_the_scenarios_cluster_size():
    sc = default_scenario()
    sc = sc.model_copy(update={"model": sc.model.model_copy(update={"preset": "llama3.1-8b"})})
    answers = {size_for(sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"n_gpus": n})}),
                        Target(deadline_days=10)).n_gpus for n in (8, 1024, 16384)}
    assert len(answers) == 1, answers


def test_budget_sizing_is_the_fastest_within_budget():
    # budgets of $16M and $25M at the 1-GPU rate of $3.20 that priced H100 clusters before, scaled to the 8-GPU
    # instance rate that prices them now ($3.99, x1.247): $20M and $31M
    sc = default_scenario()
    cheap = size_for(sc, Target(budget_usd=20e6))
    rich = size_for(sc, Target(budget_usd=31e6))
    assert cheap.met and rich.met
    assert cheap.best.cost_usd <= 20e6 and rich.best.cost_usd <= 31e6
    assert rich.best.wall_days < cheap.best.wall_days
    assert cheap.neighbour is None or cheap.neighbour.cost_usd > 20e6


def test_plan_answers_with_figures_ranges_and_alternatives():
    # NVIDIA's accelerators publish their power, so the answer has energy and CO2 to range (with the TPU v6e's level
    # calibrated on MLPerf, a TPU can be the cheapest answer, and Google publishes no TPU power figure)
    out = plan(parse_scenario({k: v for k, v in README.items() if k != "layout"}), deadline_days=30, vendor="NVIDIA")
    a = out.answer
    assert a.wall_days <= 30 and a.n_gpus == a.nodes * a.gpus_per_node
    for key in ("cost_usd", "energy_mwh", "co2_t"):
        assert getattr(a, key) > 0
        band = a.ranges[key]
        assert band.low < band.value < band.high
    # the answer is the cheapest option that meets the deadline among those with a price
    priced = [o for o in out.options if o.met and o.price_known]
    assert a.cost_usd <= min(o.cost_usd for o in priced) * (1 + 1e-9)
    kinds = {alt.kind for alt in out.alternatives}
    assert "one size smaller" in kinds
    assert all(alt.text for alt in out.alternatives)


def test_an_answer_on_a_borrowed_level_names_the_cheapest_option_whose_level_is_fitted():
    # the default question is answered by a B300 at bf16, which borrows the H100's 16-bit level (the widest range): the
    # alternatives name the cheapest option meeting the deadline whose own level is fitted, with both ranges of days
    ids = ["B300-SXM-270GB", "H100-SXM5-80GB", "A100-SXM4-80GB"]
    out = plan(default_scenario(), deadline_days=30, accelerators=ids)
    assert out.answer.accelerator == "B300-SXM-270GB" and not out.answer.estimate.framework["calibrated"]
    alt = next(a for a in out.alternatives if a.kind == "cheapest calibrated")
    fitted = [o for o in out.options if o.met and o.price_known and o.accelerator != "B300-SXM-270GB"]
    assert fitted and all(frameworks.resolve(None, o.vendor, o.accelerator, o.precision).calibrated for o in fitted)
    assert alt.cost_usd == pytest.approx(min(o.cost_usd for o in fitted))
    days, own = alt.ranges["wall_days"], out.answer.ranges["wall_days"]
    assert own.high / own.low > days.high / days.low                   # the borrowed level's band is the wider
    assert f"{days.low:.1f}-{days.high:.1f} days" in alt.text and f"{own.low:.1f}-{own.high:.1f}" in alt.text
    # an answer on a fitted level has no such alternative
    h100 = plan(default_scenario(), deadline_days=30, accelerators=["H100-SXM5-80GB", "A100-SXM4-80GB"])
    assert h100.answer.estimate.framework["calibrated"]
    assert "cheapest calibrated" not in {a.kind for a in h100.alternatives}


def test_plan_for_one_vendor_and_a_typical_stack():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    amd = plan(sc, deadline_days=60, vendor="AMD")
    assert amd.answer.vendor == "AMD"
    tuned, typical = plan(sc, deadline_days=60, vendor="same"), plan(sc, deadline_days=60, vendor="same",
                                                                     efficiency="typical")
    assert typical.answer.n_gpus > tuned.answer.n_gpus        # a typical stack needs more accelerators
    assert typical.efficiency_explain.startswith("A typical stack")
    with pytest.raises(ScenarioError):
        plan(sc, deadline_days=60, vendor="Acme")
    with pytest.raises(ScenarioError):
        plan(sc)                                                            # no target


def test_a_larger_accepted_batch_lets_a_tight_deadline_be_met():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    fixed = plan(sc, deadline_days=12, vendor="same")
    free = plan(sc, deadline_days=12, vendor="same", batch_range=(1024, 8192))
    assert free.answer is not None
    assert fixed.answer is None or free.answer.n_gpus <= fixed.answer.n_gpus


def test_ranges_come_from_the_measured_errors():
    acc = ranges.accuracy()
    assert 1.2 < acc["typical"]["factor"] < 2.0                # Llama 2's whole-run GPU-hours vs the tuned figure
    rb = estimate(parse_scenario(README)).time_range           # the README's regime: its measured band
    assert rb.measured and rb.low < 1 < rb.high
    band = ranges.band(100.0, rb, "typical")                    # a typical stack: the factor, with the regime's spread
    assert band == pytest.approx({"value": 100 * acc["typical"]["factor"],
                                  "low": 100 * acc["typical"]["factor"] * rb.low,
                                  "high": 100 * acc["typical"]["factor"] * rb.high})


def test_nearest_sizes_suggest_counts_the_layouts_allow():
    near = nearest_sizes(default_scenario(), 1000)
    assert [n["n_gpus"] for n in near] == [1024, 960]            # 125 nodes leaves a factor 125 no layout uses


def test_plausibility_warnings():
    sc = parse_scenario({**README, "training": {**README["training"], "seq_len": 1, "total_tokens": 1e9},
                         "layout": None})
    ten_years = estimate(parse_scenario(README)).model_copy(update={"wall_days": 5000})
    text = " ".join(warnings_for(sc, ten_years))
    assert "unusually short" in text and "fewer than the model's" in text and "years" in text
    assert warnings_for(parse_scenario(README), estimate(parse_scenario(README))) == []


def test_cli_plan_with_a_deadline_and_with_a_budget(tmp_path):
    f = tmp_path / "readme.json"
    f.write_text(json.dumps(README))
    # NVIDIA: priced and with a published power figure, so CO2 has a value (a TPU answer has none)
    for args in (["--deadline-days", "30", "--vendor", "NVIDIA"], ["--budget-usd", "20000000", "--vendor", "NVIDIA"]):
        out = subprocess.run([sys.executable, "-m", "engine", "plan", str(f), *args], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        a = res["answer"]
        assert a["n_gpus"] > 0 and a["wall_days"] > 0 and a["cost_usd"] > 0 and a["co2_t"] > 0
        assert set(a["ranges"]) >= {"wall_days", "cost_usd", "energy_mwh", "co2_t", "gpu_hours"}
    bad = subprocess.run([sys.executable, "-m", "engine", "plan", str(f)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--deadline-days" in bad.stderr
    capped = subprocess.run([sys.executable, "-m", "engine", "plan", str(f), "--deadline-days", "60", "--vendor", "same",
                             "--max-gpus", "3072"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    res = json.loads(capped.stdout)
    assert capped.returncode == 0 and res["answer"] is None and "on at most 3,072 accelerators" in res["reason"]
    zero = subprocess.run([sys.executable, "-m", "engine", "plan", str(f), "--deadline-days", "60", "--max-gpus", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert zero.returncode == 2 and "--max-gpus" in zero.stderr
    sure = subprocess.run([sys.executable, "-m", "engine", "plan", str(f), "--deadline-days", "60", "--vendor", "same",
                           "--confidence", "0.9"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    res = json.loads(sure.stdout)
    a = res["answer"]
    assert sure.returncode == 0 and res["target"] == "within 60 days with a 90% chance" and res["confidence"] == 0.9
    assert a["ranges"]["wall_days"]["high"] <= 60
    for bad, why in ((["--confidence", "0.99"], "0.5 to 0.9"), (["--confidence", "x"], "invalid float")):
        out = subprocess.run([sys.executable, "-m", "engine", "plan", str(f), "--deadline-days", "60", *bad], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "--confidence" in out.stderr and why in out.stderr


def _on(preset: str, accelerator: str, tokens: float, batch: int = 1024, seq: int = 8192):
    data = {"model": {"preset": preset}, "training": {"seq_len": seq, "global_batch_size": batch,
                                                      "total_tokens": tokens, "precision": "bf16"},
            "cluster": {"accelerator": accelerator, "n_gpus": 8}}
    return parse_scenario(data)


def _dense(sc, top_nodes: int) -> dict:
    """Every node count from 1 to top_nodes, each with its quick search's best (None: no layout)."""
    unit = sc.gpus_per_node
    return {k * unit: best_at(sc, k * unit, quick=True) for k in range(1, top_nodes + 1)}


DENSE = [("llama3.1-70b", "B200-SXM-180GB", 15.6e12, 60), ("llama3.1-70b", "H100-SXM5-80GB", 15.6e12, 30),
         ("llama3.1-70b", "MI300X", 15.6e12, 30), ("qwen3-32b", "GB200", 5e12, 20),
         ("llama3.1-8b", "TPU-v6e", 15e12, 30)]


@pytest.mark.parametrize("preset,accelerator,tokens,deadline", DENSE)
def test_deadline_answer_is_the_cheapest_of_a_dense_sweep(preset, accelerator, tokens, deadline):
    """Brute force: every node count up to twice the answer, searched, the cheapest that meets the deadline."""
    sc = _on(preset, accelerator, tokens, batch=512 if preset == "llama3.1-8b" else 1024,
             seq=4096 if preset == "qwen3-32b" else 8192)
    target = Target(deadline_days=deadline)
    sized = size_for(sc, target, full=False)
    assert sized.met
    rows = _dense(sc, 2 * sized.n_gpus // sc.gpus_per_node)
    meeting = {n: r for n, r in rows.items() if r is not None and r.wall_days is not None and r.wall_days <= deadline}
    cheapest = min(meeting, key=lambda n: (meeting[n].cost_usd, n))
    assert sized.n_gpus == cheapest
    assert sized.best.cost_usd == pytest.approx(meeting[cheapest].cost_usd, rel=1e-12)
    # the smallest size that meets the deadline is not always the cheapest (B200: 1,920 GPUs in 240 nodes need 15
    # pipeline stages); either way the answer is never dearer than it
    smallest = min(meeting)
    assert sized.best.cost_usd <= meeting[smallest].cost_usd


def test_the_cheapest_b200_for_60_days_is_not_the_smallest():
    sc = _on("llama3.1-70b", "B200-SXM-180GB", 15.6e12)
    rows = _dense(sc, 256)
    ok = {n: r for n, r in rows.items() if r is not None and r.wall_days <= 60}
    assert min(ok) < 2048 and ok[min(ok)].cost_usd > ok[2048].cost_usd
    assert size_for(sc, Target(deadline_days=60), full=False).n_gpus == 2048


def test_budget_answer_is_the_fastest_of_a_dense_sweep():
    sc = _on("llama3.1-70b", "H100-SXM5-80GB", 15.6e12)
    budget = 20e6
    sized = size_for(sc, Target(budget_usd=budget), full=False)
    assert sized.met and sized.best.cost_usd <= budget
    rows = _dense(sc, 2 * sized.n_gpus // 8)
    within = {n: r for n, r in rows.items() if r is not None and r.cost_usd is not None and r.cost_usd <= budget}
    fastest = min(within, key=lambda n: (within[n].wall_days, within[n].cost_usd))
    assert sized.n_gpus == fastest


def test_no_size_off_the_ladder_has_a_layout():
    """The sizes the sizing walks (layout_sizes) hold every node count a layout can use: a dense sweep finds none
    outside them."""
    from engine.planning.sizing import layout_sizes
    for preset, acc in (("llama3.1-70b", "H100-SXM5-80GB"), ("mixtral-8x7b", "MI300X"), ("qwen3-32b", "GB200")):
        sc = _on(preset, acc, 1e12)
        allowed = set(layout_sizes(sc))
        rows = _dense(sc, 300 if sc.gpus_per_node == 8 else 40)
        assert not [n for n, r in rows.items() if r is not None and n not in allowed]


def test_plan_compare_and_estimate_give_one_set_of_figures():
    """The same accelerator, size and layout: the plan's options, the vendor comparison's rows and the estimate of
    that layout agree to the last digit."""
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB", "MI300X"]
    planned = plan(sc, deadline_days=60, accelerators=ids).as_json()
    compared = compare(sc, deadline_days=60, accelerators=ids).as_json()
    rows = {r["accelerator"]: r for r in compared["rows"]}
    assert compared["recommendation"] == planned["answer"]["accelerator"]      # one rule: the cheapest that meets it
    for o in planned["options"]:
        r = rows[o["accelerator"]]
        assert (o["n_gpus"], o["wall_days"], o["cost_usd"], o["co2_t"]) == (r["n_gpus"], r["wall_days"],
                                                                            r["cost_usd"], r["co2_t"])
        acc = load_catalog().accelerator(o["accelerator"])
        data = scenario_on(sc, acc, o["precision"], o["n_gpus"], {}).model_dump(mode="json", exclude_none=True)
        data["layout"] = {k: v for k, v in r["layout"].items() if v is not None}
        est = estimate(parse_scenario(data))
        assert (est.wall_days, est.cost_usd) == (r["wall_days"], r["cost_usd"])
    a = planned["answer"]
    assert (a["wall_days"], a["cost_usd"]) == (rows[a["accelerator"]]["wall_days"], rows[a["accelerator"]]["cost_usd"])


def test_a_deadline_inside_the_range_gets_its_chance_from_the_measured_errors():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    out = plan(sc, deadline_days=60, vendor="same").as_json()
    a = out["answer"]
    rb = ranges.RegimeBand.model_validate(a["estimate"]["time_range"])       # the answer's regime and its band
    # H100: the cheapest size for 60 days is 4,096 GPUs at about 50 days; a deadline between the band's low and
    # high ends sits inside it
    days = a["wall_days"]
    lo, mid, hi = rb.low, rb.median, rb.high
    deadline = days * (lo + hi) / 2
    chance = ranges.chance_within(days, deadline, rb)
    ratio = deadline / days                     # published/predicted ratio the deadline allows
    expected = 0.1 + 0.4 * (ratio - lo) / (mid - lo) if ratio < mid else 0.5 + 0.4 * (ratio - mid) / (hi - mid)
    assert chance["chance"] == pytest.approx(expected)
    assert ranges.chance_within(days, days * hi * 1.01, rb)["text"] == "over 90%"
    assert ranges.chance_within(days, days * lo * 0.99, rb)["text"] == "under 10%"
    tight = plan(sc, deadline_days=days * hi * 0.999, vendor="same").as_json()
    assert tight["answer"]["deadline_chance"]["chance"] < 0.9 and "crosses" in tight["answer"]["deadline_chance"]["text"]


def test_at_most_the_gpus_one_has():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    # H100 for 60 days: 3,584 GPUs (59.8 days) is the cheapest; 3,072 GPUs take 69.7 days, so 3,072 is not enough
    free = plan(sc, deadline_days=60, vendor="same").as_json()
    assert free["answer"]["n_gpus"] == 3584
    capped = plan(sc, deadline_days=60, vendor="same", max_gpus=3584).as_json()
    assert capped["answer"]["n_gpus"] == 3584 and "on at most 3,584 accelerators" in capped["target"]
    none = plan(sc, deadline_days=60, vendor="same", max_gpus=3072).as_json()
    assert none["answer"] is None and "on at most 3,072 accelerators" in none["reason"]
    assert "3,072 GPUs" in none["reason"]          # the fastest it can do, on all it has


def test_a_budget_is_met_only_with_a_price_and_unpriced_options_are_listed_apart():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB", "GB300", "TPU-v7"]        # GB300 and TPU7x have no published price
    out = plan(sc, budget_usd=20e6, accelerators=ids)
    a = out.answer
    assert a.cost_usd <= 20e6 and a.accelerator in ("H100-SXM5-80GB", "B200-SXM-180GB")
    unpriced = {o.accelerator: o for o in out.options if o.accelerator in ("GB300", "TPU-v7")}
    assert all(not o.met and "enter one" in o.reason for o in unpriced.values())
    from engine.presentation.answer import option_rows
    rows = option_rows(out)
    assert rows[0]["accelerator"] == a.name                  # the fastest within the budget first
    assert [r["cost USD"] is None for r in rows if r["meets the target"] == "no"][-2:] == [True, True]


def test_a_budget_nothing_meets_names_the_cheapest_priced_option_and_what_would_make_it_work():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB", "A100-SXM4-80GB", "GB300"]
    out = plan(sc, deadline_days=60, budget_usd=11e6, accelerators=ids).as_json()
    assert out["answer"] is None
    cheapest = out["cheapest"]
    priced = [o for o in out["options"] if o.get("cost_usd") is not None]
    assert cheapest["cost_usd"] == min(o["cost_usd"] for o in priced) and cheapest["accelerator"] != "GB300"
    assert f"${cheapest['cost_usd']:,.0f}" in out["reason"]
    levers = {lv["kind"]: lv for lv in out["levers"]}
    # fewer tokens: the cost is proportional to the tokens at a fixed size
    assert levers["fewer tokens"]["tokens"] == pytest.approx(15.6e12 * 11e6 / cheapest["cost_usd"])
    # owning: the on-premises cost per used GPU-hour times the billed GPU-hours of that cluster
    own = levers["own the cluster"]
    row = next(o for o in out["options"] if o["accelerator"] == own["accelerator"])
    from engine.economics.cost import resolve
    from engine.economics.energy import resolve as power_of
    scn = scenario_on(sc, load_catalog().accelerator(own["accelerator"]), row["precision"], own["n_gpus"], {})
    price = resolve(scn, power_of(scn))
    assert own["cost_usd"] == pytest.approx(price.onprem_usd_per_gpu_hour * row["gpu_hours"], rel=1e-9)
    # a committed-use row of data/prices.json sold for the cluster: the A100's 3-year reservation
    assert "reserved_3y" in levers and levers["reserved_3y"]["cost_usd"] < levers["reserved_1y"]["cost_usd"]


def test_a_budget_nothing_meets_names_a_practical_size_not_a_run_of_years():
    """Spend is nearly flat in cluster size, so the literally cheapest size of a 70B model is one or two nodes for
    years; the plan names the fastest size within 5% of the cheapest, checked here against a dense sweep of sizes
    doubling from one node."""
    sc = _on("llama3.1-70b", "B200-SXM-180GB", 15.6e12)
    sized = size_for(sc, Target(budget_usd=10e6), full=False)
    assert not sized.met
    rows = [r for r in (best_at(sc, 8 * 2 ** k, quick=True) for k in range(0, 12)) if r is not None]
    floor = min(r.cost_usd for r in rows)
    near = [r for r in rows if r.cost_usd <= 1.05 * floor]
    assert sized.best.days <= min(r.days for r in near) + 1e-9 and sized.best.cost_usd <= 1.05 * floor
    assert sized.best.wall_days < 365 < max(r.wall_days for r in near if r.cost_usd == floor)


def test_a_typical_stack_sizes_and_scales_alike_in_the_plan_and_the_comparison():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB"]
    planned = plan(sc, deadline_days=60, accelerators=ids, efficiency="typical").as_json()
    compared = compare(sc, deadline_days=60, accelerators=ids, efficiency="typical").as_json()
    tuned = {r["accelerator"]: r for r in compare(sc, deadline_days=60, accelerators=ids).as_json()["rows"]}
    rows = {r["accelerator"]: r for r in compared["rows"]}
    factor = ranges.accuracy()["typical"]["factor"]
    for o in planned["options"]:
        r = rows[o["accelerator"]]
        assert (o["n_gpus"], o["wall_days"], o["cost_usd"]) == (r["n_gpus"], r["wall_days"], r["cost_usd"])
        assert o["wall_days"] <= 60 and o["n_gpus"] >= tuned[o["accelerator"]]["n_gpus"]
        if o["n_gpus"] == tuned[o["accelerator"]]["n_gpus"]:
            assert o["wall_days"] == pytest.approx(tuned[o["accelerator"]]["wall_days"] * factor)
    assert compared["recommendation"] == planned["answer"]["accelerator"]


def test_the_plan_and_the_comparison_size_the_users_measured_cluster_not_the_datasheets():
    """The scenario's own cluster settings go with its accelerator (engine.planning.vendor.scenario_on): the plan
    dropped them, so a cluster measured at 80% of the stack's fitted level (a trusted step-time log's level_scale)
    got the datasheet cluster's answer while the Vendor page's comparison used the measurement."""
    from engine.planning.vendor import compare
    sc = default_scenario()
    measured = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"level_scale": 0.8,
                                                                              "host_memory_gb_per_gpu": 64.0})})
    datasheet, ours = plan(sc, deadline_days=60, vendor="same"), plan(measured, deadline_days=60, vendor="same")
    assert ours.answer.estimate.gpu_hours > datasheet.answer.estimate.gpu_hours
    # the answer's layout on its size, estimated on the measured cluster, gives the answer's figures: one truth
    data = measured.model_dump(mode="json", exclude_none=True)
    data.update(cluster={**data["cluster"], "n_gpus": ours.answer.n_gpus}, layout=ours.answer.layout.model_dump(),
                training={**data["training"], "global_batch_size": ours.answer.global_batch_size})
    assert estimate(parse_scenario(data)).wall_days == pytest.approx(ours.answer.wall_days)
    row = compare(measured, deadline_days=60, accelerators=[sc.cluster.accelerator]).rows[0]
    assert (row.n_gpus, row.wall_days) == (ours.answer.n_gpus, pytest.approx(ours.answer.wall_days))


def test_with_a_chance_the_answer_meets_the_target_at_that_percentile_of_its_range():
    """confidence 0.9: each option is sized so that its regime band's 90th percentile (its high end) meets the
    deadline, so it needs at least as many GPUs as on the engine's own figure; the size below the answer misses at
    its band's top or costs more; at 0.5 the band's median is read."""
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB", "MI300X"]
    plain = plan(sc, deadline_days=60, accelerators=ids)
    sure = plan(sc, deadline_days=60, accelerators=ids, confidence=0.9)
    assert sure.target == "within 60 days with a 90% chance" and sure.confidence == 0.9
    before = {o.accelerator: o for o in plain.options}
    met = [o for o in sure.options if o.met]
    assert len(met) == 3
    for o in met:
        band = o.ranges["wall_days"]                         # the engine's days x the regime's low and high
        assert band.high <= 60 < band.high * 1.5 and band.value == o.wall_days
        assert o.n_gpus >= before[o.accelerator].n_gpus
    assert any(o.n_gpus > before[o.accelerator].n_gpus for o in met)     # the bands' tops asked for more
    a = sure.answer
    assert a.wall_days * a.estimate.time_range.high <= 60 and a.deadline_chance is None   # met at its top: over 90%
    smaller = next(r for r in sure.alternatives if r.kind == "one size smaller")
    assert smaller.wall_days is None or smaller.ranges["wall_days"].high > 60 or smaller.cost_usd >= a.cost_usd
    half = Target(deadline_days=60, confidence=0.5)
    assert half.margin(a.estimate) == pytest.approx(a.estimate.time_range.median)
    assert Target(deadline_days=60).margin(a.estimate) == 1.0


def test_a_chance_is_read_off_the_band_as_chance_within_reads_it():
    rb = ranges.RegimeBand(regime={}, measured=True, support="measured", level="x", n_runs=5, sources=["a"],
                           low=0.8, median=1.05, high=1.4, text="")
    assert ranges.quantile(rb, 0.9) == pytest.approx(1.4) and ranges.quantile(rb, 0.5) == pytest.approx(1.05)
    assert ranges.quantile(rb, 0.7) == pytest.approx(1.05 + (1.4 - 1.05) * 0.5)       # halfway from median to high
    for p in (0.55, 0.7, 0.85):
        assert ranges.chance_within(10.0, 10.0 * ranges.quantile(rb, p), rb)["chance"] == pytest.approx(p)
    for bad in (0.3, 0.95, 1.0):
        with pytest.raises(ScenarioError, match="confidence"):
            Target(deadline_days=30, confidence=bad)
    with pytest.raises(ScenarioError, match="confidence"):
        compare(parse_scenario({k: v for k, v in README.items() if k != "layout"}), confidence=0.9)


def test_the_plan_and_the_comparison_agree_at_a_chance():
    sc = parse_scenario({k: v for k, v in README.items() if k != "layout"})
    ids = ["H100-SXM5-80GB", "B200-SXM-180GB"]
    planned = plan(sc, deadline_days=60, accelerators=ids, confidence=0.8).as_json()
    compared = compare(sc, deadline_days=60, accelerators=ids, confidence=0.8).as_json()
    assert compared["recommendation"] == planned["answer"]["accelerator"] and compared["confidence"] == 0.8
    assert "trains within 60 days with an 80% chance, the plan's rule" in compared["why"]
    # the Vendor choice page re-scores the comparison under its weights: the reasons keep the question's chance
    again = rescore(compare(sc, deadline_days=60, accelerators=ids, confidence=0.8), {"time": 1.0})
    assert again.why == compared["why"] and again.recommendation == compared["recommendation"]
    rows = {r["accelerator"]: r for r in compared["rows"]}
    for o in planned["options"]:
        assert (o["n_gpus"], o["wall_days"], o["cost_usd"]) == tuple(rows[o["accelerator"]][k]
                                                                     for k in ("n_gpus", "wall_days", "cost_usd"))


def test_the_search_commands_cluster_sizing_takes_the_chance_as_the_plan_does(tmp_path):
    f = tmp_path / "readme.json"
    f.write_text(json.dumps(README))
    run = lambda *args: subprocess.run([sys.executable, "-m", "engine", "search", str(f), "--top", "1", *args], cwd=ROOT,
                                       capture_output=True, text=True, timeout=300)
    out = run("--deadline-days", "60", "--confidence", "0.9")
    assert out.returncode == 0, out.stderr
    sized = json.loads(out.stdout)["cluster_search"]
    band = ranges.RegimeBand.model_validate(sized["best"]["time_range"])
    assert sized["met"] and sized["confidence"] == 0.9 and sized["best"]["wall_days"] * band.high <= 60
    alone = run("--confidence", "0.9")
    assert alone.returncode == 2 and "--deadline-days or --gpu-hour-budget" in alone.stderr
