"""Retrieval scored by mteb itself: a model as it is (zero-shot) or an IR model fine-tuned by `evaluation.run`.

    python -m evaluation.mteb --model out/610m-mlm40-42k --tasks scifact,squad_pairs --output results/        # offline
    python -m evaluation.mteb --model MLMvsCLM/610m-mlm40-42k --tasks SciFact,NQ,MultiLongDocRetrieval:en \
        --output results/                                                                                    # online
    python -m evaluation.mteb --model results/610m-mlm40-42k/msmarco/lr5e-05-seed0.model --tasks scifact  # fine-tuned
    python -m evaluation.mteb --model out/tiny --tasks scifact --max_eval 40 --output /tmp/results           # smoke run

The model goes to `mteb.evaluate`, so the numbers are mteb's own; nothing is trained. A task is a project IR task
(name or YAML path, looked up first: its test split as the grid loads it) or a retrieval task of mteb's registry
(`NAME[:SUBSET]`, data from the Hub); a model a sentence-transformers folder, a plain encoder (pooled and prompted as
the grid builds it) or a Hub id. Each (model, task) is one record in the grid's layout,
`<output>/<model>/<task>-mteb/lr0-seed0.json`, skipped when finished with the same identity, refused when of another
unless `--rerun_changed`; a file this tool did not write is never touched. docs/evaluation.md says the rest.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from transformers import HfArgumentParser

from core import artifacts, cli, model_folders, run_folders, store
from core.sentence_transformers_files import PROMPTS, SENTENCE_TRANSFORMERS_FILES
from evaluation import baselines, finetune_args, identity, metrics, resolve, tasks

TASK_SUFFIX = "-mteb"  # results of task T are filed under task T-mteb: their own report row
LR, SEED = 0.0, 0  # the record's grid coordinates: lr0-seed0.json (nothing is trained)
SPLIT = "test"  # the split of a project task handed to mteb
METRIC_NAMES = {"ndcg@10": "ndcg_at_10", "mrr@10": "mrr_at_10", "recall@100": "recall_at_100"}  # ours -> mteb's
PER_QUERY = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100"}  # ours -> pytrec_eval's per-query keys


@dataclass
class MtebArgs:
    """What to evaluate with mteb, and how (command-line flags of `evaluation.mteb`)."""

    model: str = field(
        metadata={
            "help": "Model directories or Hub ids (org/name[@revision]), comma-separated; "
            "NAME=DIR or NAME=ID files one under NAME."
        }
    )
    tasks: str = field(
        metadata={
            "help": "Project IR tasks (names or YAML paths; offline) and/or mteb retrieval "
            "task names (NAME or NAME:SUBSET; data from the Hub), comma-separated."
        }
    )
    output: str = field(default="results", metadata={"help": "Results directory (the grid's layout)."})
    max_eval: int | None = field(default=None, metadata={"help": "Keep at most N test queries (seed 42)."})
    ir_corpus: str = field(
        default="pooled",
        metadata={
            "help": "Project tasks: the corpus, as the grid's flag (pooled, judged, full).",
            "choices": finetune_args.IR_CORPORA,
        },
    )
    ir_relevance: str = field(
        default="binary",
        metadata={
            "help": "Project tasks: binary or graded relevance, as the grid's flag.",
            "choices": ("binary", "graded"),
        },
    )
    source: str = field(
        default="offline",
        metadata={
            "help": "Project tasks: the offline bundle or each task's Hub source.",
            "choices": ("offline", "hub"),
        },
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "Data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)."}
    )
    batch_size: int = field(default=64, metadata={"help": "Encoding batch size."})
    max_length: int | None = field(
        default=None,
        metadata={
            "help": "Max tokens per input; default: the model's own (sentence-transformers files), else 99%% of its "
            "positions as the grid."
        },
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "Model weights: fp32 or bf16; auto: bf16 on a GPU, fp32 on CPU (as the grid).",
            "choices": ("auto", "fp32", "bf16"),
        },
    )
    pooling: str = field(
        default="mean",
        metadata={
            "help": "A plain encoder's pooling: mean (default), cls or last (a sentence-transformers folder keeps its "
            "own).",
            "choices": finetune_args.IR_POOLINGS,
        },
    )
    query_prompt: str | None = field(
        default=None, metadata={"help": "A plain encoder's query prompt; default: the task's (\"Query: \")."}
    )
    document_prompt: str | None = field(
        default=None, metadata={"help": "A plain encoder's document prompt; default: the task's (\"Document: \")."}
    )
    rerun_changed: bool = field(
        default=False, metadata={"help": "Redo finished records whose identity changed; the old files are moved aside."}
    )

    def __post_init__(self):
        finetune_args.check_positive(self, "max_eval", "batch_size", "max_length")

    def dtype(self):
        import torch

        precision = self.precision if self.precision != "auto" else ("bf16" if torch.cuda.is_available() else "fp32")
        return torch.bfloat16 if precision == "bf16" else torch.float32


@dataclass
class Target:
    """One task as mteb evaluates it."""

    name: str  # the results' task name (`<task>-mteb`)
    task: object  # the mteb `AbsTaskRetrieval`, its data loaded (one subset, one split)
    identity: dict  # what decides its scores besides the model and the settings
    prompts: dict  # what a model without sentence-transformers files is given
    split: str
    subset: str


@dataclass
class Model:
    """One `--model` entry, resolved and identified."""

    name: str
    path: str
    source: str | None  # "org/name@commit" for a Hub model
    identity: dict
    finetuned_from: dict | None
    sentence_transformers: bool  # ships sentence-transformers files (else: mean pooling built here)


def project_task(task: tasks.Task, args: MtebArgs) -> Target:
    """A project IR task's test split (as `tasks.load_splits` gives it to the grid) as a local mteb task."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

    if task.family != "ir":
        raise ValueError(f"task {task.name!r} is a {task.family} task; evaluation.mteb runs retrieval (ir) tasks")
    # max_train=1: training pairs are not used here, and subsetting them changes nothing else (tasks.py docstring)
    split = tasks.load_splits(
        task,
        data_dir=args.data_dir,
        max_train=1,
        max_eval=args.max_eval,
        source=args.source,
        corpus=args.ir_corpus,
        relevance=args.ir_relevance,
    )[SPLIT]
    metadata = TaskMetadata(  # mteb's defaults otherwise (no date, licence, domains...)
        type="Retrieval",
        name=task.name,
        main_score="ndcg_at_10",
        description=task.description or task.name,
        dataset={"path": f"local/{task.name}", "revision": "local"},
        category="t2t",
        eval_splits=[SPLIT],
        eval_langs=["eng-Latn"],
        bibtex_citation="",
    )

    def load_data(self, num_proc=None, **kwargs):
        # Corpus texts already hold the task's doc_template ("title. text"): no separate title for mteb to join.
        self.dataset = {
            "default": {
                SPLIT: RetrievalSplitData(
                    queries=Dataset.from_dict({"id": list(split.queries), "text": list(split.queries.values())}),
                    corpus=Dataset.from_dict(
                        {
                            "id": list(split.corpus),
                            "text": list(split.corpus.values()),
                            "title": [""] * len(split.corpus),
                        }
                    ),
                    relevant_docs={q: dict(judged) for q, judged in split.qrels.items()},
                    top_ranked=None,
                )
            }
        }
        self.data_loaded = True

    local = type(f"Local_{task.name}", (AbsTaskRetrieval,), {"metadata": metadata, "load_data": load_data})()
    local.load_data()
    task_id = {
        **identity.task_identity(task, args.source, args.data_dir),
        "split": SPLIT,
        "max_eval": args.max_eval,
        "ir_corpus": args.ir_corpus,
        "ir_relevance": args.ir_relevance,
    }
    return Target(
        f"{task.name}{TASK_SUFFIX}",
        local,
        task_id,
        {"query": task.query_prefix, "document": task.document_prefix},
        SPLIT,
        "default",
    )


def registry_task(spec: str, args: MtebArgs) -> Target:
    """A retrieval task of mteb's registry, `NAME` or `NAME:SUBSET`, its data loaded from the Hub."""
    import mteb
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    name, _, subset = spec.partition(":")
    try:
        task = mteb.get_task(name, hf_subsets=[subset] if subset else None)
    except KeyError as error:
        raise ValueError(
            f"unknown task {spec!r}: not a project IR task ({', '.join(project_ir_tasks())}) nor an mteb "
            f"task ({error.args[0].removeprefix('KeyError: ')})"
        ) from None
    except ValueError as error:  # an unknown subset
        subsets = ", ".join(mteb.get_task(name).hf_subsets)
        raise ValueError(f"{spec}: {str(error).rstrip('.')}; subsets: {subsets}") from None
    if not isinstance(task, AbsTaskRetrieval):
        raise ValueError(f"mteb task {name!r} is a {task.metadata.type} task; evaluation.mteb runs retrieval tasks")
    if len(task.hf_subsets) != 1:
        raise ValueError(
            f"mteb task {name!r} has {len(task.hf_subsets)} subsets: name one, e.g. {name}:"
            f"{task.hf_subsets[0]} (subsets: {', '.join(task.hf_subsets)})"
        )
    splits = list(task.metadata.eval_splits)
    split = SPLIT if SPLIT in splits else splits[0] if len(splits) == 1 else None
    if split is None:
        raise ValueError(f"mteb task {name!r} has evaluation splits {splits} and none is 'test'")
    task.filter_eval_splits([split])
    try:
        task.load_data()
    except Exception as error:  # noqa: BLE001 -- datasets/Hub raise many types; all mean "no data": one line
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"cannot load mteb task {name!r} ({task.metadata.dataset['path']}) from the Hub ({first}); "
            f"go online (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE unset) or use a project IR task "
            f"({', '.join(project_ir_tasks())}) on the offline bundle"
        ) from None
    task.convert_v1_dataset_format_to_v2(num_proc=None)  # older tasks load into task.queries/corpus/relevant_docs
    data = task.dataset[task.hf_subsets[0]][split]
    if args.max_eval is not None:
        subset_queries(data, args.max_eval)
    task_id = {
        "mteb_task": name,
        "dataset": dict(task.metadata.dataset),
        "subset": task.hf_subsets[0],
        "split": split,
        "max_eval": args.max_eval,
    }
    suffix = f"-{subset}" if subset else ""
    return Target(f"{name}{suffix}{TASK_SUFFIX}", task, task_id, dict(PROMPTS), split, task.hf_subsets[0])


def subset_queries(data: dict, max_eval: int) -> None:
    """Keep `max_eval` of a loaded mteb split's judged queries in place, sampled as `tasks` does."""
    qrels = data["relevant_docs"]
    qids = tasks.sample_ids([q for q, judged in qrels.items() if judged], max_eval)
    keep = set(qids)
    data["relevant_docs"] = {q: qrels[q] for q in qids}
    data["queries"] = data["queries"].filter(lambda row: row["id"] in keep)
    if data.get("top_ranked"):
        data["top_ranked"] = {q: docs for q, docs in data["top_ranked"].items() if q in keep}


def project_ir_tasks() -> list[str]:
    return [name for name in tasks.list_tasks() if tasks.load_task(name).family == "ir"]


def resolve_task(spec: str, args: MtebArgs) -> Target:
    """A project task (name or YAML path) first, else an mteb registry task."""
    is_path = spec.endswith((".yaml", ".yml")) or Path(spec).is_file()
    if is_path or spec.split(":")[0] in tasks.list_tasks():
        return project_task(tasks.load_task(spec), args)
    return registry_task(spec, args)


def resolve_model_entry(spec: str) -> Model:
    """One `--model` entry: resolved as `evaluation.run` does, checked, and identified by its files."""
    name, path, source, info = resolve.resolve_model(spec)
    if not (Path(path) / "config.json").is_file():
        raise FileNotFoundError(
            f"model directory {path} has no config.json; pass a saved checkpoint directory, a "
            "sentence-transformers folder or a Hub id"
        )
    model_folders.check_loadable(path)
    has_st = (Path(path) / "modules.json").is_file()
    if not has_st:
        from evaluation import model_inputs  # torch: after the arguments are checked

        model_inputs.load_finetuning_tokenizer(path)  # a plain encoder needs its tokenizer: one line now, not mid-run
    model_id = dict(model_folders.checkpoint_identity(path))
    if has_st:  # the pooling, prompts and max length decide the embeddings too
        model_id["sentence_transformers"] = {
            f: artifacts.file_sha256(Path(path) / f) for f in SENTENCE_TRANSFORMERS_FILES if (Path(path) / f).is_file()
        }
    keys = ("base_model", "base_model_source", "task", "lr", "seed", "result")
    finetuned = {k: info.get(k) for k in keys} if info else None
    return Model(name, path, source, model_id, finetuned, has_st)


def load_encoder(model: Model, prompts: dict, args: MtebArgs):
    """The `SentenceTransformer` mteb is given: the folder's own, or a plain encoder built as the grid builds it."""
    from sentence_transformers import SentenceTransformer

    if model.sentence_transformers:
        encoder = SentenceTransformer(model.path, trust_remote_code=True, model_kwargs={"dtype": args.dtype()})
        if args.max_length is not None:
            encoder.max_seq_length = args.max_length
    else:
        import torch

        from evaluation import model_inputs, retrieval

        precision = "bf16_weights" if args.dtype() == torch.bfloat16 else "fp32"
        settings = finetune_args.FinetuneArgs(
            max_length=args.max_length,
            precision=precision,
            ir_pooling=args.pooling,
            query_prompt=args.query_prompt,
            document_prompt=args.document_prompt,
        )
        settings = dataclasses.replace(settings, max_length=model_inputs.max_length(settings, model.path))
        encoder = retrieval.build_model(
            model.path,
            types.SimpleNamespace(query_prefix=prompts["query"], document_prefix=prompts["document"]),
            settings,
        )
    encoder.eval()
    return encoder


def encoder_settings(encoder) -> dict:
    """What decides the embeddings besides the weights, the attention pattern included."""
    from evaluation import attention

    pooling = [m for m in encoder if type(m).__name__ == "Pooling"]
    transformers_modules = [m for m in encoder if hasattr(m, "auto_model")]
    return {
        "prompts": dict(encoder.prompts),
        "pooling": pooling[0].get_config_dict() if pooling else None,
        "max_seq_length": encoder.max_seq_length,
        "similarity": encoder.similarity_fn_name,
        "dtype": str(next(encoder.parameters()).dtype).removeprefix("torch."),
        "modules": [type(m).__name__ for m in encoder],
        "attention": attention.pattern(transformers_modules[0].auto_model) if transformers_modules else None,
    }


def evaluate(encoder, target: Target, batch_size: int) -> dict:
    """`mteb.evaluate` on one task: {"scores" of the split, "per_query" pytrec_eval scores, "qrels", "run" (mteb's
    top 1000), "corpus_size"}, kept by wrapping the task's `task_specific_scores` hook (scoring unchanged)."""
    import mteb

    task, captured = target.task, {}
    original = task.task_specific_scores

    def keep(scores, qrels, results, hf_split, hf_subset):
        captured.update(per_query=scores, qrels=qrels, run=results)
        return original(scores, qrels, results, hf_split=hf_split, hf_subset=hf_subset)

    task.task_specific_scores = keep
    try:
        # the encoding shows its progress (5,183 SciFact documents take minutes on a CPU); mteb's per-task bar does not
        result = mteb.evaluate(
            encoder,
            task,
            cache=None,
            co2_tracker=False,
            show_progress_bar=False,
            encode_kwargs={"batch_size": batch_size, "show_progress_bar": True},
        )
    finally:
        del task.task_specific_scores
    (task_result,) = result.task_results
    (scores,) = [s for s in task_result.scores[target.split] if s["hf_subset"] == target.subset]
    corpus = task.dataset[target.subset][target.split]["corpus"]
    return {"scores": scores, **captured, "corpus_size": len(corpus)}


def scores_record(evaluated: dict) -> dict:
    """The record's scores: test under the project's names, per query mteb's values and the top-100
    ranking (for `metrics.rescore`), every mteb score, and the random-ranking baseline."""
    from mteb._evaluators.retrieval_metrics import mrr

    from evaluation import retrieval

    qrels, ranked, per_query = evaluated["qrels"], evaluated["run"], evaluated["per_query"]
    mrr_at_10 = dict(zip(ranked, mrr(qrels, ranked, [10])["MRR@10"]))  # mteb's own per-query MRR, in run order
    qids = sorted(per_query)
    columns = {
        "qid": qids,
        **{ours: [float(per_query[q][k]) for q in qids] for ours, k in PER_QUERY.items()},
        "mrr@10": [float(mrr_at_10[q]) for q in qids],
        "ranking": [metrics.ranked_ids(ranked[q])[: retrieval.TOP_K] for q in qids],
        "relevance": [dict(qrels[q]) for q in qids],
    }
    scores = evaluated["scores"]
    # NaN (e.g. an nAUC over a constant score) is not JSON: null, as mteb's own result files write it
    mteb_scores = {
        k: (v if math.isfinite(v) else None) if isinstance(v, float) else v
        for k, v in scores.items()
        if isinstance(v, (int, float)) or k in ("hf_subset", "languages")
    }
    test = {ours: float(scores[theirs]) for ours, theirs in METRIC_NAMES.items()}
    baseline = baselines.random_ranking({q: qrels[q] for q in per_query}, evaluated["corpus_size"])
    return {
        **store.result_body("ndcg@10", {"validation": None, "test": test}, {"test": columns}),
        "mteb_scores": {"test": mteb_scores},
        "trivial_baseline": {"validation": None, "test": baseline},
    }


def record_identity(model: Model, target: Target, settings: dict, args: MtebArgs) -> dict:
    import mteb

    ident = {
        "model": model.identity,
        "task": target.identity,
        "protocol": {
            "evaluation": "mteb",
            "mteb": mteb.__version__,
            "encoder": settings,
            "batch_size": args.batch_size,
            "k_values": list(target.task.k_values),
        },
    }
    return json.loads(json.dumps(ident, default=str))  # as a record stores it, so comparisons see no tuple/list gap


def state(path: Path, ident: dict) -> tuple[str, list[str]]:
    """("todo" | "done" | "changed" | "foreign", why) of a record's path."""
    if not path.is_file():
        return "todo", []
    try:
        record = store.read_result(path)
    except ValueError as error:
        return "foreign", [str(error)]
    if store.record_kind(record) != "mteb":
        return "foreign", ["not written by evaluation.mteb"]
    return store.result_state(path, ident)


@dataclass
class Job:
    """One (model, task) record to write."""

    model: Model
    target: Target
    identity: dict
    path: Path
    replace: bool  # a record of another identity is there (--rerun_changed): moved aside first


def list_jobs(args: MtebArgs) -> list[Job]:
    """Check every input and list the records to write, loading each model once (its encoder is in the identity)."""
    specs = cli.split_paths(args.model)
    task_specs = cli.split_list(args.tasks)
    if not specs or not task_specs:
        raise ValueError("give at least one --model and one --tasks entry")
    if (study := run_folders.study_of(args.output)) is not None:  # its report and results dataset would take them in
        raise ValueError(
            f"--output {args.output} is the {study['study']} study's results folder, which holds its "
            "grid's results only: write mteb's records to a folder of their own and report both "
            f"(python -m analysis.report {args.output} mine/ --output DIR)"
        )
    models = [resolve_model_entry(spec) for spec in specs]
    if len({m.name for m in models}) != len(models):
        raise ValueError(f"two models share a name ({[m.name for m in models]}); use NAME=DIR for one")
    targets = [resolve_task(spec, args) for spec in task_specs]  # loads every task's data
    if len({t.name for t in targets}) != len(targets):
        raise ValueError(f"two tasks share a name ({[t.name for t in targets]}); list each once")
    jobs = []
    for model in models:
        settings = {}
        for target in targets:
            key = _encoder_key(model, target)
            if key not in settings:
                settings[key] = encoder_settings(load_encoder(model, target.prompts, args))
            ident = record_identity(model, target, settings[key], args)
            path = store.result_path(args.output, model.name, target.name, LR, SEED)
            status, why = state(path, ident)
            if status == "foreign":
                raise ValueError(
                    f"{path} exists and was not written by evaluation.mteb ({why[0]}); move it away or "
                    "use another --output"
                )
            if status == "changed" and not args.rerun_changed:
                raise ValueError(
                    f"{path} was made by something else: {'; '.join(why[:4])}; pass --rerun_changed to "
                    "redo it (the old file is moved aside) or another --output"
                )
            if status == "done":
                print(f"{path}: finished with the same identity, skipped", file=sys.stderr)
            else:
                jobs.append(Job(model, target, ident, path, status == "changed"))
    return jobs


def _encoder_key(model: Model, target: Target) -> str:
    """Tasks with equal keys get the same encoder: every task for a sentence-transformers folder, else by prompts."""
    return "" if model.sentence_transformers else json.dumps(target.prompts, sort_keys=True)


def execute(jobs: list[Job], args: MtebArgs) -> list[Path]:
    """Evaluate each job with mteb and write its record atomically; return the files written."""
    written, encoders = [], {}
    for job in jobs:
        key = (job.model.name, _encoder_key(job.model, job.target))
        if key not in encoders:
            encoders.clear()  # one model in memory at a time
            encoders[key] = load_encoder(job.model, job.target.prompts, args)
        path = job.path
        with store.lock(path, "record"):
            started = time.monotonic()
            evaluated = evaluate(encoders[key], job.target, args.batch_size)
            fields = {
                "evaluation": "mteb",
                "zero_shot": job.model.finetuned_from is None,
                **scores_record(evaluated),
                "config": {
                    **job.identity["protocol"],
                    "split": job.target.split,
                    "subset": job.target.subset,
                    "seconds": round(time.monotonic() - started, 3),
                },
            }
            record = store.new_result(
                job.model.name,
                job.target.name,
                "ir",
                LR,
                SEED,
                fields,
                job.identity,
                run_folders.package_versions("sentence_transformers", "mteb"),
                store.pretrain_seed(job.model.name),
                model_source=job.model.source,
                finetuned_from=job.model.finetuned_from,
            )
            if job.replace and path.is_file():
                store.move_aside(path)
            store.write_result(path, record)
        written.append(path)
        print(f"{job.model.name} {job.target.name}: ndcg@10 {store.main_score(record):.4f} -> {path}", file=sys.stderr)
    return written


def make_parser() -> HfArgumentParser:
    return HfArgumentParser(MtebArgs)


def main(argv: list[str] | None = None) -> None:
    """The command line: bad input -> one line and exit status 2, before any model is run."""
    transformers.logging.set_verbosity_error()
    with cli.bad_input_exits():
        (args,) = cli.parse_dataclasses(make_parser(), argv)
        jobs = list_jobs(args)
    execute(jobs, args)


if __name__ == "__main__":
    main()
