"""Sequence classification (SST-2, MNLI, QQP, MRPC): a classification head on the encoder, accuracy.

Pair tasks arrive as one text, the task's template applied (the paper's input); with `--pair_encoding segments` a
model with token-type embeddings gets two segments instead, as `run_glue` does. The head and its pooling are the
checkpoint's own (`AutoModelForSequenceClassification`).
"""

from __future__ import annotations

import numpy as np
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer

from core import store
from evaluation import common, finetune_args, metrics, model_inputs


def tokenize(task, tokenizer, args: finetune_args.FinetuneArgs):
    """The task's splits tokenized once per tokenizer, task and settings (`common.cached`), shared by the grid."""

    def build():
        splits = common.task_splits(task, args)
        texts = [column for column in ("text", "text_pair") if column in splits["train"].column_names]

        def encode(batch):
            return tokenizer(*[batch[c] for c in texts], truncation=True, max_length=args.max_length, **pair)

        pair = {"return_token_type_ids": True} if len(texts) == 2 else {}  # asked for: not every tokenizer lists them
        return splits.map(encode, batched=True, remove_columns=texts)

    return common.cached(tokenizer, task, args, build)


def build_trainer(model_path, task, args: finetune_args.FinetuneArgs, tokenizer, train_dataset) -> Trainer:
    """The run's model (a new classification head, in the precision's dtype) and its Trainer."""
    return common.make_trainer(
        AutoModelForSequenceClassification, model_path, task, args, tokenizer, train_dataset, DataCollatorWithPadding
    )


def finetune(model_path, task, args: finetune_args.FinetuneArgs, tokenizer=None) -> common.Finetuned:
    """Fine-tune a checkpoint on an sc task's train split: a new classification head, the last step kept."""
    tokenizer = tokenizer or model_inputs.load_finetuning_tokenizer(model_path)
    return common.train(build_trainer(model_path, task, args, tokenizer, tokenize(task, tokenizer, args)["train"]))


def score(finetuned: common.Finetuned, task, args: finetune_args.FinetuneArgs) -> dict:
    """`store.result_body(...)` of a fine-tuned model's accuracy on the validation and test splits."""
    if finetuned.diverged:
        return store.result_body(task.metric)
    trainer = finetuned.trainer
    data = tokenize(task, trainer.processing_class, args)
    scores, predictions = {}, {}
    for role in ("validation", "test"):
        predicted = np.asarray(trainer.predict(data[role]).predictions, dtype=np.float32).argmax(-1).tolist()
        scores[role] = metrics.accuracy(predicted, data[role]["label"])
        predictions[role] = {
            "prediction": [task.labels[i] for i in predicted],
            "reference": [task.labels[i] for i in data[role]["label"]],
        }
    return store.result_body(task.metric, scores, predictions)


save = common.save_finetuned
