"""The fuzz tier over ``ledger export --format csv``'s cells (issue 38, the twenty-eighth pass,
M1): whatever text a row holds (a knob value, a server's error), no cell of the CSV a spreadsheet
opens starts a formula, every cell reads back as the text written (with a leading ``'`` when it
would), and a number stays the number."""

from __future__ import annotations

import csv
import io
import re

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.ledger.rawrow import RawRow
from servelab.report.ledger import csv_chunks

FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")
PLAIN = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
starts = st.sampled_from(["", *FORMULA, "'", " ", "\ufeff", "=-", "-1", "+1e5"])
cells = st.one_of(
    st.builds(lambda a, b: a + b, starts, st.text(max_size=30)),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
)


@given(values=st.lists(cells, min_size=1, max_size=6))
def test_no_text_cell_starts_a_formula(values: list[object]) -> None:
    columns = [f"c{i}" for i in range(len(values))]
    row = RawRow(dict(zip(columns, values, strict=True)))  # type: ignore[arg-type]
    text = "".join(csv_chunks("knob_changes", columns, [row]))
    (head, back) = list(csv.reader(io.StringIO(text, newline="")))
    assert head == columns
    for value, cell in zip(values, back, strict=True):
        if isinstance(value, str):
            guarded = value.startswith(FORMULA) and PLAIN.fullmatch(value) is None
            assert cell == ("'" + value if guarded else value), (value, cell)
        elif isinstance(value, int):
            assert int(cell) == value
        if cell.startswith(FORMULA):
            assert PLAIN.fullmatch(cell), cell
