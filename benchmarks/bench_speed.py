"""Time the planner's slow answers beyond start-up and print the figures, each in a fresh process (cold caches, as a
first command-line call or a page's first click): `compare --deadline-days 30` and `plan --deadline-days 30` for the
app's default scenario (Llama 3.1 70B, 15.6T tokens, H100), and its estimate with and without a whole-run phase
(10% of the tokens at a 32k sequence: one more layout search, cached for every later estimate).
Targets: compare and plan under 3 s; the estimate with a phase within 3x of the one without (warm, as the pages
re-estimate). Run it on an idle machine: `python benchmarks/bench_speed.py`."""
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PHASE = {"name": "long context", "tokens": 1.56e12, "seq_len": 32768, "global_batch_size": 256}


def _scenario(phased: bool):
    from engine.inputs import parse_scenario
    from engine.presentation.edit import DEFAULT_SCENARIO
    data = dict(DEFAULT_SCENARIO, **({"schedule": {"phases": [PHASE]}} if phased else {}))
    return parse_scenario(data)


def _timed(call, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


def one(name: str) -> dict:
    """Seconds for one figure, measured after the imports and the scenario parse (start-up excluded)."""
    from engine.planning.estimate import estimate
    from engine.planning.plan import plan
    from engine.planning.vendor import compare
    if name == "compare":
        sc = _scenario(False).model_copy(update={"layout": None})
        return {"s": _timed(lambda: compare(sc, deadline_days=30))}
    if name == "plan":
        sc = _scenario(False).model_copy(update={"layout": None})
        return {"s": _timed(lambda: plan(sc, deadline_days=30))}
    plain, phased = _scenario(False), _scenario(True)
    cold = _timed(lambda: estimate(phased))
    other = phased.model_copy(update={"layout": phased.layout.model_copy(update={"micro_batch_size": 2})})
    return {"plain_s": _timed(lambda: estimate(plain), 20), "phased_cold_s": cold,
            "phased_warm_s": _timed(lambda: estimate(other), 20)}


def run(name: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)


def main() -> None:
    compare_s, plan_s, est = run("compare")["s"], run("plan")["s"], run("estimate")
    print(f"compare --deadline-days 30: {compare_s:.2f} s beyond start-up (target < 3 s)")
    print(f"plan --deadline-days 30:    {plan_s:.2f} s beyond start-up (target < 3 s)")
    ratio = est["phased_warm_s"] / est["plain_s"]
    print(f"estimate without phases: {est['plain_s'] * 1e3:.1f} ms; with a 32k-token phase: "
          f"{est['phased_warm_s'] * 1e3:.1f} ms once its layout search is cached ({ratio:.1f}x, target < 3x), "
          f"{est['phased_cold_s']:.2f} s the first time (the phase's layout search)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2])))
    else:
        main()
