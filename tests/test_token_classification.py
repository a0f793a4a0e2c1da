"""TC inputs: every word tokenized as in running text, for every tokenizer family, and labels kept in place."""

import numpy as np
import pytest

from evaluation import finetune_args, metrics, tasks
from evaluation import token_classification as tc
from tests.fixtures.tokenizer_families import build_all

LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
WORDS = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]
TAGS = [3, 0, 7, 0, 0, 0, 7, 0, 0]  # CoNLL-2003 train sentence 1 (IOB2 ids of LABELS)


@pytest.fixture(scope="module")
def tokenizers(data_dir):
    return build_all(data_dir)


@pytest.fixture(scope="module")
def conll(data_dir):
    return tasks.load_splits("conll2003", data_dir=data_dir, max_train=60, max_eval=1)["train"]


def encode(tokenizer, words, tags, labelling="first", max_length=128):
    enc = tc.align_labels({"tokens": [words], "tags": [tags]}, tokenizer, max_length, labelling)
    return tokenizer.convert_ids_to_tokens(enc["input_ids"][0]), enc["word_ids"][0], enc["labels"][0], enc


def first_tokens(tokens, word_ids):
    """The first token of every word, in word order."""
    return [t for j, (t, w) in enumerate(zip(tokens, word_ids)) if w != -100 and (j == 0 or word_ids[j - 1] != w)]


def test_llama3_bpe_keeps_the_space_of_every_later_word(tokenizers):
    tokenizer = tokenizers["llama3_bpe"]
    tokens, word_ids, _, _ = encode(tokenizer, WORDS, TAGS)
    firsts = first_tokens(tokens, word_ids)
    assert not firsts[0].startswith("Ġ") and all(t.startswith("Ġ") for t in firsts[1:]), tokens
    assert firsts[1].startswith("Ġre") and firsts[2].startswith("ĠG")  # `Ġrejects`-like, not `rej ects`
    # the old input (words encoded one by one) lost every space: the bug this module fixes
    split = tokenizer.convert_ids_to_tokens(tokenizer(WORDS, is_split_into_words=True)["input_ids"])
    assert not any(t.startswith("Ġ") for t in split)


@pytest.mark.parametrize("family", ["llama3_bpe", "roberta_bpe", "bert_wordpiece", "metaspace_bpe"])
def test_tc_input_is_the_running_text_for_every_family(tokenizers, conll, family):
    tokenizer = tokenizers[family]
    for row in conll:
        words, tags = row["tokens"], row["tags"]
        tokens, word_ids, labels, enc = encode(tokenizer, words, tags, max_length=512)
        assert enc["input_ids"][0] == tokenizer(" ".join(words))["input_ids"]  # exactly the sentence as text
        kept = [w for w in word_ids if w != -100]
        assert kept == sorted(kept) and set(kept) == set(range(len(words)))  # every word, in order, contiguous
        firsts = first_tokens(tokens, word_ids)
        marker = {"llama3_bpe": "Ġ", "roberta_bpe": "Ġ", "metaspace_bpe": "▁"}.get(family)
        if marker:  # every word starts its own piece with the word-start marker (the first word too, but Llama-3's)
            later = firsts[1:] if family == "llama3_bpe" else firsts
            assert all(t.startswith(marker) for t in later), (family, tokens)
        else:  # WordPiece: the later pieces of a word without punctuation continue it
            assert all(
                t.startswith("##")
                for j, (t, w) in enumerate(zip(tokens, word_ids))
                if w != -100 and word_ids[j - 1] == w and words[w].isalnum()
            )
        for j, (w, label) in enumerate(zip(word_ids, labels)):
            first = w != -100 and (j == 0 or word_ids[j - 1] != w)
            assert label == (tags[w] if first else -100)


def test_all_labelling_tags_every_subtoken(tokenizers):
    tokens, word_ids, labels, _ = encode(tokenizers["llama3_bpe"], WORDS, TAGS, "all")
    assert len(tokens) > len(WORDS) + 2  # some words have several sub-tokens
    assert labels == [-100 if w == -100 else TAGS[w] for w in word_ids]


def test_word_without_subtoken_keeps_later_labels_in_place(tokenizers):
    tokenizer = tokenizers["bert_wordpiece"]
    words = ["EU", "\ufe0f", "rejects", "German", "call"]
    tags = [3, 0, 0, 7, 0]
    assert tokenizer("\ufe0f", add_special_tokens=False)["input_ids"] == []  # accent stripping empties it
    _, word_ids, _, _ = encode(tokenizer, words, tags)
    assert 1 not in word_ids and {0, 2, 3, 4} <= set(word_ids)
    # a perfect model: each token predicts its word's gold tag
    logits = np.zeros((len(word_ids), len(LABELS)))
    for j, w in enumerate(word_ids):
        logits[j, tags[w] if w != -100 else 0] = 5.0
    for labelling in ("first", "all"):
        predicted = tc.word_tags(logits, word_ids, len(words), LABELS, labelling)
        assert predicted == ["B-ORG", "O", "O", "B-MISC", "O"]  # B-MISC stays on "German"
    # the empty word's default "O" is counted against the model when its gold is not "O"
    gold = ["B-ORG", "B-MISC", "O", "B-MISC", "O"]
    scores = metrics.token_classification_scores([predicted], [gold])
    assert scores["per_instance"]["token_correct"] == [4] and scores["per_instance"]["token_count"] == [5]


def test_truncated_words_are_predicted_o(tokenizers):
    tokens, word_ids, _, _ = encode(tokenizers["llama3_bpe"], WORDS, TAGS, max_length=6)
    assert len(tokens) == 6 and max(word_ids) < len(WORDS) - 1
    logits = np.zeros((len(word_ids), len(LABELS)))
    logits[:, 3] = 1.0  # B-ORG everywhere
    predicted = tc.word_tags(logits, word_ids, len(WORDS), LABELS, "first")
    n_seen = max(word_ids) + 1
    assert predicted == ["B-ORG"] * n_seen + ["O"] * (len(WORDS) - n_seen)


def test_first_and_majority_predictions_on_hand_made_logits():
    # tokens:   <s>  w0   w0   w1   w1   w1   w2   </s>
    word_ids = [-100, 0, 0, 1, 1, 1, 2, -100]
    argmax = [0, 1, 2, 3, 4, 4, 5, 0]  # w0: tie 1/2 -> first seen (1); w1: 3 then 4, 4 -> majority 4
    logits = np.eye(len(LABELS))[argmax]
    assert tc.word_tags(logits, word_ids, 3, LABELS, "first") == ["B-PER", "B-ORG", "B-LOC"]
    assert tc.word_tags(logits, word_ids, 3, LABELS, "all") == ["B-PER", "I-ORG", "B-LOC"]
    # padding past the example's tokens is ignored
    padded = np.concatenate([logits, np.eye(len(LABELS))[[7, 7]]])
    assert tc.word_tags(padded, word_ids, 3, LABELS, "all") == ["B-PER", "I-ORG", "B-LOC"]


def test_labelling_setting_task_then_flag(tmp_path):
    task = tasks.load_task("conll2003")
    assert task.tc_labelling == "all"  # the paper scale: the harness's labelling
    assert tc.labelling_of(task, finetune_args.FinetuneArgs()) == "all"
    assert tc.labelling_of(task, finetune_args.FinetuneArgs(tc_labelling="first")) == "first"
    with pytest.raises(ValueError, match="tc_labelling"):
        finetune_args.FinetuneArgs(tc_labelling="last")
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\nfamily: tc\nmetric: entity_f1\nbudget: {epochs: 1}\nlabels: [O]\n"
        "tc_labelling: middle\noffline: {format: conll, files: {train: x}}\n"
    )
    with pytest.raises(ValueError, match="tc_labelling must be one of"):
        tasks.load_task(path)
