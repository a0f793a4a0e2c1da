"""`python -m evaluation.inspect`: the real CLI on every offline task family and on a task YAML path."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation import inspect
from tests.fixtures.tokenizer_families import build_all

REPO = Path(__file__).resolve().parents[1]
NER = "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n\nPeter\tB-PER\nBlackburn\tI-PER\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, data_dir):
    """A directory holding only a Llama-3-style byte-level BPE tokenizer (all that inspect reads)."""
    path = tmp_path_factory.mktemp("llama3-bpe")
    build_all(data_dir)["llama3_bpe"].save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def custom_task(tmp_path_factory):
    """A new TC dataset in the harness's CoNLL layout, described by its own YAML (no code)."""
    root = tmp_path_factory.mktemp("my_ner")
    (root / "ner.txt").write_text(NER, encoding="utf-8")
    (root / "my_ner.yaml").write_text(
        "name: my_ner\nfamily: tc\nmetric: sentence_macro_f1\nbudget: {epochs: 1}\ntc_labelling: first\n"
        "labels: [O, B-PER, I-PER, B-ORG, I-ORG, B-MISC, I-MISC]\n"
        'offline: {format: conll, root: ., separator: "\\t", token_column: 0, tag_column: 1,\n'
        "          files: {train: ner.txt, validation: ner.txt, test: ner.txt}}\n",
        encoding="utf-8",
    )
    return root / "my_ner.yaml"


def run_cli(*argv):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "evaluation.inspect", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
        check=False,
    )


@pytest.mark.slow  # the process boundary: `python -m evaluation.inspect`
def test_cli_shows_every_family_and_a_yaml_task(model_dir, custom_task, data_dir):
    tasks = f"sst2,conll2003,squad,scifact,{custom_task}"
    done = run_cli("--model", model_dir, "--task", tasks, "--n", "2", "--data_dir", data_dir, "--max_length", "384")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    reports = dict(re.findall(r"^== (\S+) \((\w+)\)", done.stdout, flags=re.MULTILINE))
    assert reports == {"sst2": "sc", "conll2003": "tc", "squad": "qa", "scifact": "ir", "my_ner": "tc"}
    out = done.stdout
    # sc: the template-filled text and its label
    assert '[0] text: "a future they wo n\'t much care about"' in out and "label: 0 (negative)" in out
    # tc: byte-level tokens as the tokenizer writes them, the tag each carries, -100 where the loss ignores it
    assert "labelling: all" in out
    assert re.search(r"^\s+Ġre\S*\s+O\s+word 1 'rejects'$", out, flags=re.MULTILINE), out
    assert re.search(r"^\s+ĠG\S*\s+B-MISC\s+word 2 'German'$", out, flags=re.MULTILINE)
    assert re.search(r"^\s+<s>\s+-100\s+special$", out, flags=re.MULTILINE)
    # qa: the answer span in tokens
    assert re.search(r"answer span in window \d+: tokens \d+\.\.\d+: ", out)
    # ir: query and document with their prefixes, then their tokens
    assert "query: 'Query: " in out and "document: 'Document: " in out
    assert re.search(r"^\s+tokens \(\d+\) <s> Q", out, flags=re.MULTILINE)
    # the custom YAML's own file
    assert re.search(r"^\s+ĠBl\S*\s+I-PER\s+word 1 'Blackburn'$", out, flags=re.MULTILINE)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "sst3"], "error: unknown task 'sst3'"),
        (["--task", "sst2"], "error: no tokenizer found in"),  # a model directory without tokenizer
        (["--task", "ontonotes"], "error: task 'ontonotes' has no offline data"),  # a paper task not in the bundle
        (["--task", "sst2", "--split", "dev"], "error: argument --split: invalid choice"),
    ],
)
def test_bad_input_in_process(tmp_path, model_dir, capsys, argv, message):
    model = tmp_path if "sst2" in argv and "--split" not in argv else model_dir
    with pytest.raises(SystemExit) as exit_info:
        inspect.main(["--model", str(model), *argv])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""
    assert captured.err.startswith(message) and captured.err.count("\n") == 1
