"""What a person sees while a run trains: steps, loss and time left of a pretraining and a fine-tuning run
(`core.progress`; a log's lines when the console is not a terminal), and each fine-tuning run's scores at its end."""

import re

import pytest

from core import store
from evaluation import run
from recipes import pretrain
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

# A run's progress where the console is not a terminal (pytest's capture, a log file): `core.progress.print_line`.
LINE = (
    r"(?P<label>[^\n]*): step (?P<step>\d+)/(?P<total>\d+)(, loss (?P<loss>[0-9.e+-]+|nan))?, [0-9:]+ elapsed"
    r"(, [0-9:]+ left)?\n"
)


def test_a_finetuning_run_shows_its_steps_and_loss_and_ends_with_its_scores(data_dir, tmp_path, call_main):
    model = build_tiny_eurobert(tmp_path / "tiny", build_tiny_tokenizer(data_dir))
    done = call_main(
        run.main,
        *("--model", model, "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0", "--max_steps", "6"),
        *("--max_train", "48", "--max_eval", "16", "--max_length", "48", "--logging_steps", "2"),
        *("--data_dir", data_dir, "--output", tmp_path / "results"),
    )
    assert done.returncode == 0, done.stderr
    steps = [m.groupdict() for m in re.finditer(LINE, done.stderr)]
    assert steps and steps[-1]["label"] == "fine-tuning lr=0.001 seed=0"  # the console is a capture: lines
    assert (steps[-1]["step"], steps[-1]["total"]) == ("6", "6") and float(steps[-1]["loss"]) > 0
    [path] = store.result_files(tmp_path / "results")
    record = store.read_result(path)
    validation, test = (store.main_score(record, split) for split in ("validation", "test"))
    line = f"tiny sst2 lr=0.001 seed=0: accuracy validation {validation:.4f}, test {test:.4f}"
    assert line in done.stderr.splitlines(), done.stderr
    assert done.stderr.index(line) > done.stderr.index("step 6/6")  # the scores come when the run ends


def test_a_diverged_run_says_so_instead_of_scores():
    record = {"model": "m", "task": "sst2", "lr": 1e6, "seed": 1, "status": store.DIVERGED}
    assert run.score_line(record) == "m sst2 lr=1e+06 seed=1: diverged (the loss turned NaN/inf), no score"


def test_a_pretraining_run_shows_its_steps_and_loss(data_dir, tmp_path, call_main, monkeypatch):
    monkeypatch.setenv("MLM_VS_CLM_PROGRESS_SECONDS", "0")  # a line at every step (a log's default: every 30 s)
    # --disable_tqdm's default follows transformers' verbosity, which the grid's main (above) lowered in this process
    done = call_main(
        pretrain.main,
        *("--config", "recipes/configs/debug.yaml", "--output_dir", tmp_path / "debug", "--max_steps", "12"),
        *("--data_dir", data_dir, "--disable_tqdm", "false"),
    )
    assert done.returncode == 0, done.stderr
    lines = [m.groupdict() for m in re.finditer(LINE, done.stderr)]
    assert [int(line["step"]) for line in lines] == [*range(1, 13), 12]  # a line at each step, one at the end
    assert {(line["label"], line["total"]) for line in lines} == {("pretraining", "12")}
    assert [line["loss"] is None for line in lines] == [True] * 5 + [False] * 8  # the first loss: at step 5
    assert float(lines[-1]["loss"]) > 0
    assert "{'loss': '" in done.stdout  # every log line too (tokens/s, data share)


@pytest.mark.slow  # two worker processes
def test_a_grid_of_workers_prints_each_runs_scores(data_dir, tmp_path, call_main):
    model = build_tiny_eurobert(tmp_path / "tiny", build_tiny_tokenizer(data_dir))
    done = call_main(
        run.main,
        *("--model", model, "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0,1", "--max_steps", "2"),
        *("--max_train", "32", "--max_eval", "16", "--max_length", "32", "--workers", "2"),
        *("--data_dir", data_dir, "--output", tmp_path / "results"),
    )
    assert done.returncode == 0, done.stderr
    lines = sorted(run.score_line(store.read_result(path)) for path in store.result_files(tmp_path / "results"))
    assert len(lines) == 2 and all(line in done.stderr.splitlines() for line in lines), done.stderr
