"""Token classification (CoNLL-2003, OntoNotes, UNER, WikiANN): a tag per word; EncodEval's per-sentence macro-F1,
seqeval entity F1 and token micro-F1.

Input: a sentence's words joined with single spaces, tokenized as running text with offsets, as EncodEval does (a
byte-level BPE gives "EU rejects" -> `EU Ġrejects`, not `is_split_into_words`' `EU rej ects`). A token belongs to the
word holding its first character, or to the word after the space it starts in (`Ġrejects`, a lone `Ġ`).

Labelling (`tc_labelling`: the task YAML's, or `--tc_labelling`): "first" tags a word's first token (-100 on the
others) and predicts its tag (transformers' `run_ner.py`); "all" tags every token and predicts the majority, ties to
the first seen (the EncodEval harness breaks a tie in set order). A word left without any token (truncation, or
emptied by the normalizer) is predicted "O" and counted against the model (the harness drops such words).
"""

from __future__ import annotations

import bisect

import numpy as np
from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification

from core import store
from evaluation import common, finetune_args, metrics, model_inputs

IGNORE_INDEX = -100
NO_TOKEN_TAG = "O"  # the prediction of a word without a token


def join_words(words: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The sentence as running text (words joined by single spaces) and each word's (start, end) character span."""
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word) + 1
    return " ".join(words), spans


def token_words(offsets, special_mask, spans: list[tuple[int, int]]) -> list[int | None]:
    """The word index of every token from its character offsets (None for special tokens and trailing spaces)."""
    starts = [s for s, _ in spans]
    words = []
    for (start, _), special in zip(offsets, special_mask):
        word = None
        if not special:
            w = bisect.bisect_right(starts, start) - 1
            if w >= 0 and start < spans[w][1]:
                word = w  # the token starts inside word w
            else:  # it starts in the space before a word (or is a lone space): the next word with characters
                word = next((v for v in range(w + 1, len(spans)) if spans[v][1] > spans[v][0]), None)
        words.append(word)
    return words


def align_labels(batch, tokenizer, max_length: int, labelling: str = "first") -> dict:
    """Each sentence tokenized as running text and labelled (module docstring): the tokenizer's encoding plus
    "labels" (tag id or -100 per token) and "word_ids" (word index or -100)."""
    joined = [join_words(words) for words in batch["tokens"]]
    encoded = tokenizer(
        [text for text, _ in joined],
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    offsets, special = encoded.pop("offset_mapping"), encoded.pop("special_tokens_mask")
    encoded["labels"], encoded["word_ids"] = [], []
    for i, (tags, (_, spans)) in enumerate(zip(batch["tags"], joined)):
        words = token_words(offsets[i], special[i], spans)
        labels = []
        for j, word in enumerate(words):
            first = word is not None and (j == 0 or words[j - 1] != word)
            labels.append(tags[word] if word is not None and (first or labelling == "all") else IGNORE_INDEX)
        encoded["labels"].append(labels)
        encoded["word_ids"].append([IGNORE_INDEX if w is None else w for w in words])
    return encoded


def labelling_of(task, args: finetune_args.FinetuneArgs) -> str:
    """The run's labelling: `--tc_labelling` when given, else the task's own."""
    return args.tc_labelling or task.tc_labelling


def tokenize(task, tokenizer, args: finetune_args.FinetuneArgs):
    """The task's splits with aligned labels, built once per tokenizer, task and settings (`common.cached`)."""
    if not tokenizer.is_fast:
        raise ValueError("token classification needs a fast tokenizer (offsets); this model ships a slow one")
    labelling = labelling_of(task, args)

    def build():
        splits = common.task_splits(task, args)
        return splits.map(lambda b: align_labels(b, tokenizer, args.max_length, labelling), batched=True)

    return common.cached(tokenizer, task, args, build)


def word_tags(logits: np.ndarray, word_ids: list[int], n_words: int, labels: list[str], labelling: str) -> list[str]:
    """One predicted tag per word from one example's token logits ("O" for words without a token)."""
    strategy = "first" if labelling == "first" else "majority"
    predicted = logits[: len(word_ids)].argmax(-1)
    ids = metrics.word_level_predictions(
        predicted, word_ids, strategy, n_words=n_words, default=labels.index(NO_TOKEN_TAG)
    )
    return [labels[i] for i in ids]


def finetune(model_path, task, args: finetune_args.FinetuneArgs, tokenizer=None) -> common.Finetuned:
    """Fine-tune a checkpoint with a fast tokenizer on a tc task's train split, the last step kept."""
    if NO_TOKEN_TAG not in task.labels:
        raise ValueError(
            f"task {task.name!r}: labels need an {NO_TOKEN_TAG!r} tag (predicted for words without a token)"
        )
    tokenizer = tokenizer or model_inputs.load_finetuning_tokenizer(model_path)
    data = tokenize(task, tokenizer, args)
    train = data["train"].remove_columns(["tokens", "tags", "word_ids"])
    return common.train(
        common.make_trainer(
            AutoModelForTokenClassification,
            model_path,
            task,
            args,
            tokenizer,
            train,
            DataCollatorForTokenClassification,
        )
    )


def score(finetuned: common.Finetuned, task, args: finetune_args.FinetuneArgs) -> dict:
    """`store.result_body(...)` of a fine-tuned model's TC scores on the validation and test sentences."""
    if finetuned.diverged:
        return store.result_body(task.metric)
    trainer = finetuned.trainer
    data = tokenize(task, trainer.processing_class, args)
    labelling, scores, predictions = labelling_of(task, args), {}, {}
    for role in ("validation", "test"):
        split = data[role]
        inputs = split.remove_columns(["tokens", "tags", "word_ids"])
        logits = np.asarray(trainer.predict(inputs).predictions, np.float32)
        gold = split["tags"]
        predicted = [
            word_tags(logits[i], word_ids, len(gold[i]), task.labels, labelling)
            for i, word_ids in enumerate(split["word_ids"])
        ]
        references = [[task.labels[t] for t in tags] for tags in gold]
        scores[role] = metrics.token_classification_scores(predicted, references)
        predictions[role] = {"prediction": predicted, "reference": references}
    return store.result_body(task.metric, scores, predictions)


save = common.save_finetuned
