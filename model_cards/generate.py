"""Model cards and the results dataset card, built with huggingface_hub's `ModelCard` / `DatasetCard`.

    python -m model_cards.generate CHECKPOINT_DIR [--summary report/summary.csv]    # -> CHECKPOINT_DIR/README.md
    python -m model_cards.generate --results results/ --summary report/summary.csv  # -> report/README.md

A card never replaces a file that this tool did not write (`--force` to do it anyway).

A card is filled from what the run recorded (`run_info.json` next to the weights) and from the evaluation
summary (`summary.csv`); the Jinja templates (`template.md`, `results_template.md`) hold no logic beyond loops.
Names follow the study's grammar (SPEC "Model card naming grammar"), parsed by `parse_name`:

    <size>-<objective>[ratio]-<steps>            610m-mlm40-42k, 1b-clm-42k
    <size>-clm-<k1>-mlm<ratio>-<total>           610m-clm-10k-mlm40-42k   (two phases, PFS)
    <size>-<base>-dec<steps>-mlm<ratio>-<total>  610m-clm-dec42k-mlm40-44k (continued pretraining, CPT)
    <name>-<step>                                610m-clm-42k-1000        (intermediate checkpoint)
"""

import argparse
import csv
import json
import math
import re

from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData, EvalResult, ModelCard, ModelCardData

from recipes import artifacts
from recipes.names import parse_name

TEMPLATE = Path(__file__).with_name("template.md")
RESULTS_TEMPLATE = Path(__file__).with_name("results_template.md")
ARXIV_ID = "2507.00994"

# model-index task types, one per evaluation family (SPEC "Evaluation protocol").
FAMILY_TASK_TYPES = {
    "SC": ("text-classification", "Sequence classification"),
    "TC": ("token-classification", "Token classification"),
    "QA": ("question-answering", "Extractive question answering"),
    "IR": ("sentence-similarity", "Retrieval"),
}
RUN_INFO_KEYS = ("name", "size", "objective", "mlm_probability", "steps", "pfs_switch_step", "cpt_base", "preset",
                 "run_config", "training_args", "versions", "git_commit", "data", "tokens_seen")
# TrainingArguments worth showing on a card; the full set stays in run_info.json.
TRAINING_ARG_KEYS = ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "max_steps",
                     "per_device_train_batch_size", "gradient_accumulation_steps", "weight_decay", "adam_beta1",
                     "adam_beta2", "adam_epsilon", "max_grad_norm", "bf16", "seed", "data_seed")
SUMMARY_COLUMNS = ("model", "task", "family", "metric", "best_lr", "n_seeds", "mean", "ci_low", "ci_high", "std",
                   "n_diverged")


def _objective_words(objective: str, ratio: int | None) -> str:
    if objective == "clm":
        return "causal language modeling (CLM, next-token prediction)"
    return f"masked language modeling (MLM) with a {ratio}% masking ratio"


def name_lines(name: str) -> list[str]:
    """One line per part of the name, for the card's "What the name means" list."""
    p = parse_name(name)
    lines = [f"`{p['size']}`: model size, about {p['size'].upper()} parameters (SPEC size table)."]
    if p["kind"] == "single":
        lines.append(f"`{p['objective']}{p['ratio'] or ''}`: {_objective_words(p['objective'], p['ratio'])} "
                     "for the whole run.")
    elif p["kind"] == "two_phase":
        lines.append(f"`clm-{p['switch_step'] // 1000}k`: first phase, CLM for the first {p['switch_step']:,} steps.")
        lines.append(f"`mlm{p['ratio']}`: second phase, {_objective_words('mlm', p['ratio'])} for the remaining "
                     f"{p['total_steps'] - p['switch_step']:,} steps, in the same run (PFS: optimizer state, "
                     "learning-rate schedule and data position carry over).")
    else:
        base_run = f"{p['size']}-{p['base']}-{p['base_steps'] // 1000}k"
        base_ratio = int(p["base"][3:]) if p["base"] != "clm" else None
        lines.append(f"`{p['base']}-dec{p['base_steps'] // 1000}k`: continued pretraining (CPT) starts from the "
                     f"decayed {p['base_steps']:,}-step checkpoint `{base_run}` "
                     f"({_objective_words(p['base'][:3], base_ratio)}).")
        lines.append(f"`mlm{p['ratio']}`: CPT objective, {_objective_words('mlm', p['ratio'])} for "
                     f"{p['total_steps'] - p['base_steps']:,} more steps.")
    lines.append(f"`{p['total_steps'] // 1000}k`: {p['total_steps']:,} training steps in all (the paper's budget).")
    if p["step"] is not None:
        lines.append(f"`{p['step']}`: intermediate checkpoint saved at step {p['step']:,} of `{p['run_name']}`.")
    return lines


def describe_name(name: str) -> str:
    """Explain a model name in one paragraph.

    Args:
        name: a model name of the study's grammar (see `parse_name`).

    Returns:
        A plain-English sentence, e.g. "610m-clm-10k-mlm40-42k: a 610m model trained for 42,000 steps: ...".

    Raises:
        ValueError: the name is outside the grammar.
    """
    p = parse_name(name)
    head = f"{name}: a {p['size']} encoder"
    if p["kind"] == "single":
        body = f"trained for {p['total_steps']:,} steps with {_objective_words(p['objective'], p['ratio'])}"
    elif p["kind"] == "two_phase":
        body = (f"trained for {p['total_steps']:,} steps in two phases (PFS): CLM for the first "
                f"{p['switch_step']:,} steps, then {_objective_words('mlm', p['ratio'])} for the remaining "
                f"{p['total_steps'] - p['switch_step']:,}")
    else:
        body = (f"continued pretraining (CPT) of the decayed {p['base_steps']:,}-step "
                f"{p['base'].upper()} checkpoint with {_objective_words('mlm', p['ratio'])} for "
                f"{p['total_steps'] - p['base_steps']:,} more steps ({p['total_steps']:,} in all)")
    if p["step"] is not None:
        return f"{head}, intermediate checkpoint at step {p['step']:,} of the run {p['run_name']}, which is {body}."
    return f"{head} {body}."


def load_run_info(checkpoint_dir: Path) -> dict:
    """Read and check `run_info.json` of a checkpoint folder (all contract keys present)."""
    path = Path(checkpoint_dir) / "run_info.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass a checkpoint folder written by recipes/pretrain.py")
    info = artifacts.read_json(path, "run info")
    missing = [k for k in RUN_INFO_KEYS if k not in info]
    if missing:
        raise ValueError(f"{path} lacks {missing}: re-save the checkpoint with the current recipes/pretrain.py")
    return info


def checkpoint_name(checkpoint_dir: Path, info: dict) -> str:
    """The model name of a checkpoint: run_info's name, plus "-<step>" under `<run>/intermediate/step-<N>/`."""
    checkpoint_dir = Path(checkpoint_dir)
    match = re.fullmatch(r"step-(\d+)", checkpoint_dir.name)
    if checkpoint_dir.parent.name == "intermediate" and match and not info["name"].endswith(f"-{match[1]}"):
        return f"{info['name']}-{match[1]}"
    return info["name"]


def _check_consistent(name: str, info: dict) -> dict:
    """The name and run_info must tell the same story (steps may differ: toy presets keep paper names)."""
    p = parse_name(name)
    problems = []
    if info["objective"] != p["objective"]:
        problems.append(f"objective {info['objective']!r} (name says {p['objective']!r})")
    if p["ratio"] is not None and not math.isclose(info["mlm_probability"] or 0, p["ratio"] / 100):
        problems.append(f"mlm_probability {info['mlm_probability']} (name says {p['ratio']}%)")
    if (info["pfs_switch_step"] is not None) != (p["kind"] == "two_phase"):
        problems.append(f"pfs_switch_step {info['pfs_switch_step']} (name kind {p['kind']})")
    if (info["cpt_base"] is not None) != (p["kind"] == "cpt"):
        problems.append(f"cpt_base {info['cpt_base']} (name kind {p['kind']})")
    if problems:
        raise ValueError(f"run_info.json of {name} contradicts its name: {'; '.join(problems)}")
    return p


def _fmt(value) -> str:
    if value in (None, ""):
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.2f}"


def read_summary(summary_csv: Path, model: str | None = None) -> list[dict]:
    """Rows of `summary.csv` (all, or those of one model), with the contract's columns checked.

    Args:
        summary_csv: the evaluation report's summary table.
        model: keep only this model's rows.

    Returns:
        list of dicts keyed by the summary columns (strings, as in the file).
    """
    with open(summary_csv, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in SUMMARY_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{summary_csv} lacks columns {missing}: pass the summary.csv written by evaluation")
        rows = list(reader)
    unknown = sorted({r["family"].upper() for r in rows} - set(FAMILY_TASK_TYPES))
    if unknown:
        raise ValueError(f"{summary_csv}: unknown task families {unknown}; expected {sorted(FAMILY_TASK_TYPES)}")
    return [r for r in rows if model is None or r["model"] == model]


def _table_rows(rows: list[dict]) -> list[dict]:
    return [{"family": r["family"].upper(), "task": r["task"], "metric": r["metric"], "mean": _fmt(r["mean"]),
             "ci": f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]", "std": _fmt(r["std"]), "best_lr": r["best_lr"],
             "n_seeds": r["n_seeds"], "n_diverged": r["n_diverged"]} for r in rows]


def _eval_results(rows: list[dict], stand_in: bool) -> list[EvalResult]:
    results = []
    for r in rows:
        if _fmt(r["mean"]) == "n/a":  # every seed diverged: nothing to report in model-index
            continue
        task_type, task_name = FAMILY_TASK_TYPES[r["family"].upper()]
        results.append(EvalResult(
            task_type=task_type, task_name=task_name, dataset_type=r["task"],
            dataset_name=f"{r['task']} (stand-in)" if stand_in else r["task"], dataset_split="test",
            metric_type=r["metric"], metric_value=round(float(r["mean"]), 4),
            metric_name=f"{r['metric']} (mean of {r['n_seeds']} seeds at LR {r['best_lr']}, "
                        f"95% CI [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}])"))
    return results


def _flatten(prefix: str, value) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [kv for k, v in value.items() for kv in _flatten(f"{prefix}.{k}" if prefix else k, v)]
    return [(prefix, f"`{json.dumps(value)}`" if isinstance(value, (list, dict)) else str(value))]


def _facts(info: dict, p: dict) -> list[tuple[str, str]]:
    facts = [("preset", info["preset"]),
             ("objective (last phase)", _objective_words(p["objective"], p["ratio"])),
             ("masking ratio", f"{info['mlm_probability']:.0%}" if info["objective"] == "mlm" else "none (CLM)"),
             ("steps trained", f"{info['steps']:,} (the paper's run: {p['step'] or p['total_steps']:,})"),
             ("tokens seen", f"{info['tokens_seen']:,}")]
    if info["pfs_switch_step"] is not None:
        facts.append(("PFS switch", f"CLM until step {info['pfs_switch_step']:,}, then MLM"))
    if info["cpt_base"] is not None:
        facts.append(("CPT base", f"`{info['cpt_base']}` (decayed checkpoint)"))
    facts += [("pretraining data", f"{info['data'].get('source')} (fingerprint `{info['data'].get('fingerprint')}`)"),
              ("code", f"git commit `{info['git_commit']}`")]
    return facts


def _limitations(info: dict, p: dict) -> list[str]:
    lines = []
    if info["preset"] != "paper":
        lines.append(f"Toy scale: trained with the `{info['preset']}` preset for {info['steps']:,} steps "
                     f"({info['tokens_seen']:,} tokens) on {info['data'].get('source')}, a stand-in for the paper's "
                     "~100B tokens of FineWeb-Edu. The name is that of the paper's run it reproduces, not a claim "
                     "about this checkpoint's budget; do not compare its scores with the paper's.")
        lines.append("Evaluation used small public stand-in datasets where the paper's are not available offline "
                     "(see the results dataset card), so the numbers are not comparable with published ones.")
    lines += ["English only; a pretrained backbone, not fine-tuned for any task: fine-tune it or pool its "
              "hidden states before use.",
              "Some training settings of the original study were inferred from its code and checkpoint names "
              "(marked in the project's SPEC); `run_info.json` records what this run actually used."]
    return lines


def build_model_card(checkpoint_dir, summary_csv=None, repo_id: str | None = None,
                     revision: str | None = None) -> ModelCard:
    """Build the model card of one checkpoint folder.

    Args:
        checkpoint_dir: a `save_pretrained` folder holding `run_info.json` (final, or `<run>/intermediate/step-<N>`).
        summary_csv: the evaluation `summary.csv`; rows whose model is this checkpoint's name fill the table.
        repo_id: Hub repo id used in the usage snippet ("<your-org>/<name>" when unknown).
        revision: Hub branch of this checkpoint (intermediate checkpoints live on `step-<N>` branches).

    Returns:
        a `huggingface_hub.ModelCard` with `model-index` metadata (`card.data.eval_results`).
    """
    info = load_run_info(checkpoint_dir)
    name = checkpoint_name(checkpoint_dir, info)
    p = _check_consistent(name, info)
    rows = read_summary(summary_csv, name) if summary_csv else []
    stand_in = info["preset"] != "paper"
    card_data = ModelCardData(
        library_name="transformers", model_name=name, language="en",
        pipeline_tag="fill-mask" if p["objective"] == "mlm" else "feature-extraction",
        tags=["eurobert", "encoder", "mlm-vs-clm", p["objective"], f"arxiv:{ARXIV_ID}"],
        datasets=None if stand_in else ["HuggingFaceFW/fineweb-edu"],
        eval_results=_eval_results(rows, stand_in) or None)
    if rows:
        eval_intro = ("Fine-tuning results (SPEC protocol): for each task the learning rate is chosen by mean "
                      "validation score over seeds; the table gives the test mean with a 95% confidence interval "
                      "over seeds, the standard deviation and the number of diverged runs.")
    elif summary_csv:
        eval_intro = f"`{Path(summary_csv).name}` holds no results for `{name}`: this checkpoint was not evaluated."
    else:
        eval_intro = "No evaluation summary was given when this card was generated."
    # run_config holds the settings that decide the weights; the other TrainingArguments worth showing come after.
    hyper = _flatten("", info["run_config"])
    shown = {key for key, _ in hyper}
    hyper += [(f"training_args.{k}", str(info["training_args"][k])) for k in TRAINING_ARG_KEYS
              if k in info["training_args"] and f"training_args.{k}" not in shown]
    summary = describe_name(name)
    if info["preset"] != "paper":  # the name keeps the paper's grammar; say what was really trained
        arch = info["run_config"].get("run_settings", {}).get("model_preset") or "given"
        summary += (f" **This is a `{info['preset']}`-scale reproduction:** the `{arch}` architecture trained for "
                    f"{info['steps']:,} steps ({info['tokens_seen']:,} tokens), not the paper's model.")
    return ModelCard.from_template(
        card_data, template_path=str(TEMPLATE), name=name, summary=summary, name_lines=name_lines(name),
        facts=_facts(info, p), hyperparameters=hyper, eval_intro=eval_intro, eval_rows=_table_rows(rows),
        repo_id=repo_id or f"<your-org>/{name}", revision_arg=f', revision="{revision}"' if revision else "",
        usage_note=_usage_note(p, revision), limitations=_limitations(info, p),
        versions=sorted(info["versions"].items()))


def _usage_note(p: dict, revision: str | None) -> str:
    note = ("The CLM and MLM models share every parameter name and differ only in the attention mask, so a CLM "
            "checkpoint loads into the masked-LM class unchanged: that is how the study turns decoders into encoders.")
    if revision:
        note += f" This intermediate checkpoint lives on the `{revision}` branch; `main` holds the final one."
    return note


def _scan_runs(results_dir: Path) -> list[dict]:
    paths = artifacts.result_files(results_dir)
    if not paths:
        raise FileNotFoundError(f"no per-run results under {results_dir}: expected <model>/<task>/lr<lr>-seed<s>.json")
    runs = []
    for path in paths:
        run = artifacts.read_result(path)
        if run.get("status") not in ("ok", "diverged"):
            raise ValueError(f"{path}: status must be 'ok' or 'diverged', got {run.get('status')!r}")
        runs.append(run)
    return runs


def build_results_card(results_dir, summary_csv, repo_id: str | None = None) -> DatasetCard:
    """Build the dataset card of the per-run evaluation results.

    Args:
        results_dir: folder of per-run JSON files `<model>/<task>/lr<lr>-seed<seed>.json`.
        summary_csv: the evaluation `summary.csv` (one row per model, task and metric).
        repo_id: dataset repo id shown in the loading snippet.

    Returns:
        a `huggingface_hub.DatasetCard` whose `configs` metadata exposes `summary.csv` and the per-run files.
    """
    runs = _scan_runs(results_dir)
    rows = read_summary(summary_csv)
    models = sorted({r["model"] for r in runs})
    card_data = DatasetCardData(
        pretty_name="MLM vs CLM encoder study: fine-tuning results", language="en",
        tags=["mlm-vs-clm", "evaluation", f"arxiv:{ARXIV_ID}"],
        configs=[{"config_name": "summary", "data_files": "summary.csv"},
                 {"config_name": "runs", "data_files": f"{Path(results_dir).name}/*/*/*.json"}])
    return DatasetCard.from_template(
        card_data, template_path=str(RESULTS_TEMPLATE), repo_id=repo_id or "<your-org>/<results>",
        results_folder=Path(results_dir).name, n_runs=len(runs), n_models=len(models),
        n_tasks=len({r["task"] for r in runs}),
        n_diverged=sum(r["status"] == "diverged" for r in runs), models=models,
        summary_rows=[{"model": r["model"], **row} for r, row in zip(rows, _table_rows(rows))])


GENERATED_MARKER = "<!-- written by model_cards.generate: regenerate it rather than edit it -->"


def write_card(card, path: Path, force: bool = False) -> Path:
    """Write a card atomically, refusing to replace a file that this tool did not write (unless `force`)."""
    path = Path(path)
    if path.exists() and not force and GENERATED_MARKER not in path.read_text(encoding="utf-8", errors="replace"):
        raise ValueError(f"{path} exists and was not written by model_cards.generate; pass --force to replace it "
                         "or --output another file")
    return artifacts.write_text_atomic(path, f"{card}\n\n{GENERATED_MARKER}\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="checkpoint folder holding run_info.json")
    parser.add_argument("--summary", help="evaluation summary.csv (fills the evaluation table)")
    parser.add_argument("--results", help="per-run results folder: build the results dataset card instead")
    parser.add_argument("--repo-id", help="Hub repo id shown in the usage snippet")
    parser.add_argument("--output", default=None,
                        help="where to write the card (default: CHECKPOINT/README.md; with --results: README.md "
                             "beside --summary)")
    parser.add_argument("--force", action="store_true", help="replace an --output file this tool did not write")
    args = parser.parse_args(argv)
    if (args.checkpoint is None) == (args.results is None):
        parser.error("give either a CHECKPOINT folder or --results DIR (with --summary)")
    if args.results and not args.summary:
        parser.error("--results needs --summary summary.csv")
    try:
        if args.results:
            card = build_results_card(args.results, args.summary, args.repo_id)
            output = Path(args.output or Path(args.summary).parent / "README.md")
        else:
            card = build_model_card(args.checkpoint, args.summary, args.repo_id)
            output = Path(args.output or Path(args.checkpoint) / "README.md")
        write_card(card, output, args.force)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
