"""Show what a model is fed for a task: the text or words, the tokens as its tokenizer writes them, and the labels.

    python -m evaluation.inspect --model out/610m-mlm40-42k --task conll2003 [--n 3] [--split train]
    python -m evaluation.inspect --model out/tiny --task path/to/mytask.yaml --data_dir /data --max_length 128
    python -m evaluation.inspect --model out/tiny --task sst2,conll2003,squad,scifact --n 1   # several tasks

For the first `--n` examples of the split, built by the functions fine-tuning uses: sc: the template-filled text,
the label, the tokens; tc: the words and tags, then per token its word and the tag it is trained on (-100 = ignored),
under the task's labelling; qa: the question and answer, the windows, the answer span in tokens (start..end) and
the tokens of its window (token 0 = no answer in any window); ir: query and document texts with their prefixes and
tokens (train: the pairs; validation/test: each query with its most relevant judged document).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from core import cli
from evaluation import finetune_args, tasks


def _tokens(tokenizer, ids) -> str:
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return f"({len(tokens)}) " + " ".join(tokens)


def _show_sc(task, split, tokenizer, args) -> list[str]:
    lines = []
    for i, row in enumerate(split):
        ids = tokenizer(row["text"], truncation=True, max_length=args.max_length)["input_ids"]
        # texts are shown as repr: quotes and escapes show a template's "\n" and stray spaces
        lines += [
            f"[{i}] text: {row['text']!r}",
            f"    label: {row['label']} ({task.labels[row['label']]})",
            f"    tokens {_tokens(tokenizer, ids)}",
        ]
    return lines


def _show_tc(task, split, tokenizer, args) -> list[str]:
    from evaluation import token_classification

    ignore = token_classification.IGNORE_INDEX
    labelling = args.tc_labelling or task.tc_labelling
    encoded = token_classification.align_labels(split[:], tokenizer, args.max_length, labelling)
    which = "every" if labelling == "all" else "the first"
    lines = [f"labelling: {labelling} (tag on {which} sub-token of a word; -100 = ignored by the loss)"]
    for i, row in enumerate(split):
        tags = " ".join(task.labels[t] for t in row["tags"])
        lines += [f"[{i}] words: {' '.join(row['tokens'])}", f"    tags:  {tags}"]
        ids = encoded["input_ids"][i]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        width = max(len(t) for t in tokens)
        for token_id, token, word, label in zip(ids, tokens, encoded["word_ids"][i], encoded["labels"][i]):
            if word == ignore:
                where = "special" if token_id in tokenizer.all_special_ids else "no word"
            else:
                where = f"word {word} {row['tokens'][word]!r}"
            tag = "-100" if label == ignore else task.labels[label]
            lines.append(f"    {token:<{width}}  {tag:<8}  {where}")
        kept = {w for w in encoded["word_ids"][i] if w != ignore}
        lost = [w for w in range(len(row["tokens"])) if w not in kept]
        if lost:
            lines.append(f"    words without a token (predicted {token_classification.NO_TOKEN_TAG!r}): {lost}")
    return lines


def _show_qa(task, split, tokenizer, args) -> list[str]:
    from evaluation import extractive_qa, model_inputs

    settings = finetune_args.FinetuneArgs(qa_max_length=args.max_length or finetune_args.FinetuneArgs.qa_max_length)
    if (Path(args.model) / "config.json").is_file():  # the grid's windows: cut to fit the model's positions
        length, stride = model_inputs.qa_windows(settings, args.model)
        settings = dataclasses.replace(settings, qa_max_length=length, doc_stride=stride)
    lines = []
    for i, row in enumerate(split):
        windows = extractive_qa.prepare_train({k: [v] for k, v in row.items()}, tokenizer, settings)
        hit = next((w for w, s in enumerate(windows["start_positions"]) if s > 0), 0)
        start, end = windows["start_positions"][hit], windows["end_positions"][hit]
        ids = windows["input_ids"][hit]
        answer = repr(row["answers"]["text"][0]) if row["answers"]["text"] else "(no answer)"
        span = (
            f"tokens {start}..{end}: {' '.join(tokenizer.convert_ids_to_tokens(ids[start : end + 1]))}"
            if start > 0
            else "token 0 (no answer in any window)"
        )
        windowing = f"max_length {settings.qa_max_length}, stride {settings.doc_stride}"
        lines += [
            f"[{i}] question: {row['question']!r}",
            f"    answer: {answer}",
            f"    windows: {len(windows['input_ids'])} ({windowing}); answer span in window {hit}: {span}",
            f"    window {hit} tokens {_tokens(tokenizer, ids)}",
        ]
    return lines


def _show_ir(task, split, tokenizer, args) -> list[str]:
    if isinstance(split, tasks.RetrievalSplit):
        pairs = []
        for qid in list(split.queries)[: args.n]:
            best = max(split.qrels[qid].items(), key=lambda judged: judged[1])[0]  # its most relevant document
            pairs.append((split.queries[qid], split.corpus[best]))
    else:
        pairs = [(row["query"], row["positive"]) for row in split]
    lines = []
    for i, (query, document) in enumerate(pairs):
        for name, text in (("query", task.query_prefix + query), ("document", task.document_prefix + document)):
            ids = tokenizer(text, truncation=True, max_length=args.max_length)["input_ids"]
            lines += [f"[{i}] {name}: {text!r}", f"    tokens {_tokens(tokenizer, ids)}"]
    return lines


SHOW = {"sc": _show_sc, "tc": _show_tc, "qa": _show_qa, "ir": _show_ir}


def inspect(args: argparse.Namespace) -> str:
    """What the model is fed for each task of `args.task`, as one report: every task is read and tokenized
    before it returns, so a bad one leaves no partial output."""
    task_list = [tasks.load_task(name) for name in cli.split_list(args.task)]
    if not task_list:
        raise ValueError("--task is empty; give a task name or a task YAML path")
    import datasets  # torch and datasets: after the flags and task names are checked
    import transformers

    from evaluation import model_inputs

    transformers.logging.set_verbosity_error()  # the report is the only output
    datasets.disable_progress_bars()
    tokenizer = model_inputs.load_finetuning_tokenizer(args.model)
    reports = []
    for task in task_list:
        if task.family in ("tc", "qa") and not tokenizer.is_fast:
            raise ValueError(f"{task.name} needs a fast tokenizer (offsets); {args.model} has a slow one")
        split = tasks.load_splits(task, data_dir=args.data_dir)[args.split]
        if not isinstance(split, tasks.RetrievalSplit):
            split = split.select(range(min(args.n, len(split))))
        settings = argparse.Namespace(**vars(args))
        if settings.max_length is None and task.family != "qa":  # the grid's default: 99% of the model's positions
            if not (Path(args.model) / "config.json").is_file():
                raise ValueError(f"{args.model} has no config.json to size the inputs from; pass --max_length")
            settings.max_length = model_inputs.max_length(finetune_args.ProtocolArgs(), args.model)
        header = (
            f"== {task.name} ({task.family}), {args.split} split, first {args.n} example(s), tokenizer "
            f"{type(tokenizer).__name__} of {args.model}"
        )
        reports.append("\n".join([header, *SHOW[task.family](task, split, tokenizer, settings)]))
    return "\n\n".join(reports)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block: the same contract as every other bad input
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="model directory (its tokenizer is used)")
    parser.add_argument("--task", required=True, help="task name or task YAML path (several: comma-separated)")
    parser.add_argument("--n", type=int, default=3, help="number of examples (default 3)")
    parser.add_argument("--split", default="train", choices=tasks.ROLES, help="split (default train)")
    parser.add_argument("--data_dir", help="data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)")
    parser.add_argument(
        "--max_length",
        type=int,
        help=f"max tokens (default: as the grid, 99%% of the model's positions; QA windows "
        f"{finetune_args.ProtocolArgs.qa_max_length})",
    )
    parser.add_argument("--tc_labelling", choices=tasks.TC_LABELLINGS, help="TC labelling (default: the task's own)")
    return parser


def main(argv=None) -> None:
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():
        if args.n < 1:
            raise ValueError(f"--n must be at least 1, got {args.n}")
        if args.max_length is not None and args.max_length < 1:
            raise ValueError(
                f"--max_length must be at least 1 token, got {args.max_length} (leave it unset for the grid's default)"
            )
        report = inspect(args)
    print(report)


if __name__ == "__main__":
    main()
