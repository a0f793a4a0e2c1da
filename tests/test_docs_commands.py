"""The docs' commands work as written: every line of docs/pretraining.md's command blocks marked `# CPU` runs, in
the order the page gives them, in the project's environment (the block's own `source .venv/bin/activate`), from a
folder laid out as the repository root (its packages and configs linked in, so nothing is written into the
checkout). The decoder the page converts (`my-decoder/`) is the tiny random Llama the page itself builds offline."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKED = (".venv", "analysis", "core", "evaluation", "model_cards", "modeling_eurobert", "pretraining", "recipes")


def cpu_commands(page: Path) -> list[str]:
    """The `# CPU` lines of a page's ```bash blocks, in order (a trailing comment kept: bash ignores it)."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    return [line for block in blocks for line in block.splitlines() if re.search(r"# CPU\b", line)]


def test_the_pages_cpu_lines_are_the_ones_expected():
    commands = cpu_commands(ROOT / "docs" / "pretraining.md")
    assert [c.split()[2] if c.startswith("python") else c.split()[1] for c in commands] == [
        "recipes.pretrain",
        "launch",
        "recipes.cpt",
        '"from',
        "modeling_eurobert.convert",
        "recipes.cpt",
        "evaluation.run",
    ]


def test_every_page_with_commands_names_the_environment():
    """The README and each docs page that shows commands say where they run (bare `python -m` and `accelerate` fail
    outside the environment): `source .venv/bin/activate`, once per page."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    with_commands = [p for p in pages if re.search(r"python -m |accelerate launch|bash bench/", p.read_text())]
    assert len(with_commands) >= 8
    for page in with_commands:
        assert " ".join(page.read_text().split()).count("`source .venv/bin/activate` once per") == 1, page.name


@pytest.mark.slow  # ~1 min: the debug run, its 2-process twin, two CPT runs, a conversion and a fine-tuning run
def test_pretraining_page_runs_as_written(tmp_path, data_dir):
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    script = "\n".join(["set -e", "source .venv/bin/activate", *cpu_commands(ROOT / "docs" / "pretraining.md")])
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "MLM_VS_CLM_DATA": str(data_dir), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, "\n".join(line for line in done.stderr.splitlines() if "it/s" not in line)[-3000:]
    for run in ("debug", "debug-ddp", "debug-cpt", "my-decoder-cpt"):
        assert (tmp_path / "out" / run / "run_info.json").is_file()
    assert list((tmp_path / "out" / "results" / "my-decoder-cpt" / "sst2").glob("lr*-seed0.json"))
