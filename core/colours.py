"""One colour per pretraining objective, the same in every figure: a model of the study's grammar (`core.names`) gets
its objective's colour whatever its size, scale or step (CLM, MLM at each masking ratio, PFS, and CPT from a CLM or an
MLM base each have their own); a label outside the grammar, one no objective uses, by its place in the figure.
"""

from core import names

# matplotlib's default cycle ("tab10"), named by what each colour means here.
OBJECTIVE_COLOURS = {
    "clm": "C0",
    "mlm40": "C1",
    "pfs": "C2",
    "mlm20": "C3",
    "cpt-clm": "C4",
    "cpt-mlm": "C5",
    "mlm30": "C6",
    "mlm50": "C8",
}
OTHER_MLM = "C9"  # another masking ratio
OTHERS = ("tab:olive", "black", "navy", "maroon", "teal", "gold", "darkgreen")  # outside the grammar (grey: baselines)


def objective_key(name: str) -> str | None:
    """ "clm", "mlm<ratio>", "pfs", "cpt-clm" or "cpt-mlm" for a name of the study's grammar, else None."""
    parsed = names.try_parse_name(name)
    if parsed is None:
        return None
    if parsed.kind == "cpt":
        return "cpt-clm" if parsed.base == "clm" else "cpt-mlm"
    return "pfs" if parsed.kind == "pfs" else parsed.objective_label


def of(name: str, index: int = 0) -> str:
    """The colour of `name`: its objective's (`OBJECTIVE_COLOURS`), or, outside the grammar, the `index`-th of
    `OTHERS` (the label's place among the figure's labels outside the grammar)."""
    key = objective_key(name)
    if key is None:
        return OTHERS[index % len(OTHERS)]
    return OBJECTIVE_COLOURS.get(key, OTHER_MLM)
