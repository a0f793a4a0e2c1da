"""Model cards, built with huggingface_hub's `ModelCard`, and the command that writes both cards (the results
dataset card is `model_cards.results_card`).

    # -> CHECKPOINT_DIR/README.md
    python -m model_cards.generate CHECKPOINT_DIR [--summary report/summary.csv --results results/]
    # -> report/README.md
    python -m model_cards.generate --results results/ --summary report/summary.csv

A card is filled from what the run recorded (`run_info.json`, `config.json`), the evaluation summary and the per-run
results; the Jinja template holds no logic, and docs/hub.md says what a card shows. A card never replaces a file this
tool did not write (`--force` does).
"""

import argparse
import json
import math
import re
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from core import artifacts, cli, model_folders, run_folders
from core.names import PAPER_SCALE, ModelName, parse_name, run_scale, scaled_name, split_step, step_name, try_parse_name
from core.paper import PAPER_ARXIV_ID
from core.paths import is_hub_id, missing_path
from evaluation.resolve import checkpoint_name
from model_cards import public, results_card, summary
from model_cards.public import PLACEHOLDER_ORG, without_local_paths
from model_cards.results_dataset import OFFLINE_DATA

TEMPLATE = Path(__file__).with_name("template.md")
# the repository's LICENSE; EuroBERT, whose architecture and tokenizer the study uses, is Apache-2.0
LICENSE = "apache-2.0"

# The card's hyperparameter tables: the settings that decide the weights (run_info's `run_config`), grouped. Keys
# not listed land in "Other", so nothing recorded is hidden; run_info.json keeps the complete TrainingArguments.
HYPERPARAMETER_GROUPS = (
    ("Model", ("architecture", "model_name_or_path", "tokenizer_name_or_path", "toy_vocab_size")),
    (
        "Data",
        (
            "corpus_source",
            "corpus_name",
            "max_docs",
            "block_size",
            "epochs",
            "data_seed",
            "data_start_block",
            "global_batch_size",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "world_size",
        ),
    ),
    (
        "Objective",
        (
            "objective",
            "mlm_probability",
            "mask_replace_prob",
            "random_replace_prob",
            "masking_seed",
            "switch_step",
            "reset_optimizer_at_switch",
        ),
    ),
    (
        "Optimisation",
        (
            "optim",
            "learning_rate",
            "lr_scheduler_type",
            "lr_scheduler_kwargs",
            "warmup_steps",
            "max_steps",
            "weight_decay",
            "weight_decay_scope",
            "adam_beta1",
            "adam_beta2",
            "adam_epsilon",
            "max_grad_norm",
            "bf16",
            "fp16",
            "seed",
        ),
    ),
    ("Budgets and checkpoints", ("decay_branches", "branch_from", "intermediate_steps")),
    ("Continued pretraining", ("keep_optimizer_state",)),
)
SHOWN_ELSEWHERE = {"format", "data", "scale"}  # the Training table shows them
MLM_ONLY = {"mlm_probability", "mask_replace_prob", "random_replace_prob", "masking_seed"}
GENERATED_MARKER = "<!-- written by model_cards.generate: regenerate it rather than edit it -->"


# ---------------------------------------------------------------------------------------------------- names
def _objective_words(objective: str, ratio: int | None) -> str:
    return (
        "causal language modeling (CLM, next-token prediction)"
        if objective == "clm"
        else f"masked language modeling (MLM) with a {ratio}% masking ratio"
    )


def name_lines(name: str, step: int | None = None) -> list[str]:
    """One line per part of the name, for the card's "What the name means"; `step`, an intermediate checkpoint's own
    step, is named where the scale divides the paper's down."""
    p = parse_name(name)
    lines = (
        [
            f"`{p.scale}`: trained at the study's `{p.scale}` scale, not the paper's: the paper's recipe named by "
            "the rest of the name, with its steps divided down and a small architecture (the Training table gives "
            "what this checkpoint really has)."
        ]
        if p.scale
        else []
    )
    lines.append(
        f"`{p.size}`: model size of the paper's run, about {p.size.upper()} parameters (the paper's size table)."
    )
    if p.kind == "single":
        lines.append(f"`{p.objective}{p.ratio or ''}`: {_objective_words(p.objective, p.ratio)} for the whole run.")
    elif p.kind == "pfs":
        lines.append(f"`clm-{p.switch_step // 1000}k`: first phase, CLM for the first {p.switch_step:,} steps.")
        lines.append(
            f"`mlm{p.ratio}`: second phase, {_objective_words('mlm', p.ratio)} for the remaining "
            f"{p.total_steps - p.switch_step:,} steps, in the same run (PFS: optimizer state, "
            "learning-rate schedule and data position carry over)."
        )
    else:
        base_ratio = int(p.base[3:]) if p.base != "clm" else None
        lines.append(
            f"`{p.base}-dec{p.base_steps // 1000}k`: continued pretraining (CPT) starts from the "
            f"decayed {p.base_steps:,}-step checkpoint `{scaled_name(p.base_run, p.scale)}` "
            f"({_objective_words(p.base[:3], base_ratio)})."
        )
        lines.append(
            f"`mlm{p.ratio}`: CPT objective, {_objective_words('mlm', p.ratio)} for "
            f"{p.total_steps - p.base_steps:,} more steps."
        )
    lines.append(
        f"`{p.total_steps // 1000}k`: {p.total_steps:,} training steps in all (the paper's budget"
        f"{', divided down at this scale' if p.scale else ''})."
    )
    if p.paper_step is not None:
        lines.append(f"`{p.paper_step}`: intermediate checkpoint {_saved_at(p, step)} of `{p.run_name}`.")
    return lines


def _saved_at(p: ModelName, step: int | None) -> str:
    """ "saved at step 1,000", or at a scale "at the paper's step 1,000, saved at its own step 250"."""
    if p.scale and step is not None and step != p.paper_step:
        return f"at the paper's step {p.paper_step:,}, saved at its own step {step:,} at this scale,"
    return f"saved at step {p.paper_step:,}"


def describe_name(name: str, step: int | None = None) -> str:
    """One paragraph explaining a name of the study's grammar ("610m-clm-10k-mlm40-42k: a 610m encoder trained for
    ..."); `step` as in `name_lines`. Raises ValueError outside the grammar."""
    p = parse_name(name)
    head = (
        f"{name}: at the `{p.scale}` scale, the recipe of a {p.size} encoder"
        if p.scale
        else f"{name}: a {p.size} encoder"
    )
    if p.kind == "single":
        body = f"trained for {p.total_steps:,} steps with {_objective_words(p.objective, p.ratio)}"
    elif p.kind == "pfs":
        body = (
            f"trained for {p.total_steps:,} steps in two phases (PFS): CLM for the first {p.switch_step:,} steps, "
            f"then {_objective_words('mlm', p.ratio)} for the remaining {p.total_steps - p.switch_step:,}"
        )
    else:
        body = (
            f"made by continued pretraining (CPT) of the decayed {p.base_steps:,}-step "
            f"{p.base.upper()} checkpoint with {_objective_words('mlm', p.ratio)} for "
            f"{p.total_steps - p.base_steps:,} more steps ({p.total_steps:,} in all)"
        )
    if p.paper_step is not None:
        where = (
            f"at step {p.paper_step:,}"
            if not (p.scale and step is not None and step != p.paper_step)
            else f"at the paper's step {p.paper_step:,} (its own step {step:,} at this scale)"
        )
        return f"{head}, intermediate checkpoint {where} of the run {p.run_name}, which is {body}."
    return f"{head} {body}."


def describe_run(name: str, info: dict, step: int | None) -> str:
    """Explain a checkpoint whose name is outside the grammar, from its `run_info.json`."""
    size = f"a `{info['size']}`-size encoder" if info["size"] else "an encoder"
    ratio = round(info["mlm_probability"] * 100) if info["objective"] == "mlm" else None
    steps = info["run_config"].get("training_args", {}).get("max_steps") if step is not None else None
    steps = steps or info["steps"]
    if info["cpt_base"] is not None:
        body = (
            f"made by {_cpt_words(info)} of `{info['cpt_base']}` with {_objective_words('mlm', ratio)} "
            f"for {steps:,} steps"
        )
    elif info["switch_step"] is not None:
        body = (
            f"trained for {steps:,} steps in two phases (PFS): CLM for the first {info['switch_step']:,} "
            f"steps, then {_objective_words('mlm', ratio)}"
        )
    else:
        body = f"trained for {steps:,} steps with {_objective_words(info['objective'], ratio)}"
    if step is not None:
        return f"{name}: {size}, intermediate checkpoint at step {step:,} of its run, which is {body}."
    return f"{name}: {size} {body}."


def _cpt_words(info: dict) -> str:
    """How a CPT run trained, in words (LoRA CPT names its adapters, merged into the weights)."""
    settings = info["run_config"].get("run_settings", {})
    if not settings.get("lora"):
        return "continued pretraining (CPT)"
    trained = " and the embeddings and LM head fully" if settings.get("lora_train_embeddings") else ""
    return (
        f"LoRA continued pretraining (CPT with LoRA adapters of rank {settings.get('lora_rank')}, alpha "
        f"{settings.get('lora_alpha'):g}, on the frozen base{trained}; the adapters are merged into these weights)"
    )


def _contradictions(p: ModelName, info: dict) -> list[str]:
    """Where run_info.json tells another story than the name (steps may differ: toy scales keep paper names)."""
    problems = []
    if info["objective"] != p.objective:
        problems.append(f"objective {info['objective']!r} (name says {p.objective!r})")
    if p.ratio is not None and not math.isclose(info["mlm_probability"] or 0, p.ratio / 100):
        problems.append(f"mlm_probability {info['mlm_probability']} (name says {p.ratio}%)")
    if (info["switch_step"] is not None) != (p.kind == "pfs"):
        problems.append(f"switch_step {info['switch_step']} (name kind {p.kind})")
    if (info["cpt_base"] is not None) != (p.kind == "cpt"):
        problems.append(f"cpt_base {info['cpt_base']} (name kind {p.kind})")
    elif p.kind == "cpt" and info["cpt_base"] != p.base_run:
        problems.append(f"CPT base {info['cpt_base']!r} (name says {p.base_run!r})")
    return problems


def resolve_name(checkpoint_dir: Path, info: dict, repo_id: str | None) -> tuple[str, ModelName | None, str | None]:
    """(card name, its parsed grammar or None, a note when run_info's name belongs to another run). A study name that
    run_info contradicts is replaced by the repo's name (else the run folder's), which must not itself be a contradicted
    study name."""
    recorded = checkpoint_name(checkpoint_dir)
    parsed = try_parse_name(recorded)
    if parsed is None or not (problems := _contradictions(parsed, info)):
        return recorded, parsed, None
    step = run_folders.intermediate_step(checkpoint_dir)
    run_folder = checkpoint_dir.parent.parent if step is not None else checkpoint_dir
    own = repo_id.split("/")[-1] if repo_id else run_folder.name
    name = own if split_step(own)[1] == step else step_name(own, step)
    own_parsed = try_parse_name(name)
    if own_parsed is not None and (own_problems := _contradictions(own_parsed, info)):
        raise ValueError(
            f"{name} would name this checkpoint, but its run_info.json contradicts that study name: "
            f"{'; '.join(own_problems)}; publish it under a name that says what it is (--repo_id)"
        )
    note = (
        f"`run_info.json` calls this run `{recorded}`, the study's name for a run it is not "
        f"({'; '.join(problems)}): it was trained with that recipe's settings otherwise. This card names it "
        f"`{name}` and describes what was trained."
    )
    return name, own_parsed, note


def load_run_info(checkpoint_dir: Path) -> dict:
    """Read and check `run_info.json` of a checkpoint folder."""
    if not Path(checkpoint_dir).is_dir():
        raise missing_path(checkpoint_dir, "CHECKPOINT")
    if (info := run_folders.read_run_info(checkpoint_dir)) is None:
        path = Path(checkpoint_dir) / run_folders.RUN_INFO_NAME
        raise FileNotFoundError(f"{path} not found: pass a checkpoint folder written by recipes/pretrain.py")
    return info


# ------------------------------------------------------------------------------------------------- the run
def _settings(info: dict) -> dict:
    """run_config's settings, flat: run settings and the TrainingArguments that decide the weights."""
    flat = {}
    for key, value in info["run_config"].items():
        if key not in SHOWN_ELSEWHERE:
            flat.update(value if isinstance(value, dict) else {key: value})
    return {k: v for k, v in flat.items() if k not in SHOWN_ELSEWHERE}


def _value(value) -> str:
    return f"`{value if isinstance(value, str) else json.dumps(value)}`"


def hyperparameter_groups(info: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """The card's hyperparameter tables, [(group, [(setting, value)])]: each setting once, no local paths, none that
    does not apply to this run."""
    settings = without_local_paths(_settings(info))
    skip = {k for k, v in settings.items() if v is None or v == []}
    if settings.get("switch_step") is None:
        skip |= {"reset_optimizer_at_switch", *(MLM_ONLY if settings.get("objective") == "clm" else ())}
    if settings.get("tokenizer_name_or_path") or settings.get("model_name_or_path"):  # an existing tokenizer
        skip.add("toy_vocab_size")
    groups, placed = [], set()
    for group, keys in (*HYPERPARAMETER_GROUPS, ("Other", tuple(settings))):
        rows = [(k, _value(settings[k])) for k in keys if k in settings and k not in skip | placed]
        placed.update(k for k, _ in rows)
        if group == "Data" and {"per_device_train_batch_size", "block_size"} <= set(settings):
            blocks = (
                settings["per_device_train_batch_size"]
                * settings.get("gradient_accumulation_steps", 1)
                * settings.get("world_size", 1)
            )
            rows.append(
                (
                    "tokens per optimizer step",
                    f"{blocks} blocks x {settings['block_size']} tokens = {blocks * settings['block_size']:,}",
                )
            )
        if rows:
            groups.append((group, rows))
    return groups


def parameter_count(checkpoint_dir: Path) -> tuple[int, int]:
    """(parameters without the LM head, with it), from the safetensors headers."""
    from safetensors import safe_open

    total = head = 0
    for path in sorted(Path(checkpoint_dir).glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            for key in f.keys():
                n = math.prod(f.get_slice(key).get_shape())
                total += n
                head += n if key.startswith("lm_head.") else 0
    return total - head, total


def _millions(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,}"


def pretraining_data(info: dict) -> tuple[list[str], str]:
    """(Hub ids of the real pretraining corpora, for `datasets`; what the run read, in words)."""
    hub_ids, parts = [], []
    for entry in [e.strip() for e in str(info["data"].get("source") or "").split(",") if e.strip()]:
        hub_id, _, config = entry.partition(":")
        if entry == "bundle":
            bundle = OFFLINE_DATA["pretraining_bundle"]
            parts.append(f"{bundle['name']} ({bundle['license']}), a stand-in for {bundle['stands_in_for']}")
        elif is_hub_id(hub_id):
            config = config or info["run_config"].get("run_settings", {}).get("corpus_name")
            hub_ids.append(hub_id)
            parts.append(f"`{hub_id}`" + (f" (config `{config}`)" if config else ""))
        else:
            parts.append(f"a local corpus (`{without_local_paths(entry)}`)")
    return hub_ids, ", then ".join(parts) or "a corpus run_info.json does not name"


def _base_model(info: dict, repo_id: str | None, override: str | None) -> tuple[str | None, str | None]:
    """(Hub id for the card's `base_model`, a sentence naming the starting point) of a CPT run or decay branch: a study
    base is `<org of repo_id>/<base name>` at this run's scale."""
    branch_from = info["run_config"].get("run_settings", {}).get("branch_from")
    if info["cpt_base"] is not None:
        base, role = info["cpt_base"], f"{_cpt_words(info)} started from"
    elif branch_from:
        base, role = Path(branch_from).name, "this decay branch started from the stable phase of"
    else:
        if override:
            raise ValueError(
                f"--base_model {override}: run_info.json records neither a CPT base nor a decay branch "
                "(a run from scratch has no base model)"
            )
        return None, None
    hub_id, base = override, scaled_name(base, info["scale"])  # a study base is published under its shown name
    base_parsed = try_parse_name(base)
    if hub_id is None and repo_id and base_parsed is not None and base_parsed.paper_step is None:
        hub_id = f"{repo_id.split('/')[0]}/{base}"
    where = (
        f"[`{hub_id}`](https://huggingface.co/{hub_id})"
        if hub_id
        else f"`{base}` (not published under a known Hub id; `--base_model ORG/NAME` names the one it has)"
    )
    return hub_id, f"{role} {where}"


def _base_source(info: dict) -> str | None:
    """What a CPT run's base weights were made from, in words (run_info's `base_source`: a fetched real model's
    `real_model.json`, carried by `modeling_eurobert.convert`); None when not recorded."""
    if not (source := info.get("base_source")):  # absent from run_info.json written before it was recorded
        return None
    text = f"{source['source']} (package `{source['package']}=={source['version']}`, licence {source['licence']})"
    if not source["member"].endswith(".gguf"):
        return text
    bits = re.search(r"\.I?Q(\d+)_\w+\.gguf$", source["member"])
    return (
        f"{text}: the base was a {bits[1] + '-bit' if bits else 'quantised'} GGUF release, dequantised, so its "
        "weights are not the published full-precision ones"
    )


def _is_causal(checkpoint_dir: Path) -> bool:
    """Whether `AutoModel` and the task heads attend causally by default (config.json's `is_causal`)."""
    return model_folders.is_causal_checkpoint(artifacts.read_json(Path(checkpoint_dir) / "config.json", "model config"))


def _eval_results(rows: list[dict]) -> list[EvalResult]:
    """model-index entries: the test mean at the best LR, with its 95% CI and seed count as metric arguments."""
    results = []
    for r in rows:
        mean = summary.number(r["mean"])
        if not summary.above_baseline(r):  # every seed diverged, no better than learning nothing, or no baseline
            continue
        task_type, task_name = summary.FAMILY_TASK_TYPES[r["family"].upper()]
        data, scored = r["data"], r.get("scored") or {}
        subset = f" ({scored['text']})" if scored.get("capped") else ""
        where = {
            "task_type": task_type,
            "task_name": task_name,
            "dataset_type": data["dataset"],
            "dataset_name": r["task"] + (" (stand-in)" if data["stand_in"] else "") + subset,
            "dataset_config": data["config"],
            "dataset_split": data["split"],
            "dataset_revision": data["revision"],
        }
        budget = r["budget"]
        args = {
            "n_seeds": int(r["n_seeds"]),
            "learning_rate": float(r["best_lr"]),
            **({"n_test_instances": scored["n"]} if scored.get("n") else {}),
            "trivial_baseline": round(summary.baseline(r), 4),
            **{f"finetune_{k}": budget[k] for k in ("steps", "epochs", "batch_size") if k in budget},
            **({"train_examples": budget["train_examples"]} if budget.get("train_examples") is not None else {}),
            "reduced_budget": budget["reduced"],
        }
        if ci := summary.confidence_interval(r):
            args = {"ci95_low": round(ci[0], 4), "ci95_high": round(ci[1], 4), **args}
        results.append(
            EvalResult(
                **where, metric_type=r["metric"], metric_name=r["metric"], metric_value=round(mean, 4), metric_args=args
            )
        )
        entity = summary.number(r.get("entity_f1"))
        if r["family"].upper() == "TC" and entity is not None and r["metric"] != "entity_f1":
            results.append(
                EvalResult(
                    **where,
                    metric_type="entity_f1",
                    metric_name="entity_f1",
                    metric_value=round(entity, 4),
                    metric_args={"n_seeds": int(r["n_seeds"])},
                )
            )
    return results


# ---------------------------------------------------------------------------------------------- model card
def _facts(
    info: dict, name: str, parsed: ModelName | None, params: tuple[int, int], data_text: str, base_text: str | None
) -> list[tuple[str, str]]:
    ratio = round(info["mlm_probability"] * 100) if info["objective"] == "mlm" else None
    steps = f"{info['steps']:,}"
    if parsed is not None and info["scale"] != "paper":
        paper = parsed.paper_step or parsed.total_steps - (parsed.base_steps or 0)  # a CPT run trains the extra steps
        steps += f" (the paper's run: {paper:,})"
    facts = [
        ("scale", f"`{info['scale']}`" if info["scale"] else "none (not a study run)"),
        ("parameters", f"{_millions(params[0])} without the LM head ({_millions(params[1])} with it)"),
        ("objective (last phase)", _objective_words(info["objective"], ratio)),
        ("steps trained", steps),
        ("tokens seen", _tokens_text(info)),
    ]
    if info["switch_step"] is not None:
        facts.append(("PFS switch", f"CLM until step {info['switch_step']:,}, then MLM"))
    if base_text:
        facts.append(("starting point", base_text))
    if source_text := _base_source(info):
        facts.append(("base weights", source_text))
    packed = f" (packed blocks fingerprint `{fingerprint}`)" if (fingerprint := info["data"].get("fingerprint")) else ""
    facts += [("pretraining data", data_text + packed), ("code", f"git commit `{info['git_commit']}`")]
    return facts


def _tokens_text(info: dict) -> str:
    """The tokens a checkpoint saw: a CPT run's own, then its base's."""
    own = f"{info['tokens_seen']:,} tokens"
    if not info["cpt_base"]:
        return own
    before = info["tokens_before_cpt"]
    return own + (
        " after a base of unknown pretraining"
        if before is None
        else f" after {before:,} in its base ({before + info['tokens_seen']:,} in all)"
    )


def _disclaimer(info: dict, name: str, parsed: ModelName | None, params: tuple[int, int], data_text: str) -> str:
    """The first thing a card says when the checkpoint is not one of the paper's models."""
    trained = f"{_millions(params[0])} parameters trained on {_tokens_text(info)} ({info['steps']:,} steps)"
    paper = parsed and parsed.unscaled
    if info["scale"] not in (None, PAPER_SCALE):
        claim = (
            f"`{name}` is the paper's `{paper}` reproduced at the `{info['scale']}` scale, not a claim about "
            "this checkpoint's size or budget. "
            if parsed
            else ""
        )
        return (
            f"> **Toy-scale reproduction (`{info['scale']}` scale), not a paper model: {trained}.** {claim}"
            f"Pretraining data: {data_text}. Its scores are not comparable with the paper's."
        )
    if info["scale"] is None and parsed is not None:
        return (
            f"> **Not a study run: {trained}.** `{paper}` names a run of the study, but this checkpoint was "
            f"trained outside the study's scales, on {data_text}; `run_info.json` records its settings."
        )
    return ""


def _usage(name: str, repo_id: str | None, revision: str | None, causal: bool, native: bool = False) -> dict:
    repo = repo_id or f"<{PLACEHOLDER_ORG}>/{name}"
    usage = {
        "repo_id": repo,
        "revision_arg": f', revision="{revision}"' if revision else "",
        "load_kwargs": ", trust_remote_code=True" + (", is_causal=False" if causal else ""),
        "usage_notes": [],
        "tokenizer_kwargs": ", trust_remote_code=True",  # config.json's model_type is ours: no prompt with it
        "usage_intro": "The modeling code ships with the weights, so loading needs `trust_remote_code=True` "
        "(the tokenizer too: transformers reads config.json first, and asks otherwise):",
    }
    if native:
        usage.update(
            load_kwargs="",
            tokenizer_kwargs="",
            usage_intro=(
                "Plain transformers loads it as its own EuroBERT (`EuroBertModel`, `EuroBertForMaskedLM`, sequence and "
                "token classification), bidirectional as the study fine-tunes, with no flag; `trust_remote_code=True` "
                "gives this project's classes instead (plus the causal LM and QA heads; "
                + ("for this CLM checkpoint bidirectional too, see below):" if causal else "same outputs):")
            ),
        )
        usage["usage_notes"] = [
            (
                "`SentenceTransformer(repo_id)` gives the mean-pooled embedding with the study's "
                '"Query: " / "Document: " prompts (`encode_query`, `encode_document`).'
            ),
            (
                "Plain `AutoModel` is the encoder without the LM head this checkpoint also holds, so transformers' "
                "LOAD REPORT lists `lm_head.weight` as UNEXPECTED, as for any BERT: expected, every encoder weight is "
                "loaded (`AutoModelForMaskedLM` loads the head too; with `trust_remote_code=True` nothing is reported)."
            ),
        ]
        if causal:
            usage["usage_notes"].append(
                'This is a CLM checkpoint (`config.json`: `"pretraining_attention": "causal"`): `AutoModel` '
                "and the task heads attend bidirectionally with or without `trust_remote_code=True` (one checkpoint, "
                "one default), as the study fine-tunes it; its causal pretraining attention is "
                "`AutoModelForCausalLM` with `trust_remote_code=True`, or `is_causal=True` with it."
            )
    elif causal:
        usage["usage_notes"] = [
            (
                "This is a CLM checkpoint: its `config.json` sets `is_causal: true`, so `AutoModel`, "
                "`AutoModelForCausalLM` and the task heads (`AutoModelForSequenceClassification`, "
                "`AutoModelForTokenClassification`, `AutoModelForQuestionAnswering`) attend causally unless told "
                "otherwise, while `AutoModelForMaskedLM` always attends bidirectionally."
            ),
            (
                "The study fine-tunes and evaluates CLM checkpoints as encoders, bidirectionally: that is what this "
                "project's `python -m evaluation.run` does by default (`--attention bidirectional`); the paper's "
                "fine-tuning heads are not public, so its exact choice is not verified (`docs/protocol.md`). Pass "
                "`is_causal=False` to `from_pretrained`, as above, to load any head the same way."
            ),
            (
                "To get an encoder that loads with plain transformers and no remote code, export it bidirectionally to "
                "transformers' native EuroBERT classes with this project's `python -m modeling_eurobert.export_native "
                "--bidirectional CHECKPOINT_DIR OUTPUT_DIR`."
            ),
        ]
    else:
        usage["usage_notes"] = [
            (
                "The CLM and MLM models share every parameter name and differ only in the attention mask, so a CLM "
                "checkpoint loads into the masked-LM class unchanged: that is how the study turns decoders into "
                "encoders."
            )
        ]
    if revision:
        usage["usage_notes"].append(
            f"This intermediate checkpoint lives on the `{revision}` branch; `main` holds the final one."
        )
    return usage


def _limitations(info: dict) -> list[str]:
    base = _base_source(info)
    toy = [
        "Evaluation used the offline data bundle, with stand-ins where the paper's data is not in it (marked in the "
        "evaluation table and the results dataset card), and toy fine-tuning budgets."
    ]
    lines = [f"Base weights: {base}."] if base and "GGUF" in base else []
    return [*lines, *(toy if info["scale"] not in (None, "paper") else [])] + [
        "English only; a pretrained backbone, not fine-tuned for any task: fine-tune it or pool its hidden states "
        "before use.",
        "Some training settings of the original study were inferred from its code and checkpoint names (marked in the "
        "project's `docs/protocol.md`); `run_info.json` records what this run used.",
    ]


def build_model_card(
    checkpoint_dir,
    summary_csv=None,
    repo_id: str | None = None,
    revision: str | None = None,
    results_dir=None,
    base_model: str | None = None,
) -> ModelCard:
    """The model card of one checkpoint folder, with `model-index` metadata.

    Args:
        checkpoint_dir: a `save_pretrained` folder holding `run_info.json` (final, or `<run>/intermediate/step-<N>`).
        summary_csv: the evaluation `summary.csv`; rows filed under this checkpoint's name fill the table.
        repo_id: Hub repo id (usage snippet, name of a run that borrowed a recipe's name, org of a study base).
        revision: Hub branch of this checkpoint (intermediate checkpoints live on `step-<N>` branches).
        results_dir: the per-run results behind `summary_csv` (required with it).
        base_model: Hub id of a CPT run's or decay branch's start (default: `<org>/<base name>` for a study base).
    """
    checkpoint_dir = Path(checkpoint_dir)
    model_folders.check_loadable(checkpoint_dir)
    info = load_run_info(checkpoint_dir)
    name, parsed, borrowed = resolve_name(checkpoint_dir, info, repo_id)
    if parsed is not None and parsed.scale is None:  # a study name trained at another scale says it, everywhere
        name = scaled_name(name, run_scale(info, parsed))
    parsed = try_parse_name(name)
    rows = (
        summary.evaluation_rows(checkpoint_dir, checkpoint_name(checkpoint_dir), summary_csv, results_dir, name)
        if summary_csv
        else []
    )
    if rows:
        summary.check_summary(rows, results_dir, summary_csv)
    params, causal = parameter_count(checkpoint_dir), _is_causal(checkpoint_dir)
    # transformers' own EuroBERT loads it natively (`modeling_eurobert.export_native.make_plain_loadable`)
    native = artifacts.read_json(checkpoint_dir / "config.json", "model config").get("model_type") == "eurobert"
    hub_ids, data_text = pretraining_data(info)
    base_id, base_text = _base_model(info, repo_id, base_model)
    step = run_folders.intermediate_step(checkpoint_dir)
    description = (describe_name(name, step) if parsed else describe_run(name, info, step)) + (
        f" {borrowed}" if borrowed else ""
    )
    card_data = ModelCardData(
        library_name="transformers",
        model_name=name,
        language="en",
        license=LICENSE,
        pipeline_tag="fill-mask" if info["objective"] == "mlm" and not causal else "feature-extraction",
        tags=["eurobert", "encoder", "mlm-vs-clm", info["objective"], f"arxiv:{PAPER_ARXIV_ID}"],
        datasets=hub_ids or None,
        base_model=base_id,
        eval_results=_eval_results(rows) or None,
    )
    if rows:
        eval_intro = (
            "Fine-tuning results (the paper's protocol): for each task the learning rate is chosen by mean "
            "validation score over seeds; the table gives the test mean with a 95% confidence interval "
            "over seeds (clipped to [0, 1]), the standard deviation and the number of diverged runs, and "
            "names the data each test score comes from. Beside each score: the task's trivial baseline (what a model "
            "scores without learning the task: the majority class, no entity, the passage's first words, a random "
            "ranking) and the fine-tuning budget it was reached with; a mean not above its baseline is marked, and "
            "the `model-index` metadata publishes only scores above a known baseline."
        )
    elif summary_csv:
        eval_intro = f"`{Path(summary_csv).name}` holds no results for `{name}`: this checkpoint was not evaluated."
    else:
        eval_intro = "No evaluation summary was given when this card was generated."
    relation = (
        "This checkpoint is one of the models of the study"
        if parsed and not borrowed
        else "This checkpoint was made with the recipes of a reimplementation of the study"
    )
    return ModelCard.from_template(
        card_data,
        template_path=str(TEMPLATE),
        name=name,
        relation=relation,
        disclaimer=_disclaimer(info, name, parsed, params, data_text),
        summary=description,
        name_lines=name_lines(name, step) if parsed else [],
        facts=_facts(info, name, parsed, params, data_text, base_text),
        hyperparameters=hyperparameter_groups(info),
        eval_intro=eval_intro,
        eval_rows=summary.table_rows(rows),
        branches=[
            (p.name, run_folders.intermediate_step(p))  # Hub branches, as `model_cards.push` makes them
            for p in run_folders.intermediate_checkpoints(checkpoint_dir)
        ],
        **_usage(name, repo_id, revision, causal, native),
        limitations=_limitations(info),
        versions=sorted(info["versions"].items()),
    )


def write_card(card, path: Path, force: bool = False) -> Path:
    """Write a card atomically, refusing to replace a file this tool did not write (unless `force`)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--output {path} is a directory; pass the card's file path (e.g. {path / 'README.md'})")
    artifacts.check_output_dir(path.parent, f"--output {path}: its folder")
    if path.exists() and not force and GENERATED_MARKER not in path.read_text(encoding="utf-8", errors="replace"):
        raise ValueError(
            f"{path} exists and was not written by model_cards.generate; pass --force to replace it "
            "or --output another file"
        )
    return artifacts.write_text_atomic(path, f"{card}\n\n{GENERATED_MARKER}\n")


@cli.exit_on_write_failure
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="checkpoint folder holding run_info.json")
    parser.add_argument("--summary", help="evaluation summary.csv (fills the evaluation table; needs --results)")
    parser.add_argument(
        "--results",
        help="per-run results folder: with a CHECKPOINT, the runs behind --summary; "
        "alone, build the results dataset card",
    )
    parser.add_argument("--repo_id", help="Hub repo id ORG/NAME (usage snippet; ORG of a study base model)")
    parser.add_argument(
        "--base_model",
        help="Hub id of the model a CPT run or decay branch started from (default for a study base: ORG/<base name>)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the card (default: CHECKPOINT/README.md; with --results alone: "
        "README.md beside --summary)",
    )
    parser.add_argument("--force", action="store_true", help="replace an --output file this tool did not write")
    args = parser.parse_args(argv)
    with cli.bad_input_exits():
        for repo_id in (args.repo_id, args.base_model):  # `--base_model ''` would be written into the card
            if repo_id is not None:
                public.check_repo_id(repo_id)
        if args.checkpoint is None and args.results is None:
            raise ValueError("give a CHECKPOINT folder, or --results DIR with --summary for the results dataset card")
        if args.checkpoint is None and args.base_model:
            raise ValueError("--base_model describes a checkpoint: give its CHECKPOINT folder")
        if (args.summary is None) != (args.results is None):
            raise ValueError("--summary and --results go together: the summary's statistics and the runs behind them")
        if args.checkpoint is None:
            card = results_card.build_results_card(args.results, args.summary, args.repo_id)
            output = Path(args.output or Path(args.summary).parent / "README.md")
        else:
            card = build_model_card(
                args.checkpoint, args.summary, args.repo_id, results_dir=args.results, base_model=args.base_model
            )
            output = Path(args.output or Path(args.checkpoint) / "README.md")
        write_card(card, output, args.force)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
