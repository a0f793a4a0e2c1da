"""Trivial baselines: the score a model gets without learning anything from the task, in the task's metrics.

| family | baseline | computed on |
|---|---|---|
| SC | the majority class of the training split, predicted for every example | accuracy |
| TC | "O" for every word | the task's TC metrics |
| QA | the first N words of the passage (N: the training split's median gold answer length) | SQuAD EM/F1, its rules |
| IR | a uniformly random ranking of the split's corpus | expected NDCG@10, MRR@10, recall@100 (exact) |

The IR expectation is exact, not sampled: by linearity, a random permutation puts each document at rank i with
probability 1/N, so E[DCG@k] = (sum of gains / N) x sum_{i<=k} 1/log2(i+1); recall@100 is min(100, N)/N; the first
relevant document of R among N sits at rank i with probability R/(N-i+1) x prod_{j<i} (1 - R/(N-j+1)).
"""

from __future__ import annotations

import collections
import math
import statistics

from evaluation import metrics


def trivial_baseline(task, splits) -> dict[str, dict[str, float]]:
    """{"validation": scores, "test": scores} of the task family's trivial baseline (aggregates only) on `splits`."""
    family, out = task.family, {}
    for role in ("validation", "test"):
        split = splits[role]
        if family == "sc":
            counts = collections.Counter(splits["train"]["label"])
            majority = min(counts, key=lambda label: (-counts[label], label))  # ties: the lowest class id
            scores = metrics.accuracy([majority] * len(split["label"]), split["label"])
        elif family == "tc":
            references = [[task.labels[t] for t in tags] for tags in split["tags"]]
            scores = metrics.token_classification_scores([["O"] * len(r) for r in references], references)
        elif family == "qa":
            lengths = [len(answers["text"][0].split()) for answers in splits["train"]["answers"] if answers["text"]]
            n_words = max(1, round(statistics.median(lengths))) if lengths else 1
            scores = metrics.squad_scores(
                [" ".join(context.split()[:n_words]) for context in split["context"]],
                [a["text"] for a in split["answers"]],
                version=task.squad_version,
            )
        elif family == "ir":
            scores = random_ranking(split.qrels, len(split.corpus))
        else:
            raise ValueError(f"family={family!r}: use one of {sorted(metrics.METRICS)}")
        out[role] = {k: v for k, v in scores.items() if k != "per_instance"}
    return out


def random_ranking(qrels: dict[str, dict[str, int]], corpus_size: int) -> dict:
    """Expected NDCG@10, MRR@10 and recall@100 of a uniformly random ranking of `corpus_size` documents (exact)."""
    per_query = {name: [] for name in metrics.METRICS["ir"]}
    n = corpus_size
    for judged in qrels.values():
        gains = [rel for rel in judged.values() if rel > 0]
        relevant = len(gains)
        discounts = sum(1 / math.log2(i + 2) for i in range(min(10, n)))
        ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains, reverse=True)[:10]))
        per_query["ndcg@10"].append(sum(gains) / n * discounts / ideal if ideal > 0 else 0.0)
        mrr, none_yet = 0.0, 1.0
        for i in range(1, min(10, n) + 1):
            first_here = none_yet * relevant / (n - i + 1)
            mrr += first_here / i
            none_yet -= first_here
        per_query["mrr@10"].append(mrr)
        per_query["recall@100"].append(min(100, n) / n if relevant else 0.0)
    return {name: sum(values) / len(values) if values else 0.0 for name, values in per_query.items()}
