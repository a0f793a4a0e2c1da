"""How a number is written in the project's tables (summary.csv and the report's Markdown, the held-out CSV, the
model cards): one rule, `table_cell`, each table naming its precision and its empty cell.

The precisions differ on purpose and are part of the committed files (the studies under docs/ regenerate byte for
byte): the report writes 4 significant digits, the held-out CSV 5 decimals (losses above 1), a model card 4
decimals below 10 and 2 above (scores in [0, 1], counts above).
"""

from __future__ import annotations

import math

__all__ = ["p_cell", "table_cell"]


def table_cell(value, spec: str = ".4g", missing: str = "") -> str:
    """`value` as a table cell: a float written with the format `spec`, `missing` for None or NaN, anything else
    (an int, a name) as `str` gives it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec) if isinstance(value, float) else str(value)


def p_cell(p, spec: str = ".4g", missing: str = "") -> str:
    """A p-value as a table cell (`table_cell`), never "0": one below 1e-6 is "< 1e-06"."""
    if isinstance(p, float) and not math.isnan(p) and p < 1e-6:
        return "< 1e-06"
    return table_cell(p, spec, missing)
