"""The bad-input table: every row is refused in one line `error: ...`, exit status 2, before anything is written.

Rows are (CLI main, argv, expected message fragment); `{out}` is replaced by a fresh output path. Every row must be
refused before work starts (no training), so the table stays fast. A new flag ships with its row here.
"""

import pytest

from core.cli import BadInput
from evaluation import run as grid
from recipes import manifest

ROWS = [
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs", "0", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs=-1e-5", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs", "1e-5", "--seeds", "0", "--warmup_ratio", "2",
                 "--output", "{out}"], "--warmup_ratio"),
    (grid.main, ["--model", "x", "--tasks", "sst2,sst2", "--lrs", "1e-5", "--seeds", "0", "--output", "{out}"],
     "more than once"),
    (manifest.main, ["--write_configs", "paper,toy"], "pass --output"),
]


@pytest.mark.parametrize("main, argv, fragment", ROWS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(main, argv, fragment, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(BadInput) as refused:
        main([a.replace("{out}", str(out)) for a in argv])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and fragment in err[0]
    assert not out.exists()
