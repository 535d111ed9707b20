"""How the pages escape text from users and the store (ui/escape.py)."""

import re

from hypothesis import given, strategies as st

from ui.escape import md_code


def test_a_code_span_shows_its_text_as_typed_whatever_it_holds():
    # CommonMark 6.1: inside a code span backslash escapes are literal, and the span ends at a backtick run as long
    # as its fence; so the text goes in unescaped, inside a fence longer than any run of backticks it holds
    assert md_code("python -m benchmarks_db trust upload:8237ab") == "`python -m benchmarks_db trust upload:8237ab`"
    assert md_code("a `b` c") == "``a `b` c``"
    assert md_code("``x") == "``` ``x ```"
    assert md_code("two\nlines") == "`two lines`"


@given(st.text(max_size=60))
def test_a_code_span_is_never_closed_early_and_keeps_the_text(text):
    span = md_code(text)
    fence = len(span) - len(span.lstrip("`"))
    inner = span[fence:-fence]
    # how a CommonMark renderer reads the span: one space stripped from each end when both ends are spaces
    body = inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip(" ") else inner
    assert body == text.replace("\r", " ").replace("\n", " ")
    assert all(len(run) < fence for run in re.findall(r"`+", inner))
