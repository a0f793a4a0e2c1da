"""Each task family fine-tunes a tiny model for a few steps on bundle data and returns finite scores in [0, 1]."""

import math

import numpy as np
import pytest
import torch

from evaluation import (
    common,
    extractive_qa,
    finetune_args,
    metrics,
    model_inputs,
    retrieval,
    sequence_classification,
    tasks,
    token_classification,
)
from evaluation.attention import resolved_attention
from tests.fixtures.tiny_models import (
    build_tiny_bert,
    build_tiny_eurobert,
    build_tiny_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("models")
    tokenizer = build_tiny_tokenizer(data_dir)
    return {
        "clm": build_tiny_eurobert(root / "tiny-clm", tokenizer, is_causal=True),
        "bert": build_tiny_bert(root / "tiny-bert", tokenizer),
    }


def smoke_args(data_dir, **overrides):
    settings = dict(
        lr=1e-3,
        seed=0,
        max_steps=4,
        batch_size=8,
        eval_batch_size=32,
        max_train=64,
        max_eval=24,
        max_length=64,
        qa_max_length=96,
        doc_stride=32,
        data_dir=str(data_dir),
        precision="fp32",
    )
    return finetune_args.FinetuneArgs(**{**settings, **overrides})


def finetune_and_score(family, model, task, args) -> dict:
    """What the grid does with one run (`evaluation.run.execute`): fine-tune, then score the last step."""
    return family.score(family.finetune(model, task, args), task, args)


def check_scores(result, n_test, task=None):
    assert result["status"] == "ok"
    for split in ("validation", "test"):
        value = result[split][result["main_metric"]]
        assert math.isfinite(value) and 0.0 <= value <= 1.0, (split, value)
    assert len(result["per_instance"]["test"]) == n_test
    if task is not None:  # every score is recomputed from the stored predictions and references alone
        for split in ("validation", "test"):
            again = metrics.rescore(task.family, result["per_instance"][split], task.squad_version)
            assert {k: v for k, v in again.items() if k != "per_instance"} == pytest.approx(result[split]), split


def test_clm_checkpoint_is_finetuned_bidirectionally_by_default(tiny):
    assert resolved_attention(tiny["clm"], "bidirectional") == "bidirectional"
    assert resolved_attention(tiny["clm"], "causal") == "causal"
    assert resolved_attention(tiny["clm"], "checkpoint") == "causal"
    assert resolved_attention(tiny["bert"], "checkpoint") == "bidirectional"


def test_sequence_classification(tiny, data_dir):
    task = tasks.load_task("sst2")
    result = finetune_and_score(sequence_classification, tiny["clm"], task, smoke_args(data_dir))
    check_scores(result, 24, task)
    assert set(result["per_instance"]["test"][0]) == {"accuracy", "prediction", "reference"}


def test_token_classification_aligns_first_subtoken(tiny, data_dir):
    tokenizer = model_inputs.load_finetuning_tokenizer(tiny["clm"])
    batch = {"tokens": [["EU", "rejects", "German", "call"]], "tags": [[3, 0, 7, 0]]}
    encoded = token_classification.align_labels(batch, tokenizer, 64)
    word_ids, labels = encoded["word_ids"][0], encoded["labels"][0]
    assert sorted(set(word_ids) - {-100}) == [0, 1, 2, 3]
    for j, word in enumerate(word_ids):
        first = word != -100 and (j == 0 or word_ids[j - 1] != word)
        assert labels[j] == (batch["tags"][0][word] if first else -100)


@pytest.mark.parametrize("labelling", [None, "first"])  # the task's own (all, the harness's) and the override
def test_token_classification(tiny, data_dir, labelling):
    task = tasks.load_task("conll2003")
    result = finetune_and_score(token_classification, tiny["bert"], task, smoke_args(data_dir, tc_labelling=labelling))
    check_scores(result, 24, task)
    assert result["main_metric"] == "sentence_macro_f1"
    assert {"entity_f1", "token_micro_f1"} <= set(result["test"]) and 0.0 <= result["test"]["entity_f1"] <= 1.0
    per_sentence = [r["sentence_macro_f1"] for r in result["per_instance"]["test"]]
    assert result["test"]["sentence_macro_f1"] == pytest.approx(np.mean(per_sentence))


def test_qa_postprocess_picks_best_span_and_null():
    examples = [{"id": "q", "context": "Paris is in France"}]
    windows = {"example_id": ["q"], "offset_mapping": [[None, (0, 5), (6, 8), (9, 11), (12, 18), None]]}
    start, end = np.full((1, 6), -5.0), np.full((1, 6), -5.0)
    start[0, 4], end[0, 4] = 3.0, 3.0  # "France"
    assert extractive_qa.postprocess(examples, windows, start, end) == {"q": "France"}
    start[0, 0], end[0, 0] = 4.0, 4.0  # null score 8 > span score 6
    assert extractive_qa.postprocess(examples, windows, start, end, with_null=True) == {"q": ""}
    assert extractive_qa.postprocess(examples, windows, start, end, with_null=False) == {"q": "France"}


def test_extractive_qa_v2(tiny, data_dir):
    task = tasks.load_task("squad_v2")
    result = finetune_and_score(extractive_qa, tiny["clm"], task, smoke_args(data_dir))
    check_scores(result, 24, task)
    assert "NoAns_f1" in result["test"] and task.squad_version == "v2.0"
    assert tasks.load_task("squad").squad_version == tasks.load_task("record").squad_version == "v1.1"


def test_retrieval(tiny, data_dir):
    task = tasks.load_task("scifact")
    result = finetune_and_score(retrieval, tiny["bert"], task, smoke_args(data_dir, max_steps=3))
    check_scores(result, 24, task)
    assert all(
        len(r["ranking"]) == min(100, len(common.task_splits(task, smoke_args(data_dir))["test"].corpus))
        for r in result["per_instance"]["test"]
    )
    assert {"ndcg@10", "mrr@10", "recall@100"} <= set(result["test"])


def test_ndcg_matches_mteb(tiny, data_dir):
    """Our NDCG@10 / MRR@10 / recall@100 equal mteb's on the same model, prompts and data (a local mteb task)."""
    import mteb
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

    from evaluation import metrics

    args = smoke_args(data_dir, max_eval=40)
    task = tasks.load_task("scifact")
    split = common.task_splits(task, args)["test"]
    model = retrieval.build_model(tiny["clm"], task, args)
    ours = metrics.retrieval_scores(retrieval.rank(model, split), split.qrels)

    class LocalSciFact(AbsTaskRetrieval):
        metadata = TaskMetadata(
            type="Retrieval",
            name="LocalSciFact",
            main_score="ndcg_at_10",
            description="SciFact test subset (bundle)",
            reference=None,
            dataset={"path": "local", "revision": "local"},
            category="t2t",
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            date=None,
            dialect=None,
            domains=None,
            task_subtypes=None,
            license=None,
            annotations_creators=None,
            modalities=["text"],
            sample_creation=None,
            bibtex_citation="",
        )

        def load_data(self, num_proc=None, **kwargs):
            # Corpus texts already hold "title. text" (the task's doc_template): no separate title for mteb to join.
            self.dataset = {
                "default": {
                    "test": RetrievalSplitData(
                        queries=Dataset.from_list([{"id": q, "text": t} for q, t in split.queries.items()]),
                        corpus=Dataset.from_list([{"id": d, "text": t, "title": ""} for d, t in split.corpus.items()]),
                        relevant_docs=split.qrels,
                        top_ranked=None,
                    )
                }
            }
            self.data_loaded = True

    theirs = mteb.evaluate(model, LocalSciFact(), cache=None, show_progress_bar=False)[0].scores["test"][0]
    assert ours["ndcg@10"] == pytest.approx(theirs["ndcg_at_10"], abs=1e-4)
    assert ours["mrr@10"] == pytest.approx(theirs["mrr_at_10"], abs=1e-4)
    assert ours["recall@100"] == pytest.approx(theirs["recall_at_100"], abs=1e-4)
    assert 0.0 < ours["ndcg@10"] < 1.0  # a real ranking, not a degenerate one that anything would match


def test_bf16_weights_round_small_updates_away_as_the_original_does(tiny, data_dir, tmp_path):
    """`bf16_weights` (the original: the model cast to bf16) keeps bf16 weights and AdamW states, so updates
    smaller than half a bf16 ulp vanish; `fp32` (and `bf16_autocast`'s fp32 master weights) keep them."""
    task = tasks.load_task("sst2")
    changed = {}
    for precision in ("bf16_weights", "fp32"):
        args = smoke_args(data_dir, lr=1e-5, max_steps=2, precision=precision, scratch_dir=str(tmp_path / precision))
        tokenizer = model_inputs.load_finetuning_tokenizer(tiny["clm"])
        trainer = sequence_classification.build_trainer(
            tiny["clm"], task, args, tokenizer, sequence_classification.tokenize(task, tokenizer, args)["train"]
        )
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if n.startswith("model.")}
        trainer.train()
        after = dict(trainer.model.named_parameters())
        assert {p.dtype for p in after.values()} == {torch.bfloat16 if precision == "bf16_weights" else torch.float32}
        if precision == "bf16_weights":
            states = [s for s in trainer.optimizer.state.values() if "exp_avg" in s]
            assert states and all(s["exp_avg"].dtype == torch.bfloat16 for s in states)
        moved = [int((after[n].detach() != before[n]).sum()) for n in before]
        changed[precision] = sum(moved) / sum(p.numel() for p in before.values())
    assert changed["fp32"] > 0.9  # nearly every weight moves in fp32
    assert changed["bf16_weights"] < 0.5 * changed["fp32"], changed  # most lr-1e-5 updates round away in bf16


def test_inputs_are_sized_as_the_original_harness(tiny):
    # the tiny architecture: 512 positions
    assert model_inputs.max_length(finetune_args.ProtocolArgs(), tiny["clm"]) == round(0.99 * 512)
    assert model_inputs.max_length(finetune_args.ProtocolArgs(max_length=64), tiny["clm"]) == 64
    expected = "bf16_weights" if torch.cuda.is_available() else "fp32"
    assert finetune_args.ProtocolArgs(precision="auto").resolved_precision() == expected
