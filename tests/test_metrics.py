"""Metrics against independent references: sklearn, seqeval, pytrec_eval and hand-worked examples."""

import gzip
import math
import random

import numpy as np
import pytest
import pytrec_eval
from seqeval.metrics import classification_report
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2
from sklearn.metrics import accuracy_score, f1_score

from evaluation.metrics import (
    accuracy,
    iob1_to_iob2,
    macro_f1_present_labels,
    normalize_answer,
    retrieval_scores,
    squad_exact_f1,
    squad_scores,
    token_classification_scores,
    token_micro_f1,
    word_level_predictions,
)

# ----------------------------------------------------------------------------------------------------------------
# Sequence classification
# ----------------------------------------------------------------------------------------------------------------


def test_accuracy_matches_sklearn_and_keeps_per_instance_scores():
    rng = np.random.default_rng(0)
    preds, golds = rng.integers(0, 3, 500), rng.integers(0, 3, 500)
    result = accuracy(preds, golds)
    assert result["accuracy"] == pytest.approx(accuracy_score(golds, preds))
    assert result["per_instance"]["accuracy"] == [float(p == g) for p, g in zip(preds, golds)]


def test_accuracy_rejects_length_mismatch():
    with pytest.raises(ValueError, match="predictions has 2 items but references has 3"):
        accuracy([0, 1], [0, 1, 1])


# ----------------------------------------------------------------------------------------------------------------
# Token classification
# ----------------------------------------------------------------------------------------------------------------


def test_iob1_to_iob2_hand_example():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC"]
    # an entity opens with I- after O / another type; B- (adjacent same type) stays B-.
    assert iob1_to_iob2(iob1) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC"]
    assert iob1_to_iob2(["B-PER", "I-PER", "O"]) == ["B-PER", "I-PER", "O"]  # IOB2 input unchanged


def test_iob1_to_iob2_keeps_seqeval_entities_on_conll_train(data_dir):
    """seqeval's lenient (conlleval) chunker on the raw IOB1 file == strict IOB2 chunks after conversion."""
    with gzip.open(data_dir / "tc/conll2003/eng.train.gz", "rt", encoding="utf-8") as f:
        sentences, tags = [], []
        for line in f:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                if tags:
                    sentences.append(tags)
                tags = []
            else:
                tags.append(parts[3])
    assert len(sentences) == 14041
    converted = [iob1_to_iob2(s) for s in sentences]
    lenient = [set(get_entities(iob1)) for iob1 in sentences]
    assert lenient == [set(get_entities(iob2)) for iob2 in converted]
    assert sum(len(e) for e in lenient) == 23499  # official CoNLL-2003 train entity count
    # strict IOB2 mode accepts every converted sentence (checked on a sample to stay fast)
    sample = converted[:2000]
    report = classification_report(sample, sample, mode="strict", scheme=IOB2, output_dict=True)
    assert report["micro avg"]["support"] == sum(len(e) for e in lenient[:2000])


def test_token_classification_hand_example():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["O", "B-ORG"]]
    result = token_classification_scores(pred, gold)
    # gold entities: PER(0,2), LOC(3,4); predicted: PER(0,1), LOC(3,4), ORG(1,2) -> tp 1, P = 1/3, R = 1/2
    p, r = 1 / 3, 1 / 2
    assert result["entity_precision"] == pytest.approx(p)
    assert result["entity_recall"] == pytest.approx(r)
    assert result["entity_f1"] == pytest.approx(2 * p * r / (p + r))  # 0.4
    # words: 4 of 6 correct; micro-F1 over all classes (O included) equals word accuracy
    assert result["token_micro_f1"] == pytest.approx(4 / 6)
    assert result["token_accuracy"] == pytest.approx(4 / 6)
    per = result["per_instance"]
    # per-sentence macro-F1 over the labels present: sentence 1: B-PER 1, I-PER 0 (gold only), O (P 1/2, R 1) 2/3,
    # B-LOC 1 -> 2/3; sentence 2: O (P 1, R 1/2) 2/3, B-ORG 0 (predicted only) -> 1/3
    assert per["sentence_macro_f1"] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]
    assert result["sentence_macro_f1"] == pytest.approx(0.5)
    assert per["entity_tp"] == [1, 0] and per["entity_pred"] == [2, 1] and per["entity_gold"] == [2, 0]
    assert per["entity_f1"] == [pytest.approx(0.5), 0.0]
    assert per["token_correct"] == [3, 1] and per["token_count"] == [4, 2]


def test_token_classification_matches_seqeval_report_on_noisy_predictions():
    rng = random.Random(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    gold = [iob1_to_iob2([rng.choice(tags) for _ in range(rng.randint(1, 15))]) for _ in range(300)]
    pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold]
    result = token_classification_scores(pred, gold)
    report = classification_report(gold, pred, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
    assert result["entity_precision"] == pytest.approx(report["micro avg"]["precision"])
    assert result["entity_recall"] == pytest.approx(report["micro avg"]["recall"])
    assert result["entity_f1"] == pytest.approx(report["micro avg"]["f1-score"])
    per = result["per_instance"]
    assert sum(per["entity_gold"]) == report["micro avg"]["support"]
    # the per-sentence counts reproduce corpus precision/recall (what a bootstrap over sentences needs)
    assert sum(per["entity_tp"]) / sum(per["entity_pred"]) == pytest.approx(report["micro avg"]["precision"])
    flat_gold, flat_pred = [t for s in gold for t in s], [t for s in pred for t in s]
    assert result["token_micro_f1"] == pytest.approx(f1_score(flat_gold, flat_pred, average="micro"))


def test_token_micro_f1_drops_ignored_positions():
    gold = [[0, 1, 2, -100], [-100, 0, 3]]
    pred = [[0, 1, 0, 5], [4, 3, 3]]
    # kept positions: gold [0,1,2,0,3], pred [0,1,0,3,3] -> 3 of 5 correct
    assert token_micro_f1(pred, gold) == pytest.approx(3 / 5)
    expected = f1_score([0, 1, 2, 0, 3], [0, 1, 0, 3, 3], average="micro")
    assert token_micro_f1(pred, gold) == pytest.approx(expected)


def test_word_level_predictions_first_and_majority():
    preds = [9, 1, 2, 2, 3, 4, 9]
    word_ids = [None, 0, 0, 0, 1, 2, None]
    assert word_level_predictions(preds, word_ids, "first", 3, 0) == [1, 3, 4]
    assert word_level_predictions(preds, word_ids, "majority", 3, 0) == [2, 3, 4]
    with pytest.raises(ValueError, match="strategy"):
        word_level_predictions(preds, word_ids, "last", 3, 0)


def test_word_level_predictions_keep_every_word_in_place():
    # word 1 has no sub-token (emptied by the normalizer), word 3 was cut by truncation
    preds, word_ids = [9, 1, 2, 2, 5, 9], [None, 0, 2, 2, 2, None]
    assert word_level_predictions(preds, word_ids, "first", n_words=4, default=0) == [1, 0, 2, 0]
    assert word_level_predictions(preds, word_ids, "majority", n_words=4, default=0) == [1, 0, 2, 0]
    assert word_level_predictions([3, 4, 4], [0, 0, 0], "majority", n_words=1, default=0) == [4]
    # tie: first seen
    assert word_level_predictions([3, 4, 4, 3], [0, 0, 0, 0], "majority", n_words=1, default=0) == [3]
    with pytest.raises(ValueError, match="out of range"):
        word_level_predictions(preds, word_ids, "first", n_words=2, default=0)


def test_sentence_macro_f1_hand_examples():
    # n + 1 = 11 words, one entity word, all predicted O: O has F1 2n / (2n + 1), the entity 0 -> n / (2n + 1)
    gold = ["O", "O", "B-ORG"] + ["O"] * 8
    assert macro_f1_present_labels(["O"] * 11, gold) == pytest.approx(10 / 21)
    # a third label that only the prediction has enters the average: O perfect, B-ORG and B-PER 0 -> 1/3
    pred = ["O", "O", "B-PER"] + ["O"] * 8
    assert macro_f1_present_labels(pred, gold) == pytest.approx(1 / 3)
    assert macro_f1_present_labels(gold, gold) == 1.0
    assert macro_f1_present_labels(["B-PER"], ["B-LOC"]) == 0.0
    result = token_classification_scores([["O"] * 11, gold], [gold, gold])
    assert result["per_instance"]["sentence_macro_f1"] == [pytest.approx(10 / 21), 1.0]
    assert result["sentence_macro_f1"] == pytest.approx((10 / 21 + 1) / 2)


def test_sentence_macro_f1_matches_sklearn_per_sentence():
    rng = random.Random(1)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    gold = [iob1_to_iob2([rng.choice(tags) for _ in range(rng.randint(1, 15))]) for _ in range(300)]
    pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold]
    result = token_classification_scores(pred, gold)
    # sklearn's default label set is the union of the labels in y_true and y_pred; same arithmetic, same bits
    expected = [f1_score(g, p, average="macro", zero_division=0) for g, p in zip(gold, pred)]
    assert result["per_instance"]["sentence_macro_f1"] == expected
    assert result["sentence_macro_f1"] == pytest.approx(np.mean(expected))


def _first_sentence(path, token_column, tag_column, separator=None):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        words, tags = [], []
        for line in f:
            if not line.strip():
                if words:
                    return words, tags
                continue
            parts = line.rstrip("\n").split(separator)
            if line.startswith("#") or parts[0] == "-DOCSTART-":
                continue
            words.append(parts[token_column])
            tags.append(parts[tag_column])


def test_sentence_macro_f1_reproduces_released_encodeval_scores(data_dir):
    """Released per-sentence scores of the original harness (hgissbkh/EncodEval@7e03774) on real bundle sentences.

    CoNLL testa sentence 0 ("CRICKET - LEICESTERSHIRE TAKE OVER ...", 11 words, one entity) scores 10/21 in
    results/1b-clm-42k/TC/conll2003_en/lr5e-04_sd0/results.json (validation scores_i[0]), i.e. all predicted O;
    UNER EWT test sentence 0 ("What is this Miramar ?") scores 4/9 in results/1b-clm-42k/TC/uner_en/lr5e-05_sd0
    (test scores_i[0]).
    """
    words, tags = _first_sentence(data_dir / "tc/conll2003/eng.testa.gz", 0, 3)
    assert len(words) == 11 and sum(t != "O" for t in tags) == 1
    assert macro_f1_present_labels(["O"] * 11, tags) == 0.47619047619047616
    words, tags = _first_sentence(data_dir / "tc/uner_en_ewt/en_ewt-ud-test.iob2.gz", 1, 2, "\t")
    assert words == ["What", "is", "this", "Miramar", "?"]
    assert macro_f1_present_labels(["O"] * 5, tags) == 0.4444444444444444


def test_token_classification_rejects_misaligned_sentence():
    with pytest.raises(ValueError, match="sentence 0: 1 predicted tags for 2 gold tags"):
        token_classification_scores([["O"]], [["O", "O"]])


# ----------------------------------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------------------------------


def test_normalize_answer_official_rules():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear and THE end.") == "apple pear and end"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_squad_exact_f1_hand_examples():
    assert squad_exact_f1("the Eiffel Tower!", ["Eiffel tower"]) == (1.0, 1.0)
    # pred [in, paris, france] vs gold [paris]: overlap 1, P = 1/3, R = 1 -> F1 = 2 * (1/3) / (4/3) = 0.5
    assert squad_exact_f1("in Paris France", ["Paris"]) == (0.0, pytest.approx(0.5))
    # max over golds: "Paris France" vs gold 2 matches exactly
    assert squad_exact_f1("Paris, France", ["Paris", "paris france"]) == (1.0, 1.0)
    # repeated tokens count with multiplicity: pred [b, b, c] vs gold [b, c, c]: common = {b:1, c:1} = 2, P = R = 2/3 ->
    # F1 = 2/3
    assert squad_exact_f1("b b c", ["b c c"])[1] == pytest.approx(2 / 3)


def test_squad_v2_no_answer_rules_and_breakdown():
    preds = ["", "Paris", "", "London"]
    golds = [[], [], ["Paris"], ["London", "the city of London"]]
    result = squad_scores(preds, golds, ids=["q1", "q2", "q3", "q4"])
    # q1: no answer, empty pred -> 1/1; q2: no answer, answered -> 0/0; q3: answerable, empty -> 0/0; q4 -> 1/1
    assert result["per_instance"]["exact_match"] == [1.0, 0.0, 0.0, 1.0]
    assert result["per_instance"]["f1"] == [1.0, 0.0, 0.0, 1.0]
    assert result["exact_match"] == pytest.approx(0.5) and result["f1"] == pytest.approx(0.5)
    assert result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["HasAns_exact_match"] == pytest.approx(0.5) and result["NoAns_f1"] == pytest.approx(0.5)
    assert result["per_instance"]["id"] == ["q1", "q2", "q3", "q4"]
    # a gold that normalises to "" (only an article) counts as no answer, as in the official v2 script
    assert squad_exact_f1("", ["The"]) == (1.0, 1.0)


def test_squad_v1_reports_no_breakdown():
    result = squad_scores(["Denver Broncos"], [["Denver Broncos", "Broncos"]])
    assert result["exact_match"] == 1.0 and "HasAns_f1" not in result


def test_squad_v1_rules_never_turn_a_gold_answer_into_no_answer():
    """The official v1.1 script keeps every gold answer: a gold that normalises to "" (only an article) is not an
    unanswerable question; F1 is 0 whenever no token is shared, and there is no HasAns/NoAns breakdown."""
    assert squad_exact_f1("", ["The"], version="v1.1") == (1.0, 0.0)  # v1.1: normalised strings equal, no token
    assert squad_exact_f1("", ["The"], version="v2.0") == (1.0, 1.0)  # v2.0: an unanswerable question
    assert squad_exact_f1("Paris", ["The", "Paris"], version="v1.1") == (1.0, 1.0)
    assert squad_exact_f1("in Paris France", ["Paris"], version="v1.1") == (0.0, pytest.approx(0.5))
    result = squad_scores(["", "Paris"], [["The"], ["Paris", "the"]], version="v1.1")
    assert result["f1"] == pytest.approx(0.5) and "NoAns_total" not in result and "HasAns_f1" not in result
    with pytest.raises(ValueError, match="version"):
        squad_exact_f1("a", ["a"], version="v3")


# ----------------------------------------------------------------------------------------------------------------
# Retrieval
# ----------------------------------------------------------------------------------------------------------------


def test_retrieval_hand_example():
    qrels = {"q": {"d1": 1, "d2": 1, "d9": 0}}
    run = {"q": {"d3": 0.9, "d1": 0.8, "d2": 0.7}}
    result = retrieval_scores(run, qrels)
    dcg = 1 / math.log2(3) + 1 / math.log2(4)  # d1 at rank 2, d2 at rank 3
    idcg = 1 + 1 / math.log2(3)
    assert result["ndcg@10"] == pytest.approx(dcg / idcg)  # 0.6934
    assert result["mrr@10"] == pytest.approx(0.5)
    assert result["recall@100"] == pytest.approx(1.0)


def _pytrec(run, qrels, measures):
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


@pytest.mark.parametrize("ties", [False, True])
def test_retrieval_matches_pytrec_eval_on_random_run(ties):
    rng = random.Random(1)
    docs = [f"d{i:03d}" for i in range(300)]
    qrels = {f"q{q}": {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 8))} for q in range(40)}
    qrels["q0"] = {"d000": 0}  # a query with no relevant document scores 0 everywhere
    score = (lambda: float(rng.randint(0, 5))) if ties else rng.random
    run = {q: {d: score() for d in rng.sample(docs, 150)} for q in qrels}
    for q in qrels:  # make sure some relevant documents are retrieved
        run[q].update({d: score() for d in list(qrels[q])[:2]})
    ours = retrieval_scores(run, qrels)
    ref = _pytrec(run, qrels, {"ndcg_cut_10", "recall_100"})
    # MRR@10: trec_eval's recip_rank on the run cut to its top 10 (trec_eval order: score desc, doc id desc)
    top10 = {q: dict(sorted(sorted(r.items(), reverse=True), key=lambda x: -x[1])[:10]) for q, r in run.items()}
    ref_rr = _pytrec(top10, qrels, {"recip_rank"})
    per = ours["per_instance"]
    for i, q in enumerate(per["qid"]):
        assert per["ndcg@10"][i] == pytest.approx(ref[q]["ndcg_cut_10"], abs=1e-6)
        assert per["recall@100"][i] == pytest.approx(ref[q]["recall_100"], abs=1e-6)
        assert per["mrr@10"][i] == pytest.approx(ref_rr[q]["recip_rank"], abs=1e-6)
    assert ours["ndcg@10"] == pytest.approx(np.mean([ref[q]["ndcg_cut_10"] for q in qrels]), abs=1e-6)


def test_retrieval_query_missing_from_run_scores_zero():
    result = retrieval_scores({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}, "q2": {"d2": 1}})
    assert result["per_instance"]["qid"] == ["q1", "q2"]
    assert result["per_instance"]["ndcg@10"] == [1.0, 0.0]
    assert result["ndcg@10"] == pytest.approx(0.5)


def test_squad_normalisation_is_the_official_scripts():
    """The SQuAD v1.1/v2.0 official `normalize_answer` (character filter over string.punctuation, then articles,
    then whitespace), written as the script writes it, against ours on strings with punctuation, articles, Unicode
    and case changes that lengthen a string ("İ")."""
    import re
    import string

    def official(s):
        def remove_articles(text):
            return re.sub(r"\b(a|an|the)\b", " ", text)

        def white_space_fix(text):
            return " ".join(text.split())

        def remove_punc(text):
            exclude = set(string.punctuation)
            return "".join(ch for ch in text if ch not in exclude)

        return white_space_fix(remove_articles(remove_punc(s.lower())))

    rng = random.Random(0)
    alphabet = string.printable + "éÀ’“”–—ßİ"
    texts = ["The Eiffel-Tower!", "an apple, a pear & THE plum", "  İstanbul's  ", "a.n a-n"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(2000)]
    assert [normalize_answer(t) for t in texts] == [official(t) for t in texts]
