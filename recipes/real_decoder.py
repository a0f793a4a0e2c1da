"""The real-decoder study: the paper's recommendation (MLM continued pretraining of a CLM model) on a real pretrained
decoder, SmolLM2-135M-Instruct, at a budget 2 CPU cores afford.

    python -m recipes.real_decoder --output study/real-decoder                 # about 50 min on 2 idle cores
    python -m recipes.real_decoder --from_results docs/real-decoder-study/results.tar.xz --output study/rd-docs

Four arms on the same converted weights (`modeling_eurobert.convert` of `recipes.real_models`' SmolLM2):
  decoder-causal        the decoder as is: causal attention, no training
  decoder-bidirectional the same weights attending bidirectionally, no training
  cpt-lora              after LoRA MLM CPT (40% masking) on the bundle for the scale's steps (merged)
  cpt-full              after full MLM CPT, same data, steps and schedule
each measured on the same held-out text (masked-token loss and accuracy at 40% with the arm's attention; the
next-token loss, causal) and by frozen-feature probes (`evaluation.probe`) of SST-2, CoNLL-2003 and SciFact.
Every stage writes its result once (`results/<arm>/<measure>.json`, with what produced it) and a rerun skips what
is there, so a killed study resumes; the report (README.md, results.csv, real-decoder.png) is made from the results
alone, and `--docs` also writes the results archive from which `--from_results` regenerates the pages.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from core import artifacts, cli, model_folders, run_folders
from core.paths import resolve_data_dir
from recipes import real_models

RESULTS_FORMAT = 1
BASE = "smollm2-135m-instruct"


@dataclass(frozen=True)
class Scale:
    """How big each stage is. Sized by a measured pilot (docs/real-decoder-study/PILOT.md)."""

    cpt_steps: int
    cpt_batch: int  # blocks per step
    block_size: int = 128
    cpt_learning_rate: float = 5e-4
    lora_learning_rate: float = 2e-3
    lora_rank: int = 16
    heldout_blocks: int = 32
    sst2_pool: int = 512  # encoded training sentences; each seed's probe trains on `sst2_train` of them
    sst2_train: int = 256
    sst2_test: int = 400
    conll_pool: int = 256
    conll_train: int = 128
    conll_test: int = 300
    scifact_queries: int = 100  # test queries; the corpus is the documents judged for them
    probe_max_length: int = 128
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    device: str = "cpu"  # cuda: CPT in bf16 and the measures on the GPU

    def key(self) -> str:
        """What the results depend on: every setting but the device."""
        settings = {k: v for k, v in dataclasses.asdict(self).items() if k != "device"}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


SCALES = {
    "cpu": Scale(cpt_steps=120, cpt_batch=8, sst2_pool=384, conll_pool=192, conll_test=250),
    # A GPU's scale (not run yet: the device of this project cannot receive the 650 MB of weights, docs/studies.md):
    # 50x the CPU's CPT tokens, the probes on the whole SST-2 dev set and CoNLL testb, SciFact's 300 test queries.
    "gpu": Scale(
        cpt_steps=1500,
        cpt_batch=32,
        heldout_blocks=256,
        sst2_pool=4096,
        sst2_train=2048,
        sst2_test=872,
        conll_pool=2048,
        conll_train=1024,
        conll_test=3453,
        scifact_queries=300,
        device="cuda",
    ),
    "pilot": Scale(
        cpt_steps=2,
        cpt_batch=2,
        heldout_blocks=4,
        sst2_pool=32,
        sst2_train=16,
        sst2_test=32,
        conll_pool=24,
        conll_train=12,
        conll_test=24,
        scifact_queries=8,
        seeds=(0, 1),
    ),
}
ARMS = ("decoder-causal", "decoder-bidirectional", "cpt-lora", "cpt-full")
MEASURES = ("heldout", "sst2", "conll2003", "scifact")


def arm_model(models: Path, arm: str) -> tuple[Path, bool]:
    """(checkpoint, causal attention) of an arm."""
    return {
        "decoder-causal": (models / "converted", True),
        "decoder-bidirectional": (models / "converted", False),
        "cpt-lora": (models / "cpt-lora", False),
        "cpt-full": (models / "cpt-full", False),
    }[arm]


# --------------------------------------------------------------------------------------------------- the models
def prepare_models(output: Path, scale: Scale, decoder: Path | None, real_models_dir: Path, data_dir) -> Path:
    """The converted decoder (`decoder`, or SmolLM2 from `recipes.real_models`) and its two CPT runs under
    `output/models/` (each made once)."""
    from modeling_eurobert.convert import convert
    from recipes import cpt

    models = output / "models"
    if not (models / "converted").exists():
        convert(str(decoder or real_models.fetch(BASE, real_models_dir)), models / "converted")
    for arm, lora in (("cpt-lora", True), ("cpt-full", False)):
        if (models / arm / "config.json").exists():
            continue
        argv = [
            "--config",
            str(Path(__file__).parent / "configs" / "real-decoder-cpt.yaml"),
            "--model_name_or_path",
            str(models / "converted"),
            "--output_dir",
            str(models / arm),
            "--max_steps",
            str(scale.cpt_steps),
            "--per_device_train_batch_size",
            str(scale.cpt_batch),
            "--block_size",
            str(scale.block_size),
            "--warmup_steps",
            str(max(1, scale.cpt_steps // 10)),
            "--lr_scheduler_kwargs",
            json.dumps({"num_decay_steps": scale.cpt_steps // 5, "decay_type": "linear", "min_lr_ratio": 0.0}),
            "--learning_rate",
            str(scale.lora_learning_rate if lora else scale.cpt_learning_rate),
        ]
        if lora:
            argv += ["--lora", "true", "--lora_rank", str(scale.lora_rank)]
        if scale.device == "cuda":
            argv += ["--use_cpu", "false", "--bf16", "true"]
        if data_dir:
            argv += ["--data_dir", str(data_dir)]
        cpt.main(argv)
    return models


# ------------------------------------------------------------------------------------------------- the measures
def measure(arm: str, what: str, models: Path, scale: Scale, data_dir) -> dict:
    """One arm's result for one measure (held-out text or a task's probe)."""
    import torch

    from evaluation import probe, tasks
    from evaluation.model_inputs import load_finetuning_tokenizer
    from modeling_eurobert import EuroBertClmMlmForMaskedLM
    from pretraining import data, heldout

    directory, causal = arm_model(models, arm)
    torch.manual_seed(0)
    model = EuroBertClmMlmForMaskedLM.from_pretrained(str(directory), dtype=torch.float32).eval().to(scale.device)
    if what == "heldout":
        tokenizer = data.load_pretraining_tokenizer(directory, objective="mlm")
        blocks = heldout.heldout_blocks(
            tokenizer, scale.block_size, scale.heldout_blocks, models / "heldout-cache", data_dir
        )
        return heldout.masked_token_scores(model, blocks, tokenizer, 0.4, mlm_causal=causal)
    tokenizer = load_finetuning_tokenizer(directory)

    def encode(texts_or_ids):
        ids = [
            t if isinstance(t, list) else tokenizer(t, truncation=True, max_length=scale.probe_max_length)["input_ids"]
            for t in texts_or_ids
        ]
        return probe.token_states(model.model, ids, tokenizer.pad_token_id, desc=f"{arm} {what}", is_causal=causal)

    if what == "sst2":
        splits = tasks.load_splits("sst2", data_dir, max_train=scale.sst2_pool, max_eval=scale.sst2_test)
        return {"seeds": probe.probe_sc(encode, splits, scale.sst2_train, scale.seeds)}
    if what == "conll2003":
        task = tasks.load_task("conll2003")
        splits = tasks.load_splits(task, data_dir, max_train=scale.conll_pool, max_eval=scale.conll_test)
        return {
            "seeds": probe.probe_tc(
                encode, tokenizer, splits, task.labels, scale.conll_train, scale.seeds, scale.probe_max_length
            )
        }
    task = tasks.load_task("scifact")
    split = tasks.load_splits(task, data_dir, max_eval=scale.scifact_queries, corpus="judged")["test"]
    return {**probe.probe_ir(encode, split, task.query_prefix, task.document_prefix), "documents": len(split.corpus)}


def run_measures(output: Path, models: Path, scale_name: str, decoder: str, data_dir) -> None:
    """Every (arm, measure) result not yet in `output/results/`, each written once with what produced it."""
    from tqdm.auto import tqdm

    scale = SCALES[scale_name]
    todo = [(arm, what) for arm in ARMS for what in MEASURES if not result_path(output, arm, what).exists()]
    for arm, what in tqdm(todo, desc="real-decoder measures", unit="result"):
        started = time.time()
        scores = measure(arm, what, models, scale, data_dir)
        directory, causal = arm_model(models, arm)
        info = run_folders.read_run_info(directory)
        artifacts.write_json_atomic(
            result_path(output, arm, what),
            {
                "format": RESULTS_FORMAT,
                "study": "real-decoder",
                "decoder": decoder,
                "scale": scale_name,
                "scale_key": scale.key(),
                "settings": dataclasses.asdict(scale),
                "arm": arm,
                "measure": what,
                "attention": "causal" if causal else "bidirectional",
                "checkpoint": model_folders.checkpoint_identity(directory),
                "cpt_steps": info["steps"] if info else 0,
                "seconds": round(time.time() - started, 1),
                "versions": run_folders.package_versions("sklearn"),
                "scores": scores,
            },
        )


def check_resumable(output: Path, scale_name: str) -> None:
    """Refuse to add results to a folder whose results another scale definition made."""
    done = [artifacts.read_json(p, "real-decoder result") for p in sorted((output / "results").glob("*/*.json"))]
    other = [f"{r['arm']}/{r['measure']}" for r in done if r.get("scale_key") != SCALES[scale_name].key()]
    if other:
        raise ValueError(
            f"{output / 'results'} holds results of another definition than --scale {scale_name} "
            f"({', '.join(other[:3])}); pass another --output"
        )


def result_path(output: Path, arm: str, what: str) -> Path:
    return output / "results" / arm / f"{what}.json"


# ------------------------------------------------------------------------------------------------------ report
def read_results(results: Path) -> dict[tuple[str, str], dict]:
    found = {}
    for path in sorted(results.glob("*/*.json")):
        record = artifacts.read_json(path, "real-decoder result")
        if record.get("format") != RESULTS_FORMAT or record.get("study") != "real-decoder":
            raise ValueError(f"{path} is not a real-decoder result of format {RESULTS_FORMAT}")
        found[record["arm"], record["measure"]] = record
    keys = {r["scale_key"] for r in found.values()}
    if len(keys) > 1:
        raise ValueError(f"{results} mixes results of several scales ({', '.join(sorted(keys))}); keep one")
    return found


TASKS = (
    ("sst2", "accuracy", "SST-2 accuracy"),
    ("conll2003", "entity_f1", "CoNLL-2003 entity F1"),
    ("scifact", "ndcg@10", "SciFact NDCG@10"),
)
COMPARISONS = (
    ("decoder-bidirectional", "decoder-causal"),
    ("cpt-lora", "decoder-bidirectional"),
    ("cpt-full", "decoder-bidirectional"),
    ("cpt-lora", "decoder-causal"),
    ("cpt-full", "decoder-causal"),
)


def units(record: dict, metric: str) -> list[float]:
    """The values a CI is taken over: per seed for a probe (its training subset), per query for retrieval."""
    if "seeds" in record["scores"]:
        return [seed[metric] for _, seed in sorted(record["scores"]["seeds"].items(), key=lambda kv: int(kv[0]))]
    return record["scores"]["per_instance"][metric]


def trivial(records: dict, task: str) -> float:
    """The task's trivial baseline on the study's test instances: the majority class's accuracy (SST-2), entity F1
    of predicting no entity (0, CoNLL), the expected NDCG@10 of a random ranking (SciFact, 200 shuffles, seeded)."""
    any_record = next(r for (arm, what), r in sorted(records.items()) if what == task)
    if task == "sst2":
        reference = any_record["scores"]["seeds"]["0"]["per_instance"]["reference"]
        return max(reference.count(v) for v in set(reference)) / len(reference)
    if task == "conll2003":
        return 0.0
    return any_record["scores"]["random_ndcg@10"]


def summary_rows(records: dict) -> list[dict]:
    import numpy as np

    from analysis.statistics import confidence_interval

    rows = []
    for arm in ARMS:
        held = records[arm, "heldout"]
        row = {
            "arm": arm,
            "attention": held["attention"],
            "cpt_steps": held["cpt_steps"],
            **{k: held["scores"][k] for k in ("mlm_loss", "mlm_accuracy", "clm_loss")},
        }
        for task, metric, _ in TASKS:
            values = units(records[arm, task], metric)
            low, high = confidence_interval(values)
            row |= {
                f"{task}": float(np.mean(values)),
                f"{task}_low": low,
                f"{task}_high": high,
                f"{task}_n": len(values),
            }
        rows.append(row)
    return rows


def comparisons(records: dict, baselines: dict) -> list[dict]:
    """Paired differences (a - b) per task, over the same seeds (probes) or queries (retrieval), 95% t-interval;
    not testable where an arm's CI does not clear the task's trivial baseline."""
    import numpy as np
    from scipy import stats

    from analysis.statistics import confidence_interval

    out = []
    for task, metric, _ in TASKS:
        for a, b in COMPARISONS:
            va, vb = np.array(units(records[a, task], metric)), np.array(units(records[b, task], metric))
            diff = va - vb
            mean = float(diff.mean())
            low, high = (
                (mean, mean)
                if np.all(diff == diff[0])
                else (float(x) for x in stats.t.interval(0.95, len(diff) - 1, loc=mean, scale=stats.sem(diff)))
            )
            unlearned = [arm for arm, v in ((a, va), (b, vb)) if not confidence_interval(v)[0] > baselines[task]]
            if unlearned:
                verdict = f"not testable: {' and '.join(unlearned)} not shown above the trivial baseline"
            elif low > 0:
                verdict = f"{a} higher"
            elif high < 0:
                verdict = f"{a} lower"
            else:
                verdict = "no difference shown (the interval spans 0)"
            out.append(
                {
                    "task": task,
                    "a": a,
                    "b": b,
                    "difference": mean,
                    "low": low,
                    "high": high,
                    "n": len(diff),
                    "verdict": verdict,
                }
            )
    return out


ARM_WORDS = {
    "decoder-causal": "the decoder as is (causal)",
    "decoder-bidirectional": "same weights, bidirectional",
    "cpt-lora": "LoRA MLM CPT",
    "cpt-full": "full MLM CPT",
}


def write_report(records: dict, report: Path) -> list[Path]:
    """README.md (tables, comparisons, what they show), results.csv and real-decoder.png from the results."""
    rows = summary_rows(records)
    baselines = {task: trivial(records, task) for task, _, _ in TASKS}
    tests = comparisons(records, baselines)
    report.mkdir(parents=True, exist_ok=True)
    columns = ["arm", "attention", "cpt_steps", "mlm_loss", "mlm_accuracy", "clm_loss"]
    columns += [f"{t}{s}" for t, _, _ in TASKS for s in ("", "_low", "_high", "_n")]
    csv = [",".join(columns)] + [
        ",".join(str(r[c]) if isinstance(r[c], (str, int)) else f"{r[c]:.6f}" for c in columns) for r in rows
    ]
    written = [artifacts.write_text_atomic(report / "results.csv", "\n".join(csv) + "\n")]
    first = next(iter(records.values()))
    written.append(plot(rows, baselines, report / "real-decoder.png", f"{first['decoder']} ({first['scale']} scale)"))
    written.append(artifacts.write_text_atomic(report / "README.md", readme(first, rows, baselines, tests)))
    return written


def readme(first: dict, rows: list[dict], baselines: dict, tests: list[dict]) -> str:
    """The report's README.md: the settings of its first record, the rows, baselines and comparisons."""
    settings, scale, decoder = first["settings"], first["scale"], first["decoder"]
    tokens = settings["cpt_steps"] * settings["cpt_batch"] * settings["block_size"]
    what = (
        "a real pretrained decoder (SmolLM2-135M-Instruct, its 4-bit GGUF release dequantised: docs/models.md)"
        if decoder == BASE
        else f"the decoder {decoder}"
    )
    lines = [
        f"# The real-decoder study ({scale} scale): MLM CPT of {decoder}",
        "",
        f"Generated by `python -m recipes.real_decoder` from its results; do not edit. {what[0].upper()}"
        f"{what[1:]}, converted with `modeling_eurobert.convert`, measured as is and after MLM continued "
        f"pretraining (40% masking) of {settings['cpt_steps']} steps x {settings['cpt_batch']} blocks x "
        f"{settings['block_size']} tokens ({tokens:,} tokens of the bundle's English Wikipedia; the paper's CPT "
        "reads about 50B): a CPU-sized probe of the paper's recommendation, not its scale.",
        "",
        "## Held-out text",
        "",
        f"{settings['heldout_blocks']} blocks of {settings['block_size']} tokens of the bundle's validation "
        "Wikipedia; masked-token loss and accuracy at 40% masking with the arm's attention (a masked token "
        "predicted at its own position, as MLM does), next-token loss with causal attention.",
        "",
        "| arm | attention | CPT steps | masked-token loss | masked-token accuracy | next-token loss |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} ({ARM_WORDS[r['arm']]}) | {r['attention']} | {r['cpt_steps']} | "
            f"{r['mlm_loss']:.3f} | {r['mlm_accuracy']:.3f} | {r['clm_loss']:.3f} |"
        )
    lines += [
        "",
        "## Frozen-feature probes",
        "",
        f"Features of the frozen model with the arm's attention (`evaluation.probe`). SST-2: mean-pooled, "
        f"logistic regression trained on {settings['sst2_train']} of {settings['sst2_pool']} encoded training "
        f"sentences per seed, tested on {settings['sst2_test']} dev sentences. CoNLL-2003: each word's first "
        f"token, trained on {settings['conll_train']} of {settings['conll_pool']} sentences per seed, tested "
        f"on {settings['conll_test']} testb sentences. SciFact: cosine of mean-pooled states, "
        f"{settings['scifact_queries']} test queries ranked against the documents judged for them. Mean and "
        f"95% t-interval over {len(settings['seeds'])} seeds (the probe's training subset; the test set is "
        "fixed) for SST-2 and CoNLL, over queries for SciFact (nothing is fitted).",
        "",
        "| arm | " + " | ".join(label for _, _, label in TASKS) + " |",
        "|---|" + "---:|" * len(TASKS),
    ]
    for r in rows:
        cells = [f"{r[t]:.4f} [{r[f'{t}_low']:.4f}, {r[f'{t}_high']:.4f}]" for t, _, _ in TASKS]
        lines.append(f"| {r['arm']} | " + " | ".join(cells) + " |")
    lines.append("| trivial baseline | " + " | ".join(f"{baselines[t]:.4f}" for t, _, _ in TASKS) + " |")
    below = [f"{r['arm']} on {label}" for r in rows for t, _, label in TASKS if r[f"{t}_low"] <= baselines[t]]
    lines += [
        "",
        "Trivial baselines: the majority class (SST-2), no entity (CoNLL entity F1 0), a random ranking "
        "(SciFact, expected NDCG@10 over 200 seeded shuffles). "
        + (
            f"Not shown above it (CI lower bound at or below): {'; '.join(below)}."
            if below
            else "Every arm's interval clears it on every task."
        ),
        "",
        "## Paired comparisons",
        "",
        "Difference a - b on the same seeds (probes) or queries (SciFact), 95% t-interval; each a two-sided "
        f"decision at 5% ({len(tests)} decisions, no multiplicity correction: read them as descriptive). A "
        "comparison is made only where both arms' intervals clear the trivial baseline.",
        "",
        "| task | a | b | a - b | 95% CI | n | reading |",
        "|---|---|---|---:|---|---:|---|",
    ]
    for t in tests:
        lines.append(
            f"| {t['task']} | {t['a']} | {t['b']} | {t['difference']:+.4f} | "
            f"[{t['low']:+.4f}, {t['high']:+.4f}] | {t['n']} | {t['verdict']} |"
        )
    lines += [
        "",
        "## What this can and cannot show",
        "",
        "- One conversion and one CPT run per arm: the intervals cover the probes' training subsets (or the "
        "queries), not CPT's own run-to-run variance; a difference between CPT arms is one run each.",
        "- The probes read frozen features; fine-tuning (the paper's protocol) can change the ranking of arms.",
        f"- {tokens:,} CPT tokens is about a millionth of the paper's CPT budget: the study shows the direction "
        "of the first steps, not where CPT ends.",
        "",
        "Figure: real-decoder.png (held-out masked-token accuracy and each probe's mean with its 95% CI; "
        "dashed: the trivial baseline).",
        "",
    ]
    return "\n".join(lines)


def plot(rows: list[dict], baselines: dict, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    arms = [r["arm"] for r in rows]
    colours = ["C0", "C7", "C4", "C5"]
    axes[0].bar(arms, [r["mlm_accuracy"] for r in rows], color=colours)
    axes[0].set_title("held-out masked-token accuracy (40%)")
    for ax, (task, _, label) in zip(axes[1:], TASKS):
        means = [r[task] for r in rows]
        errors = [
            [m - r[f"{task}_low"] for m, r in zip(means, rows)],
            [r[f"{task}_high"] - m for m, r in zip(means, rows)],
        ]
        ax.bar(arms, means, yerr=errors, capsize=4, color=colours)
        ax.axhline(baselines[task], color="grey", linestyle="--", linewidth=1)
        ax.set_title(f"{label} (probe)")
    for ax in axes:
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        plt.setp(ax.get_xticklabels(), ha="right")
    fig.suptitle(f"{title}: the decoder as is, bidirectional, and after MLM CPT")
    fig.tight_layout()
    with artifacts.atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------------------- CLI
def unpack_archive(archive: Path, output: Path) -> Path:
    """The archive's result files under `output/results/`, read once and checked before any is written (members must
    be one `results/<arm>/<measure>.json` each)."""
    allowed = {f"results/{arm}/{what}.json" for arm in ARMS for what in MEASURES}
    try:
        with tarfile.open(archive) as tar:
            members = [(m.name, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
    except (tarfile.TarError, OSError, EOFError) as error:
        raise ValueError(f"{archive} is not a readable tar.xz ({error}); pass a results.tar.xz written by --docs")
    odd = [name for name, data in members if name not in allowed or data is None]
    if odd or len({name for name, _ in members}) != len(members):
        raise ValueError(
            f"{archive} holds members other than one results/<arm>/<measure>.json each "
            f"({', '.join(odd[:3]) or 'a duplicate'}); it is not a real-decoder archive"
        )
    for name, data in members:
        artifacts.write_text_atomic(output / name, data.decode("utf-8"))
    return output / "results"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recipes.real_decoder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="the study's folder (models/, results/, report/)")
    parser.add_argument("--scale", default="cpu", choices=list(SCALES))
    parser.add_argument(
        "--decoder",
        default=None,
        help="a local Llama, Mistral or Qwen decoder to study instead of "
        "SmolLM2-135M-Instruct (the default, from recipes.real_models)",
    )
    parser.add_argument(
        "--real_models",
        default=None,
        help="where recipes.real_models keeps its checkpoints (default: <output>/real-models)",
    )
    parser.add_argument("--data_dir", default=None, help="the data bundle (default: $MLM_VS_CLM_DATA, ../shared/data)")
    parser.add_argument("--from_results", default=None, help="a results.tar.xz: regenerate the report from it only")
    parser.add_argument("--docs", default=None, help="also write the report and results.tar.xz into this folder")
    return parser


def main(argv: list[str] | None = None) -> Path:
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():
        output = artifacts.check_output_dir(args.output, "--output")
        real_models_dir = Path(args.real_models or output / "real-models")
        if args.from_results and not Path(args.from_results).is_file():
            raise FileNotFoundError(f"--from_results {args.from_results} is not a file; pass a results.tar.xz")
        if args.docs:
            artifacts.check_output_dir(args.docs, "--docs")
        if args.from_results:
            results = unpack_archive(Path(args.from_results), output)
        else:
            resolve_data_dir(args.data_dir)
            if args.decoder and not Path(args.decoder, "config.json").is_file():
                raise FileNotFoundError(f"--decoder {args.decoder} is not a model folder (no config.json)")
            if not args.decoder and not (output / "models" / "converted").exists():
                real_models.check_extras([BASE], real_models_dir)
    if not args.from_results:
        models = prepare_models(
            output, SCALES[args.scale], args.decoder and Path(args.decoder), real_models_dir, args.data_dir
        )
        with cli.bad_input_exits():
            check_resumable(output, args.scale)
        run_measures(output, models, args.scale, Path(args.decoder).name if args.decoder else BASE, args.data_dir)
        results = output / "results"
    with cli.bad_input_exits():
        records = read_results(results)
        missing = [f"{a}/{m}" for a in ARMS for m in MEASURES if (a, m) not in records]
        if missing:
            raise ValueError(f"{results} lacks {', '.join(missing)}; rerun the study to complete it")
    written = write_report(records, output / "report")
    if args.docs:
        docs = Path(args.docs)
        for path in written:
            with artifacts.atomic_file(docs / path.name) as tmp:
                shutil.copyfile(path, tmp)
        artifacts.write_tar_xz(
            docs / "results.tar.xz",
            {f"results/{p.relative_to(results).as_posix()}": p for p in results.glob("*/*.json")},
        )
    print(f"report: {output / 'report' / 'README.md'}")
    return output / "report"


if __name__ == "__main__":
    main()
