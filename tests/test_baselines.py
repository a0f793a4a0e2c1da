"""Trivial baselines per family, checked by hand and, for the random ranking, against simulated random rankings."""

import numpy as np
import pytest

from evaluation import baselines, metrics, tasks


def test_majority_class_and_all_o_by_hand():
    task = tasks.Task(name="t", family="sc", metric="accuracy", budget={"max_steps": 1}, labels=["neg", "pos"])
    splits = {"train": {"label": [1, 1, 0]}, "validation": {"label": [0, 1]}, "test": {"label": [1, 1, 1, 0]}}
    assert baselines.trivial_baseline(task, splits)["test"]["accuracy"] == 0.75  # "pos" is the train majority
    ner = tasks.Task(
        name="n", family="tc", metric="sentence_macro_f1", budget={"epochs": 1}, labels=["O", "B-PER", "I-PER"]
    )
    tags = {"tags": [[1, 2, 0], [0, 0]]}
    out = baselines.trivial_baseline(ner, {"train": tags, "validation": tags, "test": tags})["test"]
    assert out["entity_f1"] == 0.0 and out["token_accuracy"] == pytest.approx(3 / 5)
    # sentence 1: labels {O, B-PER, I-PER}, only O predicted: F1(O) = 2 * (1/3 * 1) / (4/3) = 0.5 -> macro 0.5 / 3
    assert out["sentence_macro_f1"] == pytest.approx(np.mean([0.5 / 3, 1.0]))


def test_leading_words_of_the_median_answer_length():
    task = tasks.Task(name="q", family="qa", metric="f1", budget={"max_steps": 1})
    train = {"answers": [{"text": ["Paris"]}, {"text": ["the big city"]}, {"text": ["two words"]}]}
    test = {"context": ["Paris is a city in France"], "answers": [{"text": ["Paris is"], "answer_start": [0]}]}
    out = baselines.trivial_baseline(task, {"train": train, "validation": test, "test": test})["test"]
    assert out["exact_match"] == 1.0  # median length 2 words: "Paris is"


def test_random_ranking_is_the_exact_expectation():
    rng = np.random.default_rng(0)
    qrels = {"q1": {"d0": 1}, "q2": {"d1": 2, "d2": 1, "d3": 0}, "q3": {"d4": 1, "d5": 1, "d6": 1}}
    corpus = [f"d{i}" for i in range(25)]
    expected = baselines.random_ranking(qrels, len(corpus))
    simulated = {k: [] for k in expected}
    for _ in range(4000):
        order = rng.permutation(corpus)
        run = {q: {d: -float(i) for i, d in enumerate(order)} for q in qrels}
        scores = metrics.retrieval_scores(run, qrels)
        for k in expected:
            simulated[k].append(scores[k])
    for k in expected:
        assert expected[k] == pytest.approx(np.mean(simulated[k]), abs=0.01), k
    assert baselines.random_ranking({"q": {"d": 1}}, 10)["ndcg@10"] == pytest.approx(
        sum(1 / np.log2(i + 2) for i in range(10)) / 10
    )
