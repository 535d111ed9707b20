"""Text from users or the store made safe where the pages show it: in markdown, in plotly labels, and in CSV cells a
spreadsheet would otherwise run as formulas."""
from __future__ import annotations

import html
import re

import pandas as pd

MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$&:")
AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=@)|(?<=www)(?=\.)", re.IGNORECASE)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # a spreadsheet reads a cell starting so as a formula (OWASP CSV injection)


def problems_text(problems: list[tuple[str, str]]) -> str:
    """ScenarioError problems as one line of escaped markdown (they may quote what a link or a file held)."""
    return "; ".join(f"{md_escape(field)}: {md_escape(msg)}" for field, msg in problems)


def md_escape(text) -> str:
    """Text from users or the store, safe inside markdown: every markdown and HTML special character escaped, and a
    word joiner (invisible) in '://', after '@' and in 'www.', where the renderer would otherwise link the plain text
    (GitHub-flavoured autolinks are found after escapes are resolved)."""
    text = AUTOLINK.sub("\u2060", str(text))
    return "".join("\\" + ch if ch in MARKDOWN_SPECIAL else ch for ch in text)


def md_code(text) -> str:
    """Text as an inline code span, copyable as shown: a code span shows backslash escapes literally (a command
    rendered as `upload\\:8237`), so none are added; its backtick fence is one longer than any run of backticks in the
    text (CommonMark 6.1), with a space inside where CommonMark would otherwise join or strip; newlines become spaces."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    # CommonMark strips one space from each end when both ends are spaces: pad those too, and a text at a backtick
    spaced = text.startswith(" ") and text.endswith(" ") and text.strip(" ")
    pad = " " if text.startswith("`") or text.endswith("`") or spaced else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plot_text(text) -> str:
    """Text from the store, safe as a plotly label, legend name or hover value: plotly draws <a href>, <b>, <br>
    from its text, and shows &lt; &gt; &amp; as the characters again."""
    return html.escape(str(text), quote=False)


def csv_cell(value):
    """A value as a CSV export may hold it: text a spreadsheet would run as a formula (starting with = + - @, tab or
    carriage return) gets a leading apostrophe, which spreadsheets show as text (OWASP CSV injection)."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell through csv_cell: for downloads, and for tables of store text on screen (the
    table's own toolbar exports CSV in the browser, beyond the server's reach)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    out.columns = [csv_cell(str(c)) for c in out.columns]
    return out
