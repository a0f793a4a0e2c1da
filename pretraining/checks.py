"""Checks before anything is written to `output_dir`: contradictory settings, missing paths, a tokenizer the base
model's embeddings do not mean, a corpus too small for the run; where training starts, never mixing runs, data or
tokenizers nor writing over what this recipe did not make. They read only; bad input raises one `ValueError` /
`FileNotFoundError` line naming the fix.
"""

import json
import os
import shlex
import sys
import zipfile
from pathlib import Path

from transformers import TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from core import artifacts, model_folders, run_folders
from core.names import scaled_name
from core.run_folders import RUN_CONFIG_NAME
from pretraining import data
from pretraining.preflight import check_paths
from pretraining.provenance import RUN_CONFIG_FORMAT, resolved_config
from pretraining.settings import PretrainArguments, decay_steps, global_batch

_BUDGET_KEYS = {"max_steps", "decay_branches", "branch_from", "intermediate_steps"}  # differ between a run's branches

# How a step's blocks are spread over processes and micro-batches; a resume may change it (`check_batch_layout`).
_LAYOUT_KEYS = ("world_size", "per_device_train_batch_size", "gradient_accumulation_steps")


def check_data_settings(run_args: PretrainArguments) -> None:
    """The settings that decide the packed blocks, checked before any data work."""
    artifacts.check_output_dir(run_args.data_cache_dir, "data_cache_dir")
    if run_args.block_size < 2:
        raise ValueError(f"block_size={run_args.block_size} is out of range; use a value >= 2 (paper: 2048)")


def tensorboard_name(run_args: PretrainArguments, training_args: TrainingArguments) -> str:
    """The run's TensorBoard folder under `<output_dir>/runs/`: its `run_name` (default: the output_dir's name) at its
    `scale` (`core.names.scaled_name`: mini-610m-clm-42k). Refuses a run_name that is a path (it would log outside
    output_dir) and a scale a name cannot carry (`--scale "Bad Scale"`)."""
    name = training_args.run_name or Path(training_args.output_dir).name
    if training_args.run_name and (Path(name).name != name or name in (".", "..") or "\\" in name):
        raise ValueError(
            f"run_name={name!r} names the TensorBoard folder <output_dir>/runs/<run_name>: give a plain "
            "name, without '/' or '..' (default: the output_dir's name)"
        )
    try:
        return scaled_name(name, run_args.scale)
    except ValueError as error:
        raise ValueError(f"scale / run_name (the TensorBoard folder): {error}") from None


def check_tensorboard_dir(training_args: TrainingArguments) -> None:
    """TENSORBOARD_LOGGING_DIR (where transformers' TensorBoard callback logs when it is set) can be a folder: a plain
    file there would otherwise fail in the middle of the trainer's setup, after the run started."""
    logging_dir = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if not logging_dir or "tensorboard" not in (training_args.report_to or []):
        return
    try:
        artifacts.check_output_dir(logging_dir, "TENSORBOARD_LOGGING_DIR")
    except ValueError as error:
        raise ValueError(
            f"{error} (or unset TENSORBOARD_LOGGING_DIR to log under output_dir/runs, or pass --report_to none)"
        ) from None


def check_run_settings(run_args: PretrainArguments, training_args: TrainingArguments) -> None:
    """Refuse contradictory settings before any file is written (one-line errors)."""
    artifacts.check_output_dir(training_args.output_dir, "output_dir")
    tensorboard_name(run_args, training_args)
    check_tensorboard_dir(training_args)
    check_data_settings(run_args)
    total = training_args.max_steps
    if total is None or total <= 0:
        raise ValueError("set max_steps > 0: budgets are counted in optimizer steps (paper: 42000)")
    for name, value, low in (
        ("per_device_train_batch_size", training_args.per_device_train_batch_size, 1),
        ("gradient_accumulation_steps", training_args.gradient_accumulation_steps, 1),
        ("max_grad_norm", training_args.max_grad_norm or 0, 0),
        ("data_start_block", run_args.data_start_block or 0, 0),
    ):
        if value < low:
            raise ValueError(f"{name}={value} is out of range; use a value >= {low:g}")
    for name in ("learning_rate", "save_steps"):
        if not getattr(training_args, name) > 0:
            raise ValueError(f"{name}={getattr(training_args, name)} must be > 0")
    if not isinstance(training_args.lr_scheduler_kwargs, dict):
        raise ValueError(
            f"lr_scheduler_kwargs={training_args.lr_scheduler_kwargs!r} is not a JSON object; write it "
            'as \'{"num_decay_steps": 4200, "decay_type": "1-sqrt"}\''
        )
    if training_args.train_sampling_strategy != "sequential":
        raise ValueError(
            "set train_sampling_strategy: sequential (every objective must read the blocks in the same order)"
        )
    if training_args.remove_unused_columns:
        raise ValueError("set remove_unused_columns: false (the collator needs each block's block_index)")
    if training_args.data_seed is None:
        raise ValueError(
            "set data_seed: it fixes the block order that every objective shares (paper: one seed for all runs)"
        )
    if run_args.compile != "none" and training_args.torch_compile:
        raise ValueError(
            "compile: regional compiles the decoder layers already; drop torch_compile "
            "(it would compile the whole model on top)"
        )
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true" and training_args.device.type == "cpu":
        # accelerate enables FSDP on accelerators only; on the CPU it would quietly train with DDP instead
        raise ValueError(
            "the accelerate config asks for FSDP, which accelerate runs on GPUs only (on the CPU it "
            "would train with DDP instead); launch CPU runs with recipes/accelerate/cpu.yaml"
        )
    if not 0 <= decay_steps(training_args) <= total:
        raise ValueError(
            f"lr_scheduler_kwargs.num_decay_steps={decay_steps(training_args)} does not fit in "
            f"max_steps={total}: the learning rate would decay before it reached its peak; use "
            f"num_decay_steps in [0, max_steps]"
        )
    if run_args.switch_step is not None and not 0 < run_args.switch_step < total:
        raise ValueError(f"switch_step={run_args.switch_step} must be strictly between 0 and max_steps={total}")
    bad = [s for s in run_args.intermediate_steps if not 0 < s <= total]
    if bad:
        raise ValueError(f"intermediate_steps {bad} fall outside (0, max_steps={total}]")
    if run_args.global_batch_size is not None and run_args.global_batch_size != global_batch(training_args):
        raise ValueError(
            f"global_batch_size={run_args.global_batch_size} but devices x per_device_train_batch_size "
            f"x gradient_accumulation_steps = {global_batch(training_args)}; adjust the per-device batch "
            "or accumulation"
        )
    if run_args.decay_branches or run_args.branch_from:
        _check_budgets(run_args, training_args)


def _check_budgets(run_args: PretrainArguments, training_args: TrainingArguments) -> None:
    decay = decay_steps(training_args)
    if decay <= 0:
        raise ValueError(
            "decay branches need lr_scheduler_type: warmup_stable_decay with lr_scheduler_kwargs.num_decay_steps > 0"
        )
    bad = [b for b in run_args.decay_branches if not training_args.warmup_steps + decay < b <= training_args.max_steps]
    if bad:
        raise ValueError(f"decay_branches {bad} must lie in (warmup + decay, max_steps={training_args.max_steps}]")
    if run_args.decay_branches and training_args.save_only_model:
        raise ValueError(
            "save_only_model would save the decay-branch checkpoints without optimizer, scheduler and RNG "
            "state, so no branch could continue them; unset it for a stable run"
        )
    if run_args.decay_branches and training_args.save_total_limit is not None:
        raise ValueError("save_total_limit would delete the decay-branch checkpoints; unset it for a stable run")
    if run_args.branch_from and run_args.decay_branches:
        raise ValueError("a run is either a stable run (decay_branches) or a decay branch (branch_from), not both")


def _config_diff(
    stored: dict, current: dict, ignore: set[str] = frozenset(), groups=("run_settings", "training_args")
) -> list[str]:
    diff = []
    for group in groups:
        for key in sorted(set(stored.get(group, {})) | set(current.get(group, {}))):
            old, new = stored.get(group, {}).get(key), current.get(group, {}).get(key)
            if key not in ignore and old != new:
                diff.append(f"{group + '.' if group == 'data' else ''}{key}: {old!r} -> {new!r}")
    return diff


def _read_run_config(path: Path) -> dict:
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(_unreadable_run_config(path, error)) from None
    if stored.get("format") != RUN_CONFIG_FORMAT:
        raise ValueError(
            f"{path} was written by another version of the recipes (format {stored.get('format', 1)}, "
            f"now {RUN_CONFIG_FORMAT}), whose settings a resume cannot compare: resume it with the commit "
            "that wrote it (run_info.json's git_commit) or use a new output_dir"
        )
    return stored


def _unreadable_run_config(path: Path, error: Exception) -> str:
    """How to continue a run whose `run_config.json` is corrupt without losing its checkpoints: deleting it would make
    the output_dir someone else's (refused), but every saved model's run_info.json holds the same settings."""
    run_dir = path.parent
    copies = []
    for info_path in [
        run_dir / run_folders.RUN_INFO_NAME,
        *run_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*/run_info.json"),
        *run_dir.glob(f"{run_folders.INTERMEDIATE_DIR}/step-*/run_info.json"),
    ]:
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
            if isinstance(info.get("run_config"), dict) and info["run_config"].get("format") == RUN_CONFIG_FORMAT:
                copies.append((int(info.get("steps") or 0), str(info_path)))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    problem = f"{path} is not valid JSON ({error}); it is corrupt or truncated"
    if not copies:
        return (
            f"{problem}, and no run_info.json in {run_dir} holds a copy: move {run_dir} aside or pass a new "
            "--output_dir"
        )
    copy = max(copies)[1]
    return (
        f"{problem}. Do not delete it (without it {run_dir} is refused and its checkpoints are stranded): "
        f'restore it from the copy in {copy} (the same settings) with python -c "import json, sys; '
        "json.dump(json.load(open(sys.argv[1]))['run_config'], open(sys.argv[2], 'w'), indent=2)\" "
        f"{shlex.quote(copy)} {shlex.quote(str(path))}, then rerun; or pass a new --output_dir"
    )


# What a Trainer checkpoint must hold to continue exactly, as (what, any of these names): one process saves optimizer.pt
# and rng_state.pth, several rng_state_<rank>.pth, FSDP optimizer.bin and pytorch_model_fsdp.bin, a LoRA run
# adapter_model.safetensors; `save_only_model: true` saves none of the states (a resume would restart AdamW, warmup).
_RESUME_FILES = (
    (
        "weights",
        ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors", "pytorch_model_fsdp.bin"),
    ),
    ("optimizer state", ("optimizer.pt", "optimizer.bin")),
    ("scheduler state", ("scheduler.pt",)),
    ("RNG state", ("rng_state.pth", "rng_state_0.pth")),
)


def checkpoint_problem(checkpoint: str | os.PathLike) -> str | None:
    """Why `checkpoint` cannot be resumed from exactly, or None: the Trainer's state, this recipe's run_info.json
    (written last: a kill before it leaves an unchecked checkpoint), config.json, and readable weights, optimizer,
    scheduler and RNG state (`_RESUME_FILES`; none of them in a checkpoint saved with `save_only_model`)."""
    path = Path(checkpoint)
    for name in ("trainer_state.json", "config.json"):
        try:
            json.loads((path / name).read_text())
        except FileNotFoundError:
            return f"no {name}"
        except (ValueError, OSError) as error:
            return f"{name} is unreadable ({error})"
    if not (path / run_folders.RUN_INFO_NAME).is_file():
        return f"no {run_folders.RUN_INFO_NAME} (the save was interrupted)"
    for what, names in _RESUME_FILES:
        if not any((path / name).is_file() for name in names):
            return (
                f"no {what} ({' or '.join(names)}): it was saved without it (save_only_model: true?) or the save "
                "was interrupted, and a resume would not continue the run exactly"
            )
    try:
        model_folders.check_weights(path)
    except ValueError as error:
        return str(error)
    for saved in sorted(path.glob("*.pt")) + sorted(path.glob("*.pth")) + sorted(path.glob("*.bin")):
        try:
            zipfile.ZipFile(saved).close()
        except (zipfile.BadZipFile, OSError) as error:
            return f"{saved.name} is unreadable ({error}); it is truncated or corrupt"
    return None


def last_complete_checkpoint(directory: str | os.PathLike) -> str | None:
    """Newest intact `checkpoint-N` under `directory` (`checkpoint_problem`); each newer broken one is named on
    stderr as it is skipped."""
    found = sorted(Path(directory).glob(f"{PREFIX_CHECKPOINT_DIR}-*"), key=lambda p: int(p.name.split("-")[-1]))
    for checkpoint in reversed(found):
        problem = checkpoint_problem(checkpoint)
        if problem is None:
            return str(checkpoint)
        print(f"warning: skipping {checkpoint}: {problem}", file=sys.stderr)
    return None


_MODEL_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def check_sources(run_args: PretrainArguments) -> None:
    """The paths a run reads exist (`preflight.check_paths`), and CPT's blocks fit the base model's positions."""
    check_paths(run_args.model_name_or_path, run_args.tokenizer_name_or_path, run_args.branch_from)
    base = Path(run_args.model_name_or_path or "").expanduser()
    if (
        run_args.model_name_or_path
        and base.exists()
        and not ((base / "config.json").is_file() and any((base / name).is_file() for name in _MODEL_WEIGHTS))
    ):
        raise ValueError(
            f"model_name_or_path {run_args.model_name_or_path} is not a saved model: pass a folder "
            "holding config.json and its weights (model.safetensors), e.g. a run's output_dir or a "
            "converted decoder (python -m modeling_eurobert.convert)"
        )
    if run_args.cpt:  # CPT keeps the base model's positions
        from transformers import AutoConfig

        from modeling_eurobert import EuroBertClmMlmConfig
        from modeling_eurobert.convert import FAMILIES

        base = run_args.model_name_or_path
        config = AutoConfig.from_pretrained(base, trust_remote_code=True)
        if config.model_type in FAMILIES:
            raise ValueError(
                f"{base} is a {config.model_type} decoder, not yet this project's model: convert it "
                f"first with `python -m modeling_eurobert.convert {base} {base.rstrip('/')}-eurobert` "
                "and continue that folder"
            )
        if config.model_type != EuroBertClmMlmConfig.model_type:
            raise ValueError(
                f"{base} is a {config.model_type} model, not a checkpoint of this project: CPT continues "
                "a recipes.pretrain run or a decoder converted with `python -m modeling_eurobert.convert`"
            )
        positions = getattr(config, "max_position_embeddings", None)
        if positions and run_args.block_size > positions:
            raise ValueError(
                f"block_size {run_args.block_size} exceeds the {positions} positions of "
                f"{run_args.model_name_or_path}; pass --block_size {positions} or less"
            )
        check_base_run_info(base)


def check_base_run_info(base: str) -> None:
    """Refuse a CPT base whose run_info.json holds counts no run writes (a hand-edited or damaged file): where CPT's
    data start, and the tokens and parameters its card and the report state, are read from them."""
    info = run_folders.read_run_info(base)
    if info is None:  # a converted decoder: nothing recorded
        return
    parameters = info["parameters"]
    counts = {key: info[key] for key in ("steps", "tokens_seen", "tokens_before_cpt")}
    counts |= (
        {f"parameters.{key}": parameters.get(key) for key in ("total", "input_embedding")}
        if isinstance(parameters, dict)
        else {"parameters": parameters}
    )
    wrong = [
        f"{key} {value!r}"
        for key, value in counts.items()
        if not (type(value) is int and value >= 0) and not (key == "tokens_before_cpt" and value is None)
    ]
    if wrong:
        raise ValueError(
            f"{Path(base) / run_folders.RUN_INFO_NAME} holds {', '.join(wrong)}, where its run writes whole numbers "
            "of 0 or more (parameters: {'total': N, 'input_embedding': N}): CPT would start at the wrong block and "
            "state wrong counts; restore the file its run wrote"
        )


def check_output_dir(run_args: PretrainArguments, training_args: TrainingArguments) -> str | None:
    """The checkpoint training starts from: `--resume_from_checkpoint`, else the newest complete one in `output_dir`
    (auto-resume), else a decay branch's stable checkpoint, else None. ValueError: `output_dir` is an input of the
    run, holds something else or a run with other settings; the resume checkpoint is not a complete one of this run;
    the branch's stable run is missing."""
    output_dir = Path(training_args.output_dir)
    for role, source in (
        ("model_name_or_path", run_args.model_name_or_path),
        ("branch_from", run_args.branch_from),
        ("tokenizer_name_or_path", run_args.tokenizer_name_or_path),
    ):
        if source and Path(source).expanduser().resolve() == output_dir.resolve():
            raise ValueError(
                f"output_dir {output_dir} is also the {role}: training would overwrite its own input; "
                "choose another output_dir"
            )
    current = resolved_config(run_args, training_args)
    config_path = output_dir / RUN_CONFIG_NAME
    if config_path.is_file():
        stored = _read_run_config(config_path)
        diff = _config_diff(stored, current, ignore=set(_LAYOUT_KEYS))
        if diff:
            raise ValueError(f"{output_dir} was made by a different config ({'; '.join(diff)}); use a new output_dir")
        check_batch_layout(stored, current, str(output_dir))
    elif output_dir.is_dir() and any(p.name != run_folders.LOCK_NAME for p in output_dir.iterdir()):
        raise ValueError(
            f"{output_dir} is not empty and has no {RUN_CONFIG_NAME}, so this recipe did not make it; "
            "choose a new or empty output_dir (nothing was written)"
        )
    if training_args.resume_from_checkpoint:
        return check_sharding(_check_resume_checkpoint(training_args.resume_from_checkpoint, current))
    if resume := last_complete_checkpoint(output_dir):
        return check_sharding(resume)
    if run_args.branch_from:
        return _branch_checkpoint(run_args, training_args, current)
    if any(output_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*")):
        print(
            f"warning: no checkpoint in {output_dir} can be resumed exactly: training starts again from step 0",
            file=sys.stderr,
        )
    return None


def check_sharding(checkpoint: str) -> str:
    """Refuse to resume a checkpoint an FSDP run saved (`pytorch_model_fsdp*`, `optimizer.bin`) in a run that is not
    sharded: transformers loads it only under FSDP, and every rerun would stop in its traceback."""
    saved = sorted(
        p.name
        for p in Path(checkpoint).iterdir()
        if p.name.startswith("pytorch_model_fsdp") or p.name == "optimizer.bin"
    )
    if saved and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true":
        raise ValueError(
            f"{checkpoint} was saved by a sharded (FSDP) run ({saved[0]}), which transformers resumes "
            "under FSDP only: resume it with accelerate launch --config_file recipes/accelerate/fsdp.yaml "
            "on GPUs, or pass a new --output_dir"
        )
    return checkpoint


def _check_resume_checkpoint(checkpoint: str, current: dict) -> str:
    """An explicit `--resume_from_checkpoint` must be a complete Trainer checkpoint of a run with these settings."""
    path = Path(checkpoint)
    if problem := checkpoint_problem(path):
        raise ValueError(
            f"--resume_from_checkpoint {checkpoint} is not a complete Trainer checkpoint "
            f"({problem}); pass an intact <output_dir>/checkpoint-N"
        )
    info = run_folders.read_run_info(path)
    if info is not None:
        diff = _config_diff(info.get("run_config", {}), current, ignore=_BUDGET_KEYS | set(_LAYOUT_KEYS))
        if diff:
            raise ValueError(
                f"--resume_from_checkpoint {checkpoint} belongs to a run with other settings "
                f"({'; '.join(diff)}); resume from a checkpoint of this run"
            )
        check_batch_layout(info.get("run_config", {}), current, f"--resume_from_checkpoint {checkpoint}")
    return str(path)


def _branch_checkpoint(run_args: PretrainArguments, training_args: TrainingArguments, current: dict) -> str:
    """The stable checkpoint a decay branch starts from, after checking the stable run used the same settings."""
    start = training_args.max_steps - decay_steps(training_args)
    checkpoint = Path(run_args.branch_from) / f"{PREFIX_CHECKPOINT_DIR}-{start}"
    if not checkpoint.is_dir():
        raise ValueError(
            f"decay branch needs the stable checkpoint {checkpoint}; "
            f"run the stable run with decay_branches including {training_args.max_steps}"
        )
    if problem := checkpoint_problem(checkpoint):
        raise ValueError(
            f"decay branch cannot continue the stable checkpoint {checkpoint} exactly ({problem}); "
            "rerun the stable run to restore it"
        )
    stable = _read_run_config(Path(run_args.branch_from) / RUN_CONFIG_NAME)
    diff = _config_diff(stable, current, ignore=_BUDGET_KEYS | set(_LAYOUT_KEYS))
    if diff:
        raise ValueError(f"decay branch differs from its stable run {run_args.branch_from}: {'; '.join(diff)}")
    check_batch_layout(stable, current, f"the stable run {run_args.branch_from}")
    return str(checkpoint)


def check_batch_layout(stored: dict, current: dict, where: str) -> None:
    """Allow a run (`stored`: its run_config, from `where`) to continue on another number of processes, per-device
    batch or accumulation when its optimizer steps stay the same; refuse otherwise, naming the numbers. The update is
    the same when (1) the global batch G is unchanged: step s reads blocks [s G, (s + 1) G) whatever the layout and
    each block's MLM mask is seeded by its index; and (2) a step's loss is divided by its token count over all
    processes (`average_tokens_across_devices: true`, the default). At most the order of floating-point sums changes
    (2 processes <-> 1 is bit-identical: tests/test_launch.py). The old ranks' RNG states are not needed (no dropout).
    A DDP checkpoint holds the whole optimizer state; an FSDP one on another world size is untested."""
    old = {k: stored.get("training_args", {}).get(k) for k in _LAYOUT_KEYS}
    new = {k: current["training_args"][k] for k in _LAYOUT_KEYS}
    if old == new:
        return

    def layout(v):
        return (
            f"{v['world_size']} processes x {v['per_device_train_batch_size']} per device x "
            f"{v['gradient_accumulation_steps']} accumulation steps"
        )

    old_batch, new_batch = (
        v["world_size"] * v["per_device_train_batch_size"] * v["gradient_accumulation_steps"] for v in (old, new)
    )
    if old_batch != new_batch:
        per_step = new["world_size"] * new["per_device_train_batch_size"]
        hint = (
            f"gradient_accumulation_steps {old_batch // per_step}"
            if old_batch % per_step == 0
            else f"a per-device batch and accumulation whose product with {new['world_size']} processes is {old_batch}"
        )
        raise ValueError(
            f"{where} trained with a global batch of {old_batch} blocks ({layout(old)}) but this launch "
            f"gives {new_batch} ({layout(new)}): its steps would read other blocks; keep {old_batch} "
            f"blocks per step (here: {hint})"
        )
    if (
        not current["training_args"].get("average_tokens_across_devices")
        and max(old["world_size"], new["world_size"]) > 1
    ):
        raise ValueError(
            f"{where} trained with {layout(old)} and this launch uses {layout(new)}, but "
            "average_tokens_across_devices is false: each process divides its loss by its own token "
            "count, so the update depends on the split; resume with the original layout"
        )


def check_data_identity(
    run_args: PretrainArguments, training_args: TrainingArguments, identity: dict, resume: str | None
) -> None:
    """Refuse to continue a run (resume, decay branch, CPT) on other blocks or with another tokenizer: compared with
    the output_dir's `run_config.json`, the stable run's, the resume checkpoint's `run_info.json`, and for CPT the
    base's `run_info.json` unless `data_start_block` says where to start in data the base did not see."""
    stored = []
    if (Path(training_args.output_dir) / RUN_CONFIG_NAME).is_file():
        stored.append(
            (training_args.output_dir, _read_run_config(Path(training_args.output_dir) / RUN_CONFIG_NAME).get("data"))
        )
    if run_args.branch_from:
        stored.append(
            (run_args.branch_from, _read_run_config(Path(run_args.branch_from) / RUN_CONFIG_NAME).get("data"))
        )
    if resume and (info := run_folders.read_run_info(resume)) is not None:
        stored.append((resume, info.get("data")))
    base = run_folders.read_run_info(run_args.model_name_or_path) if run_args.cpt else None
    if base is not None and run_args.data_start_block is None:
        stored.append((run_args.model_name_or_path, base.get("data")))
    for where, recorded in stored:
        diff = _config_diff(
            {"data": {k: (recorded or {}).get(k) for k in identity}}, {"data": identity}, groups=("data",)
        )
        if diff:
            raise ValueError(
                f"this run reads other data than {where} ({'; '.join(diff)}): a different corpus, "
                "data_dir, max_docs or tokenizer; use the original data, or a new output_dir"
                + (" (CPT on new data: set data_start_block)" if where == run_args.model_name_or_path else "")
            )


def check_tokenizer_matches_base(tokenizer, run_args: PretrainArguments) -> None:
    """Refuse a tokenizer whose ids do not mean what the base model's embeddings learned: the base's embedding rows
    must cover it, and a base that ships its own tokenizer must map every token to the same id."""
    from transformers import AutoConfig

    base = run_args.model_name_or_path
    try:
        vocab_size = AutoConfig.from_pretrained(base, trust_remote_code=True).vocab_size
    except (OSError, ValueError) as error:
        raise model_folders.hub_load_error(base, "the base model's config", error) from None
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"the tokenizer has {len(tokenizer)} tokens but {base} has {vocab_size} embeddings; use the "
            "base model's own tokenizer (drop --tokenizer_name_or_path)"
        )
    if (
        run_args.tokenizer_name_or_path
        and Path(base).is_dir()
        and any((Path(base) / f).is_file() for f in model_folders.TOKENIZER_FILES)
    ):
        own, given = data.load_pretraining_tokenizer(base).get_vocab(), tokenizer.get_vocab()
        differ = sum(own.get(token) != i for token, i in given.items()) + len(own.keys() - given.keys())
        if differ:
            raise ValueError(
                f"tokenizer {run_args.tokenizer_name_or_path} differs from the base model's own ({differ} "
                f"of {len(own)} tokens change id), so the embeddings of {base} would mean other tokens; "
                "drop --tokenizer_name_or_path to use the base's"
            )


def check_token_budget(run_args: PretrainArguments, needed: int, estimate: dict | None, first_block: int = 0) -> None:
    """Refuse, before the corpus is tokenized, a run that needs `needed` blocks (up to the last it reads) the corpus
    cannot fill (an estimate from a tokenized sample: `pretraining.data.estimate_tokens`); the exact count is checked
    again once the blocks exist."""
    if estimate is None:
        return
    available = estimate["tokens"] // run_args.block_size * run_args.epochs
    if available < needed:
        raise ValueError(
            f"corpus {run_args.corpus_source} yields about {estimate['tokens']:,} tokens ({estimate['documents']:,} "
            f"documents x {estimate['tokens_per_document']:.0f} tokens, estimated from {estimate['sampled']:,}), about "
            f"{available:,} blocks of {run_args.block_size} over {run_args.epochs} epoch(s), but the run needs "
            f"{needed:,} blocks ({needed * run_args.block_size:,} tokens, from block {first_block}); add corpus_source "
            "entries (comma-separated) or a bigger corpus_name, set epochs (repeats the data), or lower max_steps"
        )
