"""Offline metrics for the four task families (never `evaluate.load`): pure functions taking lists (or numpy arrays)
of predictions and references and returning aggregate scores, fractions in [0, 1], plus a `"per_instance"` dict of
lists aligned with the inputs (for paired tests between two models).

| family | function | aggregate keys | per-instance keys |
|---|---|---|---|
| SC | `accuracy` | accuracy | accuracy (0/1) |
| TC | `token_classification_scores` | `METRICS["tc"]` | sentence_macro_f1, entity_f1, entity_* counts, token_* counts |
| QA | `squad_scores` | exact_match, f1 (+ HasAns_* / NoAns_* under v2.0 rules) | id, exact_match, f1 |
| IR | `retrieval_scores` | ndcg@10, mrr@10, recall@100 | qid, ndcg@10, mrr@10, recall@100 |

`rescore` recomputes a family's scores from a result file's per-instance predictions and references.

The paper's TC number (`sentence_macro_f1`) is, per sentence, sklearn's `f1_score(gold, pred, average="macro")` over
the word-level tags (the labels of its gold *or* predicted tags, "O" included), then the plain mean over sentences
(docs/protocol.md, "The TC score": the evidence, and why IOB2 tags, as the offline CoNLL task loads, differ from the
paper's). It is lenient: a model that predicts no entity still scores about 0.45 per sentence with one entity (and
1.0 on sentences without any), so always read it beside entity F1 (seqeval, strict IOB2: the community-standard
number) and token micro-F1 (word accuracy when "O" counts), which the report shows beside it.

Retrieval follows trec_eval (what pytrec_eval, BEIR and mteb call): documents ranked by score, ties broken by
document id in descending string order; a document is relevant when its qrels score is > 0; NDCG gains are the
qrels scores with a log2(rank + 1) discount, the ideal ranking built from all judged documents; MRR@10 is 1/rank
of the first relevant document within the top 10 (0 if none); recall@100 divides by the number of relevant
documents. Scores are averaged over the queries of `qrels`; a query absent from the run scores 0.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np
import seqeval.metrics
from seqeval.scheme import IOB2, Entities
from sklearn.metrics import f1_score as sklearn_f1_score

from core import store

IGNORE_INDEX = -100
METRICS = {  # the aggregate keys each family's scorer returns: a task's `metric:` must be one of them
    "sc": ("accuracy",),
    "tc": ("sentence_macro_f1", "entity_f1", "entity_precision", "entity_recall", "token_micro_f1", "token_accuracy"),
    "qa": ("f1", "exact_match"),
    "ir": ("ndcg@10", "mrr@10", "recall@100"),
}


def accuracy(predictions: Sequence[int], references: Sequence[int]) -> dict:
    """Accuracy of predicted class ids against gold ids: {"accuracy", "per_instance": {"accuracy": [0.0 | 1.0]}}."""
    predictions, references = np.asarray(predictions), np.asarray(references)
    _check_same_length(predictions, references)
    correct = (predictions == references).astype(float)
    return {"accuracy": float(correct.mean()) if len(correct) else 0.0, "per_instance": {"accuracy": correct.tolist()}}


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """One sentence's IOB1 tags (CoNLL-2003 files: an entity starts with I-, B- only separates two adjacent entities
    of one type) as IOB2, a new list: I-X becomes B-X after O or another type; IOB2 input comes back unchanged."""
    converted = []
    for i, tag in enumerate(tags):
        if tag.startswith("I-"):
            previous = tags[i - 1] if i > 0 else "O"
            if previous == "O" or previous[2:] != tag[2:]:
                tag = "B-" + tag[2:]
        converted.append(tag)
    return converted


def word_level_predictions(
    predictions: Sequence[int], word_ids: Sequence[int | None], strategy: str, n_words: int, default: int
) -> list[int]:
    """One sequence's predicted label ids per sub-token (`word_ids`: None or -100 for special tokens) as one per
    word of its `n_words`: the first sub-token's ("first") or the most frequent, ties to the first seen ("majority",
    as EncodEval); `default` for the words without a sub-token."""
    if strategy not in ("first", "majority"):
        raise ValueError(f"strategy must be 'first' or 'majority', got {strategy!r}")
    per_word: dict[int, list[int]] = {}
    for pred, word in zip(predictions, word_ids):
        if word is not None and word != IGNORE_INDEX:
            per_word.setdefault(int(word), []).append(int(pred))
    pick = (lambda preds: preds[0]) if strategy == "first" else (lambda preds: max(preds, key=preds.count))
    if per_word and max(per_word) >= n_words:
        raise ValueError(f"word index {max(per_word)} out of range for a sentence of {n_words} words")
    return [pick(per_word[i]) if i in per_word else default for i in range(n_words)]


def token_micro_f1(predictions: Sequence[Sequence], references: Sequence[Sequence]) -> float:
    """sklearn's micro-F1 over every sentence's word labels (gold -100 dropped), "O" included: word accuracy."""
    _check_same_length(predictions, references)
    pairs = [
        (g if isinstance(g, str) else int(g), p if isinstance(p, str) else int(p))
        for p_seq, g_seq in zip(predictions, references)
        for p, g in zip(p_seq, g_seq)
        if isinstance(g, str) or g != IGNORE_INDEX
    ]
    gold, pred = [g for g, _ in pairs], [p for _, p in pairs]
    return float(sklearn_f1_score(gold, pred, average="micro", zero_division=0))


def macro_f1_present_labels(prediction: Sequence, reference: Sequence) -> float:
    """One sentence's EncodEval TC score: sklearn `f1_score(reference, prediction, average="macro")` over the
    labels of either side ("O" too), one per word; an empty sentence scores 0.0 (docs/protocol.md)."""
    if len(prediction) != len(reference):
        raise ValueError(f"{len(prediction)} predicted labels for {len(reference)} gold labels; align to words first")
    predicted, gold = collections.Counter(prediction), collections.Counter(reference)
    correct = collections.Counter(g for p, g in zip(prediction, reference) if p == g)
    # sklearn's arithmetic (2 tp / (pred + gold) per sorted label, then np.mean), so released scores match bit for bit
    per_label = [2 * correct[label] / (predicted[label] + gold[label]) for label in sorted(set(predicted) | set(gold))]
    return float(np.mean(per_label)) if per_label else 0.0


def token_classification_scores(predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict:
    """The TC scores (`METRICS["tc"]`, "per_instance") of predicted against gold IOB2 tags, one per word;
    a sentence with no gold and no predicted entity has entity F1 1.0; the counts give corpus F1 exactly."""
    _check_same_length(predictions, references)
    for i, (pred, gold) in enumerate(zip(predictions, references)):
        if len(pred) != len(gold):
            raise ValueError(
                f"sentence {i}: {len(pred)} predicted tags for {len(gold)} gold tags; align to words first"
            )
    y_true, y_pred = [list(s) for s in references], [list(s) for s in predictions]
    keys = ("sentence_macro_f1", "entity_f1", "entity_tp", "entity_pred", "entity_gold", "token_correct", "token_count")
    per = {k: [] for k in keys}
    for pred, gold in zip(y_pred, y_true):
        gold_entities, pred_entities = _strict_entities(gold), _strict_entities(pred)
        tp, n_pred, n_gold = len(gold_entities & pred_entities), len(pred_entities), len(gold_entities)
        values = (
            macro_f1_present_labels(pred, gold),
            _f1(tp, n_pred, n_gold, empty=1.0),
            tp,
            n_pred,
            n_gold,
            sum(p == g for p, g in zip(pred, gold)),
            len(gold),
        )
        for key, value in zip(keys, values):
            per[key].append(value)
    kwargs = {"mode": "strict", "scheme": IOB2, "zero_division": 0}
    n_tokens = sum(per["token_count"])
    return {
        "sentence_macro_f1": _mean(per["sentence_macro_f1"]),
        "entity_precision": float(seqeval.metrics.precision_score(y_true, y_pred, **kwargs)),
        "entity_recall": float(seqeval.metrics.recall_score(y_true, y_pred, **kwargs)),
        "entity_f1": float(seqeval.metrics.f1_score(y_true, y_pred, **kwargs)),
        "token_micro_f1": token_micro_f1(y_pred, y_true),
        "token_accuracy": sum(per["token_correct"]) / n_tokens if n_tokens else 0.0,
        "per_instance": per,
    }


def _strict_entities(tags: list[str]) -> set[tuple]:
    """The (type, start, end) entities seqeval's strict IOB2 mode extracts from one sentence."""
    return {e.to_tuple()[1:] for e in Entities([tags], IOB2).entities[0]}


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
SQUAD_VERSIONS = ("v1.1", "v2.0")


def normalize_answer(text: str) -> str:
    """Official SQuAD normalisation: lowercase, drop punctuation and articles, squeeze whitespace."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
    return " ".join(text.split())


def squad_exact_f1(prediction: str, gold_answers: Sequence[str], version: str = "v2.0") -> tuple[float, float]:
    """(exact_match, f1) of one predicted answer ("" = none), max over the gold answer texts, by the official
    script of `version`. v2.0: gold answers normalising to "" are dropped, and with none left both scores
    are 1 iff the prediction normalises to "". v1.1: no common token scores F1 0, even when both are ""."""
    if version not in SQUAD_VERSIONS:
        raise ValueError(f"version={version!r}: use one of {SQUAD_VERSIONS}")
    golds = list(gold_answers) if version == "v1.1" else [g for g in gold_answers if normalize_answer(g)]
    exact = max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds or [""])
    return exact, max(_token_f1(prediction, g, version) for g in golds or [""])


def _token_f1(prediction: str, gold: str, version: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if version == "v2.0" and (not pred_tokens or not gold_tokens):  # v2: if either side is empty, F1 is 1 iff both are
        return float(pred_tokens == gold_tokens)
    overlap = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    return _f1(overlap, len(pred_tokens), len(gold_tokens), empty=0.0)


def squad_scores(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    ids: Sequence[str] | None = None,
    version: str = "v2.0",
) -> dict:
    """SQuAD EM/F1 averaged over questions (`squad_exact_f1`), with "per_instance" {"id", "exact_match",
    "f1"}; under v2.0 with an unanswerable question, also HasAns_ / NoAns_ scores, as the official script."""
    _check_same_length(predictions, references)
    scores = [squad_exact_f1(p, golds, version) for p, golds in zip(predictions, references)]
    exact, f1 = [s[0] for s in scores], [s[1] for s in scores]
    result = {"exact_match": _mean(exact), "f1": _mean(f1)}
    has_answer = [any(normalize_answer(g) for g in golds) for golds in references]
    if version == "v2.0" and not all(has_answer):
        for name, keep in (("HasAns", True), ("NoAns", False)):
            idx = [i for i, h in enumerate(has_answer) if h == keep]
            result[f"{name}_exact_match"] = _mean([exact[i] for i in idx])
            result[f"{name}_f1"] = _mean([f1[i] for i in idx])
            result[f"{name}_total"] = len(idx)
    result["per_instance"] = {"id": list(ids) if ids is not None else None, "exact_match": exact, "f1": f1}
    return result


def retrieval_scores(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]) -> dict:
    """NDCG@10, MRR@10 and recall@100 of a run {query id: {doc id: score}} against qrels {query id: {doc id:
    relevance}} (trec_eval conventions, module docstring), and "per_instance" by sorted query id."""
    per = {"qid": sorted(qrels), **{n: [] for n in METRICS["ir"]}}
    for qid in per["qid"]:
        judged = qrels[qid]
        ranking = ranked_ids(run.get(qid, {}))
        relevant = {d for d, rel in judged.items() if rel > 0}
        per["ndcg@10"].append(_ndcg(ranking[:10], judged))
        first = next((i for i, d in enumerate(ranking[:10]) if d in relevant), None)
        per["mrr@10"].append(0.0 if first is None else 1.0 / (first + 1))
        per["recall@100"].append(len(relevant & set(ranking[:100])) / len(relevant) if relevant else 0.0)
    return {**{n: _mean(per[n]) for n in METRICS["ir"]}, "per_instance": per}


def ranked_ids(scores: Mapping[str, float]) -> list[str]:
    """Document ids in trec_eval order: score descending, then doc id descending (ties reproducible across tools)."""
    by_id = sorted(scores.items(), key=lambda item: item[0], reverse=True)
    return [doc for doc, _ in sorted(by_id, key=lambda item: -item[1])]


def _ndcg(top: list[str], judged: Mapping[str, int]) -> float:
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(top))
    ideal = sorted((rel for rel in judged.values() if rel > 0), reverse=True)[:10]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def rescore(family: str, records: Sequence[Mapping], squad_version: str = "v2.0") -> dict:
    """The dict `family`'s scorer returned for one split, recomputed from a result file's per-instance `records`."""
    if family == "sc":
        return accuracy([r["prediction"] for r in records], [r["reference"] for r in records])
    if family == "tc":
        return token_classification_scores([r["prediction"] for r in records], [r["reference"] for r in records])
    if family == "qa":
        return squad_scores(
            [r["prediction"] for r in records],
            [r["reference"] for r in records],
            [r["id"] for r in records],
            version=squad_version,
        )
    if family == "ir":  # the stored ranking is in rank order: any decreasing score reproduces it
        run = {r["qid"]: {doc: -float(i) for i, doc in enumerate(r["ranking"])} for r in records}
        return retrieval_scores(run, {r["qid"]: r["relevance"] for r in records})
    raise ValueError(f"family={family!r}: use one of {sorted(METRICS)}")


def rescore_mismatch(record: Mapping, tolerance: float = 1e-4) -> str | None:
    """Where a result file's aggregate scores differ from those its per-instance predictions give (`rescore`), or
    None. A qa result matches under either SQuAD version's rules (the file records its task by hash only);
    `tolerance`: mteb's own aggregation differs from `rescore` by up to 1e-5."""
    if not store.scored(record):
        return None
    for split in store.SPLITS:
        stored, records = store.split_scores(record, split), store.instances(record, split)
        if not stored or not records:
            continue
        problems = []
        for version in SQUAD_VERSIONS if record["family"] == "qa" else ("v2.0",):
            again = _tc_scores(records) if record["family"] == "tc" else rescore(record["family"], records, version)
            problems.append(
                next(
                    (
                        f"its {split} {key} is {value} but its predictions give {again[key]}"
                        for key, value in stored.items()
                        if key in again
                        and key != "per_instance"
                        and not abs(float(value) - float(again[key])) <= tolerance
                    ),
                    None,
                )
            )
        if all(problems):
            return problems[0]
    return None


def _tc_scores(records: Sequence[Mapping]) -> dict:
    """`token_classification_scores`' sentence macro-F1 and corpus entity F1 from the stored entity counts,
    without seqeval's entity parsing: a study's archive is checked in seconds."""
    macro = [
        1.0
        if r["prediction"] == r["reference"] and r["reference"]
        # each label present scores 1
        else macro_f1_present_labels(r["prediction"], r["reference"])
        for r in records
    ]
    counts = [sum(r[key] for r in records) for key in ("entity_tp", "entity_pred", "entity_gold")]
    return {"sentence_macro_f1": _mean(macro), "entity_f1": _f1(*counts, empty=0.0)}


def _f1(tp: int, n_pred: int, n_gold: int, empty: float) -> float:
    if n_pred == 0 and n_gold == 0:
        return empty
    if tp == 0:
        return 0.0
    precision, recall = tp / n_pred, tp / n_gold
    return 2 * precision * recall / (precision + recall)


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if len(values) else 0.0


def _check_same_length(predictions, references) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions has {len(predictions)} items but references has {len(references)}; pass one per example"
        )
