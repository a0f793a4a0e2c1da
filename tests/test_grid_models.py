"""The grid's fine-tuned models: retrieval tasks that share training pairs are trained once; `--save_models` keeps
models that reload in a fresh process with plain transformers / sentence-transformers and reproduce the evaluated
predictions; the paper plan counts the shared retrieval training once."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from transformers import TrainerCallback

from core import store
from evaluation import common, extractive_qa, finetune_args, model_inputs, run, tasks, token_classification
from recipes import plan
from tests.fixtures.file_modes import not_following_umask
from tests.fixtures.finetuning_callback import on_every_finetuning
from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

SMOKE = dict(
    max_steps=4,
    batch_size=8,
    eval_batch_size=32,
    max_train=48,
    max_eval=12,
    max_length=64,
    qa_max_length=96,
    doc_stride=32,
    logging_steps=1,
    precision="fp32",
)
SAVED = ("sst2", "conll2003", "squad", "scifact_b")


class CountTrainings(TrainerCallback):
    """Counts `Trainer.train()` calls (added to every fine-tuning Trainer by `on_every_finetuning`)."""

    def __init__(self):
        self.n = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.n += 1


def write_scifact_b(folder: Path) -> Path:
    """scifact under another name, with the same corpus, queries and train qrels (so the same training pairs) but
    another evaluation: its test queries are drawn from the train claims instead of the test claims."""
    text = (tasks.TASKS_DIR / "scifact.yaml").read_text().replace("name: scifact", "name: scifact_b")
    path = folder / "scifact_b.yaml"
    path.write_text(text.replace("test: ir/scifact/qrels/test.tsv", "test: ir/scifact/qrels/train.tsv"))
    return path


@pytest.fixture(scope="module")
def grid_run(one_thread, tmp_path_factory, data_dir):
    """One grid over the four families plus scifact_b, keeping four models; then scifact and scifact_b alone."""
    root = tmp_path_factory.mktemp("grid-models")
    model = build_tiny_eurobert(root / "tiny-clm", build_tiny_tokenizer(data_dir), is_causal=True)
    scifact_b = write_scifact_b(root)
    protocol = finetune_args.ProtocolArgs(**SMOKE, data_dir=str(data_dir))
    grid = run.GridArgs(
        model=str(model),
        tasks=f"sst2,conll2003,squad,scifact,{scifact_b}",
        lrs="1e-3",
        seeds="0",
        output=str(root / "results"),
        save_models="sst2,conll2003,squad,scifact_b:1e-3:0",
    )
    with on_every_finetuning(CountTrainings()) as counter:
        written = run.run_grid(grid, protocol)
        trainings = {"grid": counter.n}
        for name, task in (("scifact", "scifact"), ("scifact_b", str(scifact_b))):
            counter.n = 0
            run.run_grid(
                dataclasses.replace(grid, tasks=task, output=str(root / f"alone-{name}"), save_models=""), protocol
            )
            trainings[name] = counter.n
    return {
        "root": root,
        "model": model,
        "grid": grid,
        "protocol": protocol,
        "written": written,
        "trainings": trainings,
        "scifact_b": scifact_b,
    }


def result(output, task: str) -> dict:
    return json.loads(Path(output, "tiny-clm", task, "lr0.001-seed0.json").read_text())


def scored(record: dict) -> dict:
    return {k: record[k] for k in ("status", "validation", "test", "per_instance", "identity", "config")}


def test_retrieval_tasks_sharing_training_pairs_train_once(grid_run):
    assert len(grid_run["written"]) == 5
    assert grid_run["trainings"] == {"grid": 4, "scifact": 1, "scifact_b": 1}  # sst2, conll2003, squad, one for IR
    output = grid_run["grid"].output
    for task in ("scifact", "scifact_b"):
        shared, alone = result(output, task), result(grid_run["root"] / f"alone-{task}", task)
        assert shared["shared_training"] == ["scifact", "scifact_b"] and "shared_training" not in alone
        assert shared["status"] == "ok" and scored(shared) == scored(alone), task  # same seed, same scores
    qids = {task: [r["qid"] for r in result(output, task)["per_instance"]["test"]] for task in ("scifact", "scifact_b")}
    assert qids["scifact"] != qids["scifact_b"]  # each task scored on its own evaluation split
    assert "shared_training" not in result(output, "sst2")


RELOAD = r"""
import json, sys
import torch
from transformers import (AutoModelForQuestionAnswering, AutoModelForSequenceClassification,
                          AutoModelForTokenClassification, AutoTokenizer)
from sentence_transformers import SentenceTransformer

jobs, out = json.load(open(sys.argv[1])), {}
heads = {"sc": AutoModelForSequenceClassification, "tc": AutoModelForTokenClassification,
         "qa": AutoModelForQuestionAnswering}
for family, job in jobs.items():
    if family == "ir":  # sentence-transformers folder: encoder, mean pooling and the Query/Document prompts
        model = SentenceTransformer(job["dir"], trust_remote_code=True)
        queries = model.encode_query(list(job["queries"].values()), batch_size=32, convert_to_tensor=True)
        docs = model.encode_document(list(job["corpus"].values()), batch_size=32, convert_to_tensor=True)
        top = torch.topk(model.similarity(queries.float(), docs.float()), k=10, dim=1).indices.tolist()
        ids = list(job["corpus"])
        out[family] = {q: [ids[j] for j in row] for q, row in zip(job["queries"], top)}
        continue
    tokenizer = AutoTokenizer.from_pretrained(job["dir"])
    model = heads[family].from_pretrained(job["dir"], trust_remote_code=True).eval()
    if family == "qa":
        encoded = tokenizer(job["questions"], job["contexts"], truncation="only_second", max_length=job["max_length"],
                            stride=job["stride"], return_overflowing_tokens=True)
    else:
        encoded = tokenizer(job["texts"], truncation=True, max_length=job["max_length"])
    logits = []
    for i in range(0, len(encoded["input_ids"]), 32):  # the evaluation's batches (eval_batch_size 32)
        batch = tokenizer.pad({"input_ids": encoded["input_ids"][i : i + 32]}, return_tensors="pt")
        with torch.no_grad():
            output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        parts = [output.start_logits, output.end_logits] if family == "qa" else [output.logits]
        logits += [[p[j].tolist() for p in parts] for j in range(len(batch["input_ids"]))]
    out[family] = {"input_ids": encoded["input_ids"], "logits": logits, "id2label": model.config.id2label}
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.mark.slow  # a fresh process that cannot import this project
def test_saved_models_reload_in_a_fresh_process_and_reproduce_the_predictions(grid_run, tmp_path):
    output, protocol = grid_run["grid"].output, grid_run["protocol"]
    dirs = {task: Path(output, "tiny-clm", task, "lr0.001-seed0.model") for task in (*SAVED, "scifact")}
    assert [t for t, d in dirs.items() if d.is_dir()] == list(SAVED)  # scifact's model was not asked for
    assert [not_following_umask(dirs[task]) for task in SAVED] == [[]] * len(SAVED)  # R4: weights were 0600
    for task in SAVED:
        info = json.loads((dirs[task] / store.FINETUNE_INFO_NAME).read_text())
        record = result(output, task)
        assert info["identity"] == record["identity"] and info["test"] == record["test"] and info["lr"] == 1e-3
        assert info["format"] == store.FINETUNE_INFO_FORMAT
        for path in dirs[task].rglob("*.json"):  # publishable: no local path anywhere
            assert str(grid_run["root"]) not in path.read_text() and "/tmp" not in path.read_text(), path
    assert {"modules.json", "config_sentence_transformers.json", "modeling_eurobert.py"} <= {
        p.name for p in dirs["scifact_b"].iterdir()
    }
    assert json.loads((dirs["scifact_b"] / "config_sentence_transformers.json").read_text())["prompts"] == {
        "query": "Query: ",
        "document": "Document: ",
    }

    # What the evaluation fed each model, rebuilt with this repository's own code.
    args = protocol.for_run(lr=1e-3)
    tokenizer = model_inputs.load_finetuning_tokenizer(grid_run["model"])
    sst2, conll, squad = (tasks.load_task(t) for t in ("sst2", "conll2003", "squad"))
    tagged = token_classification.tokenize(conll, tokenizer, args)["test"]
    squad_splits, windows = extractive_qa.tokenize(squad, tokenizer, args)
    ir_split = common.task_splits(tasks.load_task(grid_run["scifact_b"]), args)["test"]
    jobs = {
        "sc": {
            "dir": str(dirs["sst2"]),
            "texts": list(common.task_splits(sst2, args)["test"]["text"]),
            "max_length": 64,
        },
        "tc": {
            "dir": str(dirs["conll2003"]),
            "max_length": 64,
            "texts": [token_classification.join_words(words)[0] for words in tagged["tokens"]],
        },
        "qa": {
            "dir": str(dirs["squad"]),
            "questions": [q.lstrip() for q in squad_splits["test"]["question"]],
            "contexts": list(squad_splits["test"]["context"]),
            "max_length": 96,
            "stride": 32,
        },
        "ir": {"dir": str(dirs["scifact_b"]), "queries": ir_split.queries, "corpus": ir_split.corpus},
    }
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    # A fresh interpreter outside the repository: nothing of ours is importable, the saved folders must suffice.
    done = subprocess.run(
        [sys.executable, "-c", RELOAD, str(tmp_path / "jobs.json"), str(tmp_path / "out.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())

    expected = {task: [r["prediction"] for r in result(output, task)["per_instance"]["test"]] for task in SAVED[:3]}
    assert [out["sc"]["id2label"][str(int(np.argmax(logits[0])))] for logits in out["sc"]["logits"]] == expected["sst2"]
    assert out["tc"]["input_ids"] == list(tagged["input_ids"])  # the saved tokenizer encodes as the evaluation did
    words = [
        token_classification.word_tags(np.asarray(logits[0]), w, len(t), conll.labels, conll.tc_labelling)
        for logits, w, t in zip(out["tc"]["logits"], tagged["word_ids"], tagged["tags"])
    ]
    assert words == expected["conll2003"]
    assert out["qa"]["input_ids"] == list(windows["test"]["input_ids"])
    length = max(len(ids) for ids in windows["test"]["input_ids"])
    start, end = (np.full((len(out["qa"]["logits"]), length), -1e4, np.float32) for _ in range(2))
    for i, (s, e) in enumerate(out["qa"]["logits"]):
        start[i, : len(s)], end[i, : len(e)] = s, e
    answers = extractive_qa.postprocess(
        squad_splits["test"], windows["test"], start, end, args.n_best, args.max_answer_length
    )
    assert [answers[i] for i in squad_splits["test"]["id"]] == expected["squad"]
    rankings = {r["qid"]: r["ranking"][:10] for r in result(output, "scifact_b")["per_instance"]["test"]}
    assert out["ir"] == rankings


def test_a_missing_saved_model_is_trained_again_and_the_selection_is_checked(grid_run):
    grid, protocol = grid_run["grid"], grid_run["protocol"]
    model_dir = Path(grid.output, "tiny-clm", "sst2", "lr0.001-seed0.model")
    before = result(grid.output, "sst2")
    assert run.run_grid(dataclasses.replace(grid, save_models=""), protocol) == []  # saving is not in the identity
    __import__("shutil").rmtree(model_dir)
    half = model_dir.with_name(f".{model_dir.name}.k1ll3d00.tmp")  # a save killed mid-write leaves its staging
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"half")
    again = run.run_grid(dataclasses.replace(grid, tasks="sst2", save_models="sst2"), protocol)
    assert again == [Path(grid.output, "tiny-clm", "sst2", "lr0.001-seed0.json")] and model_dir.is_dir()
    assert not half.exists()
    assert scored(result(grid.output, "sst2")) == scored(before)
    for selection in ("sst3", "sst2:1e-2:0", "sst2:1e-3", "squad:x:0"):
        with pytest.raises(ValueError, match=f"--save_models entry '{selection}' names no run of this grid"):
            run.run_grid(
                dataclasses.replace(grid, save_models=selection, output=str(grid_run["root"] / "bad")), protocol
            )
    assert not (grid_run["root"] / "bad").exists()


def test_paper_plan_counts_the_shared_retrieval_training_once():
    pairs = {name: tasks.load_task(name).hub.train_pairs for name in plan.SHARED_IR_TRAINING}
    assert len({json.dumps(p, sort_keys=True) for p in pairs.values()}) == 1 and None not in pairs.values()
    assert plan.EVAL_FINETUNINGS_PER_LR_SEED == plan.EVAL_TASKS - 2 == 10
    per_task = sum(
        plan.EVAL_RUNS_PER_TASK * plan.EVAL_TOKENS_PER_RUN * plan.flops_per_token(size, 0.0)
        for size in (n.split("-")[0] for n in plan.evaluated_models())
    )
    assert plan.eval_flops() == pytest.approx(10 * per_task)
    rate = plan.GPUS["H100"] * 0.4
    hours, line = plan.evaluation_line(rate)
    assert hours == pytest.approx(10 * per_task / rate / 3600)
    assert line.startswith("Evaluation: 18,000 results from 15,000 fine-tunings") and "to be measured" in line
    assert plan.evaluation_line(rate, eval_runs_per_gpu_hour=50.0) == (
        300.0,
        "Evaluation: 18,000 results from 15,000 fine-tunings (msmarco, nq, mldr share one per model, LR and "
        "seed), 300 GPU-hours at the measured 50.0 fine-tunings per GPU-hour.",
    )
