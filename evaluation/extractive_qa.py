"""Extractive QA (SQuAD, SQuAD v2, ReCoRD): start/end logits per token (two-label token classification), F1/EM.

Long contexts are cut into windows of `qa_max_length` tokens overlapping by `doc_stride` (question first, context
truncated only). Training marks the answer's first/last token, or the first token when the window holds no answer.
Post-processing follows transformers' `examples/pytorch/question-answering/utils_qa.py`: the `n_best` start and end
logits of every window, context spans of at most `max_answer_length` tokens, the best start+end over windows; for
v2 the answer is "" when the null score (first-token start+end, lowest over windows) beats the best span.
"""

from __future__ import annotations

import collections

import numpy as np
from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding

from core import store
from evaluation import common, finetune_args, metrics, model_inputs


def _windows(batch, tokenizer, args: finetune_args.FinetuneArgs):
    return tokenizer(
        [q.lstrip() for q in batch["question"]],
        batch["context"],
        truncation="only_second",
        max_length=args.qa_max_length,
        stride=args.doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )


def prepare_train(batch, tokenizer, args: finetune_args.FinetuneArgs) -> dict:
    """Windows with `start_positions`/`end_positions` (0 = the first token when there is no answer in the window)."""
    encoded = _windows(batch, tokenizer, args)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    encoded["start_positions"], encoded["end_positions"] = [], []
    for i, offsets in enumerate(encoded.pop("offset_mapping")):
        answers = batch["answers"][sample_map[i]]
        sequence_ids = encoded.sequence_ids(i)
        context = [j for j, s in enumerate(sequence_ids) if s == 1]
        start = end = 0
        if answers["answer_start"]:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            first, last = context[0], context[-1]
            if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
                start = next(j for j in context if offsets[j][1] > start_char)
                end = next(j for j in reversed(context) if offsets[j][0] < end_char)
        encoded["start_positions"].append(start)
        encoded["end_positions"].append(end)
    return encoded


def prepare_eval(batch, tokenizer, args: finetune_args.FinetuneArgs) -> dict:
    """Windows with their example id and offsets kept only on context tokens (None elsewhere)."""
    encoded = _windows(batch, tokenizer, args)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    encoded["example_id"] = [batch["id"][s] for s in sample_map]
    encoded["offset_mapping"] = [
        [offset if encoded.sequence_ids(i)[j] == 1 else None for j, offset in enumerate(offsets)]
        for i, offsets in enumerate(encoded["offset_mapping"])
    ]
    return encoded


def tokenize(task, tokenizer, args: finetune_args.FinetuneArgs):
    """Train windows and evaluation windows, built once per tokenizer, task and settings (`common.cached`)."""
    if not tokenizer.is_fast:
        raise ValueError("extractive QA needs a fast tokenizer (offset mappings); this model ships a slow one")

    def build():
        splits = common.task_splits(task, args)
        columns = splits["train"].column_names
        windows = {
            "train": splits["train"].map(
                lambda b: prepare_train(b, tokenizer, args), batched=True, remove_columns=columns
            )
        }
        for role in ("validation", "test"):
            windows[role] = splits[role].map(
                lambda b: prepare_eval(b, tokenizer, args), batched=True, remove_columns=columns
            )
        return splits, windows

    return common.cached(tokenizer, task, args, build)


def postprocess(
    examples, windows, start_logits, end_logits, n_best: int = 20, max_answer_length: int = 30, with_null: bool = False
) -> dict[str, str]:
    """{example id: answer text ("" = no answer)} of the raw split `examples` from its windows' logits
    (utils_qa.postprocess_qa_predictions, simplified); `with_null`: "" when the null score wins."""
    by_example = collections.defaultdict(list)
    for i, example_id in enumerate(windows["example_id"]):
        by_example[example_id].append(i)
    offsets_all = windows["offset_mapping"]
    answers = {}
    for example in examples:
        best_text, best_score, null_score = "", -np.inf, np.inf
        for i in by_example[example["id"]]:
            offsets, start, end = offsets_all[i], start_logits[i], end_logits[i]
            null_score = min(null_score, start[0] + end[0])
            for s in np.argsort(start[: len(offsets)])[::-1][:n_best]:
                for e in np.argsort(end[: len(offsets)])[::-1][:n_best]:
                    if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                        continue
                    if start[s] + end[e] > best_score:
                        best_score = start[s] + end[e]
                        best_text = example["context"][offsets[s][0] : offsets[e][1]]
        answers[example["id"]] = "" if with_null and null_score > best_score else best_text
    return answers


def finetune(model_path, task, args: finetune_args.FinetuneArgs, tokenizer=None) -> common.Finetuned:
    """Fine-tune a checkpoint with a fast tokenizer on a qa task's train windows, the last step kept."""
    tokenizer = tokenizer or model_inputs.load_finetuning_tokenizer(model_path)
    _, windows = tokenize(task, tokenizer, args)
    return common.train(
        common.make_trainer(
            AutoModelForQuestionAnswering, model_path, task, args, tokenizer, windows["train"], DataCollatorWithPadding
        )
    )


def score(finetuned: common.Finetuned, task, args: finetune_args.FinetuneArgs) -> dict:
    """`store.result_body(...)` of a fine-tuned model's answers to the validation and test questions: SQuAD EM/F1
    under the task's `squad_version` rules ("v2.0" predicts and scores no-answer), per question too."""
    if finetuned.diverged:
        return store.result_body(task.metric)
    trainer = finetuned.trainer
    splits, windows = tokenize(task, trainer.processing_class, args)
    with_null = task.squad_version == "v2.0"
    scores, predictions = {}, {}
    for role in ("validation", "test"):
        start, end = trainer.predict(windows[role].remove_columns(["example_id", "offset_mapping"])).predictions[:2]
        texts = postprocess(
            splits[role],
            windows[role],
            np.asarray(start, np.float32),
            np.asarray(end, np.float32),
            args.n_best,
            args.max_answer_length,
            with_null,
        )
        ids = splits[role]["id"]
        predicted, references = [texts[i] for i in ids], [a["text"] for a in splits[role]["answers"]]
        scores[role] = metrics.squad_scores(predicted, references, ids, version=task.squad_version)
        predictions[role] = {"prediction": predicted, "reference": references}
    return store.result_body(task.metric, scores, predictions)


save = common.save_finetuned
