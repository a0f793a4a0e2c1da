"""Token classification (CoNLL-2003, OntoNotes, UNER, WikiANN): a tag per word, entity F1 and token micro-F1.

Words are split into sub-tokens; each word's label goes on its first sub-token and the other sub-tokens get -100
(ignored by the loss), as in transformers' `run_ner.py`. Predictions are read back on the first sub-token too.
Words cut off by truncation get the prediction "O" (counted against the model, never dropped).
"""

from __future__ import annotations

import numpy as np
from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification, Trainer

from evaluation import common, metrics

IGNORE_INDEX = -100


def align_labels(batch, tokenizer, max_length: int) -> dict:
    """Tokenize pre-split words and put each word's tag id on its first sub-token (-100 elsewhere)."""
    encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
    encoded["labels"], encoded["word_ids"] = [], []
    for i, tags in enumerate(batch["tags"]):
        word_ids = encoded.word_ids(i)
        labels, previous = [], None
        for word in word_ids:
            labels.append(tags[word] if word is not None and word != previous else IGNORE_INDEX)
            previous = word
        encoded["labels"].append(labels)
        encoded["word_ids"].append([IGNORE_INDEX if w is None else w for w in word_ids])
    return encoded


def tokenize(task, tokenizer, args: common.FinetuneArgs):
    """The task's splits with aligned labels, built once per (tokenizer, task, max_length)."""
    if not tokenizer.is_fast:
        raise ValueError("token classification needs a fast tokenizer (word_ids); this model ships a slow one")

    def build():
        splits = common.task_splits(task, args)
        return splits.map(lambda b: align_labels(b, tokenizer, args.max_length), batched=True)

    key = (common.tokenizer_fingerprint(tokenizer), task.name, args.max_length, args.max_train, args.max_eval, "tc")
    return common.cached(key, build)


def word_tags(logits: np.ndarray, word_ids: list[int], n_words: int, labels: list[str]) -> list[str]:
    """One predicted tag per word from one example's sub-token logits ("O" for words lost to truncation)."""
    predicted = logits[: len(word_ids)].argmax(-1)
    tags = [labels[i] for i in metrics.word_level_predictions(predicted, word_ids, strategy="first")]
    return tags + ["O"] * (n_words - len(tags))


def evaluate(model_path, task, args: common.FinetuneArgs, tokenizer=None) -> dict:
    """Fine-tune `model_path` on the task's train split and score the last checkpoint on validation and test.

    Args:
        model_path: a pretrained checkpoint directory with a fast tokenizer.
        task: a tc `Task` (labels are IOB2 tag names).
        args: the run's settings.
        tokenizer: the model's tokenizer, when the caller already loaded it.

    Returns:
        `common.result(...)` with entity_f1 (seqeval strict IOB2), token_micro_f1 and per-sentence counts.
    """
    tokenizer = tokenizer or common.load_tokenizer(model_path)
    data = tokenize(task, tokenizer, args)
    model = common.load_for_finetuning(
        AutoModelForTokenClassification, model_path, tokenizer, args, **common.label_kwargs(task)
    )
    max_steps, epochs = common.schedule(task, args)
    trainer = Trainer(
        model=model, args=common.training_arguments(args, common.trainer_dir(args), max_steps, epochs),
        train_dataset=data["train"].remove_columns(["tokens", "tags", "word_ids"]),
        data_collator=DataCollatorForTokenClassification(tokenizer), processing_class=tokenizer,
    )
    if common.train(trainer):
        return common.result(task, "diverged")
    scores, predictions = {}, {}
    for role in ("validation", "test"):
        split = data[role]
        logits = np.asarray(trainer.predict(split.remove_columns(["tokens", "tags", "word_ids"])).predictions, np.float32)
        gold = split["tags"]
        predicted = [word_tags(logits[i], word_ids, len(gold[i]), task.labels) for i, word_ids in enumerate(split["word_ids"])]
        references = [[task.labels[t] for t in tags] for tags in gold]
        scores[role] = metrics.token_classification_scores(predicted, references)
        predictions[role] = {"prediction": predicted, "reference": references}
    return common.result(task, "ok", scores, predictions)
