"""`evaluation.mteb`: retrieval scored by mteb itself on the bundle's SciFact (a local mteb task), filed in the grid's
results layout and read by the report; a fine-tuned IR model scores what the grid recorded; bad input is refused."""

import dataclasses
import json
import random
from pathlib import Path

import pytest

from analysis import report, statistics
from core import store
from core.sentence_transformers_files import write_sentence_transformers_files
from evaluation import baselines, finetune_args, metrics, retrieval, run, tasks
from evaluation import mteb as mteb_eval
from tests.fixtures.tiny_models import (
    build_tiny_bert,
    build_tiny_eurobert,
    build_tiny_tokenizer,
)

ROOT = Path(__file__).resolve().parents[1]
N_QUERIES = 40

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory, data_dir):
    """A pretrained-looking checkpoint with its sentence-transformers files (as the recipes save them) and a plain
    BERT directory without them."""
    root = tmp_path_factory.mktemp("mteb-models")
    tokenizer = build_tiny_tokenizer(data_dir)
    checkpoint = build_tiny_eurobert(root / "tiny-mlm", tokenizer)
    write_sentence_transformers_files(checkpoint, max_seq_length=64)
    return {"checkpoint": checkpoint, "bert": build_tiny_bert(root / "tiny-bert", tokenizer)}


@pytest.fixture
def cli(call_main):
    """`python -m evaluation.mteb ARGV`, in this process."""
    return lambda *argv: call_main(mteb_eval.main, *argv)


def ours(model, data_dir, max_eval=N_QUERIES, task="scifact") -> tuple[dict, tasks.RetrievalSplit]:
    """This project's scores of `model` (a SentenceTransformer) on the task's test split."""
    split = tasks.load_splits(task, data_dir=data_dir, max_eval=max_eval)["test"]
    return metrics.retrieval_scores(retrieval.rank(model, split), split.qrels), split


def run_mteb(args: mteb_eval.MtebArgs) -> list[Path]:
    """What `evaluation.mteb.main` runs: every input checked, then each (model, task) evaluated; the files written."""
    return mteb_eval.execute(mteb_eval.list_jobs(args), args)


def test_cli_scores_with_mteb_and_files_a_record_the_report_reads(models, data_dir, tmp_path, cli):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "results"
    result = cli(
        "--model",
        str(models["checkpoint"]),
        "--tasks",
        "scifact",
        "--max_eval",
        str(N_QUERIES),
        "--output",
        str(out),
        "--data_dir",
        str(data_dir),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    path = out / "tiny-mlm" / "scifact-mteb" / "lr0-seed0.json"
    assert store.result_files(out) == [path] == [store.result_path(out, "tiny-mlm", "scifact-mteb", 0, 0)]
    record = store.read_result(path)
    assert {
        "format",
        "model",
        "task",
        "family",
        "lr",
        "seed",
        "status",
        "main_metric",
        "validation",
        "test",
        "per_instance",
        "trivial_baseline",
        "config",
        "identity",
        "versions",
        "git_commit",
    } <= set(record)
    assert (record["evaluation"], record["zero_shot"], record["main_metric"], record["validation"]) == (
        "mteb",
        True,
        "ndcg@10",
        None,
    )
    assert record["versions"]["mteb"] == record["identity"]["protocol"]["mteb"]
    assert str(tmp_path) not in json.dumps(record) and str(models["checkpoint"]) not in json.dumps(record)

    # mteb's numbers equal this project's scorer on the same encodings (the model's own prompts and pooling)
    encoder = SentenceTransformer(str(models["checkpoint"]), trust_remote_code=True)
    expected, split = ours(encoder, data_dir)
    assert record["identity"]["protocol"]["encoder"]["prompts"] == {"query": "Query: ", "document": "Document: "}
    for name in ("ndcg@10", "mrr@10", "recall@100"):
        assert record["test"][name] == pytest.approx(expected[name], abs=1e-4), name
    assert record["mteb_scores"]["test"]["ndcg_at_10"] == record["test"]["ndcg@10"]
    assert 0.0 < record["test"]["ndcg@10"] < 1.0  # a real ranking, not a degenerate one that anything would match

    # per query: mteb's values, in the grid's order, recomputable from the stored ranking and judgements
    instances = record["per_instance"]["test"]
    assert [r["qid"] for r in instances] == expected["per_instance"]["qid"] and len(instances) == N_QUERIES
    assert [r["ndcg@10"] for r in instances] == pytest.approx(expected["per_instance"]["ndcg@10"], abs=1e-6)
    assert [r["mrr@10"] for r in instances] == pytest.approx(expected["per_instance"]["mrr@10"], abs=1e-6)
    again = metrics.rescore("ir", instances)
    assert {k: v for k, v in again.items() if k != "per_instance"} == pytest.approx(record["test"], abs=1e-4)
    assert record["trivial_baseline"]["test"] == pytest.approx(baselines.random_ranking(split.qrels, len(split.corpus)))

    # the report lists it as its own row; the findings leave it out
    report.main([str(out), "--output", str(tmp_path / "report")])
    rows = (tmp_path / "report" / "summary.csv").read_text().splitlines()
    header, (row,) = rows[0].split(","), rows[1:]
    cells = dict(zip(header, row.split(",")))
    assert [cells[k] for k in ("model", "task", "metric", "n_seeds")] == ["tiny-mlm", "scifact-mteb", "ndcg@10", "1"]
    assert float(cells["mean"]) == pytest.approx(record["test"]["ndcg@10"], abs=1e-4) and cells["val_mean"] == ""
    assert not (tmp_path / "report" / "findings.csv").exists()

    # same identity: skipped, the file untouched
    stamp = path.stat().st_mtime_ns
    args = mteb_eval.MtebArgs(
        model=str(models["checkpoint"]), tasks="scifact", max_eval=N_QUERIES, output=str(out), data_dir=str(data_dir)
    )
    assert run_mteb(args) == [] and path.stat().st_mtime_ns == stamp
    # another identity (more queries): refused unless --rerun_changed, which moves the old record aside
    with pytest.raises(ValueError, match=r"made by something else: .*max_eval: 40 -> 20"):
        run_mteb(dataclasses.replace(args, max_eval=20))
    assert run_mteb(dataclasses.replace(args, max_eval=20, rerun_changed=True)) == [path]
    assert len(store.read_result(path)["per_instance"]["test"]) == 20
    assert len(list(path.parent.glob("lr0-seed0.json.replaced-*"))) == 1


def test_plain_encoder_gets_mean_pooling_and_the_task_prompts(models, data_dir, tmp_path):
    """A directory without sentence-transformers files is pooled as the grid pools it (`retrieval.build_model`)."""
    args = mteb_eval.MtebArgs(
        model=f"bert={models['bert']}",
        tasks="scifact",
        max_eval=20,
        output=str(tmp_path),
        data_dir=str(data_dir),
        max_length=48,
    )
    (path,) = run_mteb(args)
    record = store.read_result(path)
    encoder = record["identity"]["protocol"]["encoder"]
    assert path.parent.parent.name == "bert" and encoder["pooling"]["pooling_mode"] == "mean"
    assert encoder["prompts"] == {"query": "Query: ", "document": "Document: "} and encoder["max_seq_length"] == 48
    model = retrieval.build_model(models["bert"], tasks.load_task("scifact"), finetune_args.FinetuneArgs(max_length=48))
    expected, _ = ours(model.eval(), data_dir, max_eval=20)
    assert record["test"]["ndcg@10"] == pytest.approx(expected["ndcg@10"], abs=1e-4)


def test_fine_tuned_model_scores_what_the_grid_recorded(models, data_dir, tmp_path):
    """An IR model saved by `evaluation.run --save_models`, scored by mteb on the grid's test split, gets the grid's
    NDCG@10, and its record is filed under (and says) what it was fine-tuned from."""
    protocol = finetune_args.ProtocolArgs(
        max_steps=2,
        batch_size=8,
        eval_batch_size=32,
        max_train=16,
        max_eval=16,
        max_length=48,
        precision="fp32",
        data_dir=str(data_dir),
    )
    grid = run.GridArgs(
        model=str(models["checkpoint"]),
        tasks="scifact",
        lrs="1e-3",
        seeds="0",
        output=str(tmp_path / "grid"),
        save_models="scifact",
    )
    (finetuned,) = run.run_grid(grid, protocol)
    model_dir = finetuned.with_suffix(".model")
    (path,) = run_mteb(
        mteb_eval.MtebArgs(
            model=str(model_dir), tasks="scifact", max_eval=16, output=str(tmp_path / "grid"), data_dir=str(data_dir)
        )
    )
    assert path == tmp_path / "grid" / "tiny-mlm-scifact-lr0.001-seed0" / "scifact-mteb" / "lr0-seed0.json"
    record, grid_record = store.read_result(path), store.read_result(finetuned)
    assert record["zero_shot"] is False and record["finetuned_from"]["base_model"] == "tiny-mlm"
    assert (record["finetuned_from"]["lr"], record["finetuned_from"]["seed"]) == (1e-3, 0)
    assert record["test"]["ndcg@10"] == pytest.approx(grid_record["test"]["ndcg@10"], abs=1e-4)
    assert record["identity"]["model"]["sentence_transformers"]  # its pooling and prompts are part of its identity
    summary = statistics.summarize(statistics.load_results(tmp_path / "grid"))
    assert sorted((r["model"], r["task"]) for r in summary) == [
        ("tiny-mlm", "scifact"),
        ("tiny-mlm-scifact-lr0.001-seed0", "scifact-mteb"),
    ]


def test_registry_queries_are_subset_as_the_project_tasks_are():
    from datasets import Dataset

    qrels = {f"q{i}": {f"d{i}": 1} for i in range(30)} | {"q-none": {}}
    data = {
        "queries": Dataset.from_dict({"id": list(qrels), "text": list(qrels)}),
        "corpus": None,
        "relevant_docs": qrels,
        "top_ranked": None,
    }
    mteb_eval.subset_queries(data, 7)
    expected = sorted(random.Random(tasks.SUBSET_SEED).sample(sorted(q for q in qrels if qrels[q]), 7))
    assert sorted(data["relevant_docs"]) == expected == sorted(data["queries"]["id"])


@pytest.mark.parametrize("what", ["unknown task", "model without config"])
def test_cli_refuses_bad_input_in_one_line(models, tmp_path, what, cli):
    model, task = str(models["checkpoint"]), "scifact"
    if what == "unknown task":
        task, message = "NoSuchTask", "unknown task 'NoSuchTask': not a project IR task (mldr, msmarco, nq, scifact"
    else:
        model, message = str(tmp_path / "empty"), "has no config.json"
        (tmp_path / "empty").mkdir()
    result = cli("--model", model, "--tasks", task, "--output", str(tmp_path / "out"))
    assert result.returncode == 2 and "error: " in result.stderr.splitlines()[-1]
    assert message in result.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "task, message",
    [
        ("sst2", "task 'sst2' is a sc task; evaluation.mteb runs retrieval (ir) tasks"),
        ("Banking77Classification", "mteb task 'Banking77Classification' is a Classification task"),
        ("MultiLongDocRetrieval", "has 13 subsets: name one, e.g. MultiLongDocRetrieval:ar"),
        ("SciFact", "cannot load mteb task 'SciFact' (mteb/scifact) from the Hub"),  # the tests run offline
    ],
)
def test_tasks_mteb_cannot_run_here_are_refused_before_any_work(models, tmp_path, capsys, task, message):
    with pytest.raises(SystemExit) as stop:
        mteb_eval.main(
            ["--model", str(models["checkpoint"]), "--tasks", f"scifact,{task}", "--output", str(tmp_path / "out")]
        )
    assert stop.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_a_file_it_did_not_write_is_never_touched(models, data_dir, tmp_path):
    path = store.result_path(tmp_path, "tiny-mlm", "scifact-mteb", 0, 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": store.RESULT_FORMAT, "status": "ok"}))
    args = mteb_eval.MtebArgs(
        model=str(models["checkpoint"]),
        tasks="scifact",
        max_eval=8,
        output=str(tmp_path),
        data_dir=str(data_dir),
        rerun_changed=True,
    )
    with pytest.raises(ValueError, match="was not written by evaluation.mteb"):
        run_mteb(args)
    assert json.loads(path.read_text()) == {"format": store.RESULT_FORMAT, "status": "ok"}


def test_help_renders(capsys):
    with pytest.raises(SystemExit) as stop:
        mteb_eval.main(["--help"])
    assert stop.value.code == 0 and "--ir_corpus" in capsys.readouterr().out
