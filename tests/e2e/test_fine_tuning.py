"""A fine-tuning journey in real headless Chromium at a laptop's 1280x800 and a desktop's 1920x1080, against the app
started as deployed: "LoRA fine-tune of a 70B on one node: how long and how much" - the job picked on the Scenario
page, the dataset and the node entered, the Memory page's trainable and frozen parts, and the answer for a week's
deadline naming the job. Screenshots in test-artifacts/."""
import re
from urllib.parse import parse_qs, urlparse

import pytest

from engine.inputs import parse_scenario
from engine.presentation.share import decode, encode
from tests.e2e.conftest import (answered, cut_off, go_to, metrics, no_exception, open_page, screenshot_whole,
                                wait_for_app)
from tests.e2e.test_manager import VIEWPORTS

pytestmark = pytest.mark.e2e


@pytest.fixture(params=list(VIEWPORTS))
def sized(browser, request):
    context = browser.new_context(viewport=VIEWPORTS[request.param])
    yield request.param, context.new_page()
    context.close()


def enter(page, label: str, value: str) -> None:
    field = page.get_by_role("spinbutton", name=label, exact=True)
    field.fill(value)
    field.press("Enter")
    wait_for_app(page)


def test_a_lora_fine_tune_of_a_70b_on_one_node_how_long_and_how_much(app_url, sized):
    size, page = sized
    open_page(page, app_url)                                   # the default: Llama 3.1 70B
    page.get_by_test_id("stRadio").filter(has_text="Job").get_by_text("LoRA fine-tune", exact=True).click()
    wait_for_app(page)
    enter(page, "Training tokens (billions)", "0.5")
    enter(page, "Number of accelerators", "8")
    no_exception(page)
    sc = decode(parse_qs(urlparse(page.url).query)["sc"][0]).scenario
    assert (sc.training.method, sc.training.total_tokens, sc.cluster.n_gpus) == ("lora", 0.5e9, 8)
    assert page.get_by_text(re.compile(r"^Fits: ")).count() == 1
    assert page.get_by_text(re.compile(r"is fewer than the model's")).count() == 0   # no pre-training warning
    assert re.fullmatch(r"[\d.]+ (days|hours)", metrics(page)["Time to train"]), metrics(page)
    screenshot_whole(page, f"fine-tune-lora-scenario-{size}")

    target = page.get_by_role("spinbutton", name="Deadline (days)")
    target.fill("7")
    target.press("Enter")
    answer = page.get_by_text(re.compile(r"^LoRA fine-tune of Llama 3\.1 70B \(rank 16, attention; 500 million "
                                         r"tokens\): .* train it within 7 days"))
    answered(page, answer)
    wait_for_app(page)
    no_exception(page)
    assert cut_off(page) == []
    screenshot_whole(page, f"fine-tune-lora-answer-{size}")

    go_to(page, "Memory")
    no_exception(page)
    assert page.get_by_text("Trainable parameters").count() == 1 and page.get_by_text("65.5M").count() == 1
    assert page.get_by_text("Frozen parameters").count() == 1
    assert cut_off(page) == []
    screenshot_whole(page, f"fine-tune-lora-memory-{size}")


def test_a_full_fine_tune_that_fits_nowhere_shows_what_would_fit(app_url, sized):
    size, page = sized
    sc = parse_scenario({"model": {"preset": "llama2-13b"},
                         "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 0.5e9,
                                      "method": "full"},
                         "cluster": {"accelerator": "A100-SXM4-40GB", "n_gpus": 2, "host_memory_gb_per_gpu": 16},
                         "layout": {"tp": 2, "dp": 1, "zero_stage": 3, "micro_batch_size": 1}})
    open_page(page, f"{app_url}/?sc={encode(sc)}")
    no_exception(page)
    assert page.get_by_text("What would make it fit").count() == 1
    screenshot_whole(page, f"fine-tune-nothing-fits-{size}")
    for option in ("LoRA: ", "QLoRA: ", "Offload to CPU memory: ", "More accelerators: "):
        assert page.get_by_text(re.compile("^" + option)).count() == 1, option
    assert cut_off(page) == []
    page.get_by_role("button", name="Use LoRA").click()
    wait_for_app(page)
    assert page.get_by_text(re.compile(r"^Fits: ")).count() == 1
    screenshot_whole(page, f"fine-tune-nothing-fits-then-lora-{size}")
