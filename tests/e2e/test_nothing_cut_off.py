"""Nothing cut off (issue 19 item 8): every page at a laptop's 1280x800 and a desktop's 1920x1080, in real headless
Chromium against the app as deployed, with the default scenario and with the issue's questions (Llama 3.1 70B,
15.6T tokens, 1,024 H100: "within 60 days", "at most $10M"), every expander open, every Benchmarks tab shown, the
layout search run and a refused field value: no label, figure, field value or placeholder, message, caption, code
block or table column is cut off (conftest.cut_off says what it checks and which tables may scroll sideways, and
why). Screenshots in test-artifacts/cut-off/."""
import re

import pytest

from tests.e2e.conftest import (ARTIFACTS, VIEWPORTS, ask, cut_off, go_to, no_exception, open_expanders, open_page,
                                wait_for_app)

pytestmark = pytest.mark.e2e
PAGES = ["Scenario", "Memory", "Layout search", "Cost & carbon", "Vendor choice", "Benchmarks", "Summary report"]
QUESTIONS = {"default": None, "within-60-days": ("Deadline (days)", "60"),
             "at-most-10M-usd": ("Budget (USD)", "10000000")}


def whole_page_shot(page, name: str) -> None:
    """The whole page (Streamlit scrolls inside its main block: the viewport grows to the content for the shot)."""
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], height + 40)})
    page.wait_for_timeout(400)
    (ARTIFACTS / "cut-off").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "cut-off" / f"{name}.png"))
    page.set_viewport_size(size)
    page.wait_for_timeout(200)


def check(page, name: str) -> None:
    no_exception(page)
    open_expanders(page)
    assert cut_off(page) == [], name         # at the viewport's own size, before the tall screenshot
    whole_page_shot(page, name)


@pytest.mark.parametrize("question", list(QUESTIONS))
@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_no_page_cuts_anything_off(app_url, browser, size, question):
    context = browser.new_context(viewport=VIEWPORTS[size])
    page = context.new_page()
    try:
        open_page(page, app_url)
        if QUESTIONS[question]:
            ask(page, *QUESTIONS[question])
        for title in PAGES:
            go_to(page, title)
            slug = f"{question}-{re.sub(r'[^a-z]+', '-', title.lower())}-{size}"
            if title == "Layout search":
                page.get_by_role("button", name="Run layout search").click()
                page.get_by_text(re.compile(r"^Best layouts")).wait_for(timeout=120_000)
                wait_for_app(page)
            if title == "Benchmarks":
                for tab in page.get_by_role("tab").all_inner_texts():
                    page.get_by_role("tab", name=tab).click()
                    wait_for_app(page)
                    check(page, f"{slug}-{re.sub(r'[^a-z]+', '-', tab.lower())}")
                continue
            check(page, slug)
        if question == "default":               # a refused value's message under its row, not in its narrow column
            go_to(page, "Scenario")
            field = page.get_by_role("spinbutton", name="Number of accelerators")
            field.fill("1000")
            field.press("Enter")
            wait_for_app(page)
            message = page.get_by_test_id("stAlert").filter(has_text="No layout splits this model over 1,000")
            assert message.bounding_box()["width"] >= 400
            check(page, f"refused-field-scenario-{size}")
    finally:
        context.close()
