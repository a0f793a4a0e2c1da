"""The studies: what each one trains, evaluates and reports (data, like `recipes.manifest`); `recipes.study` runs
them and `recipes.study_docs` writes a finished one into docs/.

A study is a scale (`recipes.manifest.SCALES`), the models of the manifest it trains there (each once, or once per
pretraining seed), the tasks and the LR x seed grid it fine-tunes them with, and the evaluation settings; or, for a
study of a real decoder, its arms (the converted decoder with either attention, CPT of another arm, LoRA or full),
measured by frozen-feature probes and held-out scores. Its definition is recorded in `<output>/study.json`
(`run_folders.STUDY_FORMAT`), which a resumed study must match.
"""

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from core import names, run_folders
from core.artifacts import read_json
from recipes import manifest


@dataclass(frozen=True)
class Arm:
    """One model of a decoder study: the converted decoder (`cpt_of` None) or CPT of another arm (`cpt`: its own
    settings over the study's: `lora: true` for LoRA, merged; `objective: clm` for CLM CPT, MLM otherwise), measured
    with causal or bidirectional attention; a CPT arm is trained once per `Study.pretrain_seeds` seed."""

    name: str
    causal: bool = False
    cpt_of: str | None = None
    cpt: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Probe:
    """A frozen-feature probe (`evaluation.probe`): a classifier fitted on `train` of `pool` encoded training examples
    per seed, tested on `test` instances (retrieval: `test` queries ranked against the documents judged for them,
    nothing fitted, one seed)."""

    task: str
    metric: str
    test: int
    pool: int = 0
    train: int = 0


@dataclass(frozen=True)
class Study:
    """What one study runs. Model names are the released ones (`core.names`); `scale` is the manifest scale (steps,
    architecture)."""

    scale: str
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    lrs: tuple[float, ...]
    seeds: tuple[int, ...]
    eval_args: dict = field(default_factory=dict)  # evaluation.finetune_args.ProtocolArgs overrides
    compare: tuple[str, str] | None = None
    evaluate_intermediate: bool = False  # also evaluate the intermediate checkpoints (score vs pretraining step)
    task_eval_args: dict = field(default_factory=dict)  # task -> ProtocolArgs overrides on top of eval_args
    intermediate_steps: tuple[int, ...] = ()  # paper-scale steps of the intermediate checkpoints to evaluate (all)
    intermediate_tasks: tuple[str, ...] = ()  # tasks the intermediate checkpoints are evaluated on (all)
    workers: int = 1  # concurrent grid processes (evaluation.run --workers), one CPU thread each when > 1
    heldout_blocks: int = 0  # held-out blocks scored by pretraining.heldout after pretraining (0: no held-out stage)
    task_lrs: dict = field(default_factory=dict)  # task -> its own LR grid (`lrs` otherwise)
    # pretraining replicates: each model trained once per seed, run k named `<name>-pseed<k>`, its `seed` and
    # `masking_seed` set to k; one block order (`data_seed`) for all, as the paper's. Empty: one run per model.
    pretrain_seeds: tuple[int, ...] = ()
    pretrain_data_order: bool = False  # replicate k also reads the blocks in its own order (`data_seed` k)
    # task -> (low, high): the LRs an earlier, wider grid of this study's models measured worse below and above the
    # task's grid here (`analysis.report --bracketed_by`): an optimum this grid cannot bracket itself counts as
    # bracketed, named in the findings as declared, not measured. A report setting: not in study.json.
    bracketed_by: dict = field(default_factory=dict)
    # a decoder study: `decoder` (a `recipes.real_models` name; `--decoder DIR` replaces it), its arms, the settings
    # of their CPT runs (`cpt`, over recipes/configs/real-decoder-cpt.yaml), the probes (`seeds`: their training
    # subsets), the paired comparisons the report makes as one family (Holm) and where the measures run
    decoder: str = ""
    arms: tuple[Arm, ...] = ()
    cpt: dict = field(default_factory=dict)
    probes: tuple[Probe, ...] = ()
    probe_max_length: int = 128
    family: tuple[tuple[str, str], ...] = ()
    device: str = "cpu"

    def lrs_of(self, task: str) -> tuple[float, ...]:
        return tuple(self.task_lrs.get(task, self.lrs))

    def trained_names(self) -> tuple[str, ...]:
        """The pretraining runs of the study: its models, or each model once per pretraining seed."""
        return tuple(names.replicate_name(name, k) for name in self.models for k in (self.pretrain_seeds or (None,)))

    def definition(self) -> dict:
        """What study.json records (a resumed study must match it): every field, `pretrain_seeds`,
        `pretrain_data_order` and a decoder study's fields only when set, so the directories of studies defined before
        they existed still resume."""
        definition = json.loads(json.dumps(dataclasses.asdict(self)))
        del definition["bracketed_by"]  # how the report reads the grid, not what the study runs
        for key in ("pretrain_seeds", "pretrain_data_order", *DECODER_FIELDS):  # only when set: older study.json
            if definition[key] == DEFAULTS[key]:
                del definition[key]
        return definition


_TOY_EVAL = {"max_length": 128, "qa_max_length": 192, "doc_stride": 64, "batch_size": 32, "eval_batch_size": 128}
STUDIES = {
    "smoke": Study(
        scale="smoke",
        models=("610m-clm-42k", "610m-mlm40-42k", "610m-clm-21k-mlm40-42k", "610m-clm-dec42k-mlm40-44k"),
        tasks=("sst2", "conll2003", "squad", "scifact"),
        lrs=(2e-4, 5e-4),
        seeds=(0, 1),
        eval_args={**_TOY_EVAL, "max_steps": 30, "max_train": 1000, "max_eval": 200},
        compare=("610m-mlm40-42k", "610m-clm-42k"),
    ),
    "toy": Study(
        scale="toy",
        models=(
            "610m-clm-42k",
            "610m-mlm20-42k",
            "610m-mlm30-42k",
            "610m-mlm40-42k",
            "610m-mlm50-42k",
            "610m-clm-10k-mlm40-42k",
            "610m-clm-21k-mlm40-42k",
            "610m-clm-32k-mlm40-42k",
            "610m-clm-dec42k-mlm40-54k",
            "610m-mlm40-dec42k-mlm40-54k",
        ),
        tasks=("sst2", "mnli", "conll2003", "squad", "scifact"),
        lrs=(2e-4, 5e-4),
        seeds=(0, 1, 2),
        eval_args={**_TOY_EVAL, "max_steps": 60, "max_train": 3000, "max_eval": 500},
        compare=("610m-mlm40-42k", "610m-clm-42k"),
    ),
}
# The mini study: the paper's comparisons at the smallest scale where they can show on 2 CPU cores (docs/mini-study).
# Fine-tuning budgets are the paper's (1,000 steps for SC, one epoch for CoNLL) except QA (500 steps) and IR (300),
# cut to fit about 150 minutes (docs/mini-study/PILOT.md); inputs of 128 tokens, test sets cut to a seeded random 1,000.
_MINI = Study(
    scale="mini",
    models=(
        "610m-clm-42k",
        "610m-mlm20-42k",
        "610m-mlm40-42k",
        "610m-clm-21k-mlm40-42k",
        "610m-clm-dec42k-mlm40-54k",
        "610m-mlm40-dec42k-mlm40-54k",
    ),
    tasks=("sst2", "mnli", "conll2003", "squad", "scifact"),
    lrs=(5e-5, 2e-4, 5e-4),
    seeds=(0, 1, 2),
    eval_args={**_TOY_EVAL, "qa_max_length": 128, "max_eval": 1000},
    task_eval_args={"squad": {"max_steps": 500}, "scifact": {"max_steps": 300}},
    compare=("610m-mlm40-42k", "610m-clm-42k"),
    evaluate_intermediate=True,
    intermediate_steps=(5000, 10000, 20000),
    intermediate_tasks=("conll2003",),  # SST-2 as well cost 17 min and showed no data-efficiency gap (first run)
    workers=2,
    heldout_blocks=64,
)
STUDIES["mini"] = _MINI
# The same study on one GPU (bigger model, 4 epochs of the bundle, the paper's 1,000-step budgets, 8 workers): about 10
# minutes on an H100 by estimate, unmeasured. Fits time-limited jobs with --until pretraining, then --until evaluation.
STUDIES["mini-gpu"] = dataclasses.replace(
    _MINI,
    scale="mini-gpu",
    eval_args={
        "max_length": 256,
        "qa_max_length": 256,
        "doc_stride": 128,
        "batch_size": 32,
        "eval_batch_size": 256,
        "max_eval": 2000,
    },
    task_eval_args={},
    workers=8,
    heldout_blocks=256,
)
# The replicated horizon study (docs/horizon-study, sized in its PILOT.md): does the CLM - MLM gap close as tokens per
# parameter grow? Paper steps 1k and 2k are the only checkpoints before SC's crossover interval under both parameter
# conventions (so MNLI's slope is testable), 40k is past it; 2 fine-tuning seeds per pretraining run (the runs are the
# units of the intervals), each task at the 2 LRs where the first horizon run's wider grids put every optimum.
STUDIES["horizon-replicated"] = Study(
    scale="horizon-replicated",
    models=("610m-clm-42k", "610m-mlm40-42k"),
    tasks=("conll2003", "mnli"),
    lrs=(),
    task_lrs={"conll2003": (3e-3, 1e-2), "mnli": (3e-4, 1e-3)},
    # the first horizon run's wider grids (CoNLL 1e-3 to 3e-2, MNLI 1e-4 to 3e-3) never put an optimum on these
    # neighbours: declared, not measured in this study (the report says so beside each finding it lets in)
    bracketed_by={"conll2003": (1e-3, 3e-2), "mnli": (1e-4, 3e-3)},
    seeds=(0, 1),
    eval_args={"max_length": 128, "batch_size": 32, "eval_batch_size": 128},  # full test sets: no max_eval
    task_eval_args={"mnli": {"max_steps": 500}},
    compare=("610m-mlm40-42k", "610m-clm-42k"),
    evaluate_intermediate=True,
    intermediate_steps=(1000, 2000, 5000, 40000),
    workers=2,
    heldout_blocks=64,
    pretrain_seeds=(0, 1, 2),
)
# The horizon study as the findings' rules (issue 45) need it (docs/horizon-tested-study, sized in its PILOT.md).
# horizon-replicated cannot test stability (2 LRs a task), MNLI's slope (2 checkpoints before SC's crossover interval
# under both conventions) or vary the data order; here: 14 blocks a step (scale `horizon-tested`) put 1k, 2k and 5k
# before the interval under both conventions (2.0, 4.0, 10.1 tokens per parameter counted; 4.9, 9.9, 24.6 without
# embeddings) and 40k and the decayed final past it (81, 85; 197, 207); 4 LRs a task spanning the first horizon run's
# wider grids, so this study's own grid brackets every optimum; 1 fine-tuning seed per pretraining run (the runs are
# the units of every interval, each run's LR curve one stability unit). At 500 MNLI steps MLM40 may not clear MNLI's
# trivial baseline (the rules then answer "not testable"); 1,000 steps would not fit 150 minutes on 2 cores.
STUDIES["horizon-tested"] = dataclasses.replace(
    STUDIES["horizon-replicated"],
    scale="horizon-tested",
    bracketed_by={},
    seeds=(0,),
    pretrain_data_order=True,
    task_lrs={"conll2003": (1e-3, 3e-3, 1e-2, 3e-2), "mnli": (1e-4, 3e-4, 1e-3, 3e-3)},
)
# The real-decoder study (docs/real-decoder-study, sized in its PILOT.md): the paper's recommendation, MLM CPT of a
# CLM model, on a real pretrained decoder (SmolLM2-135M-Instruct) at a budget 2 CPU cores afford: the decoder as is
# (causal), the same weights attending bidirectionally, and LoRA and full MLM CPT (40%) of 120 steps x 8 blocks x
# 128 tokens on the bundle; each measured on 32 held-out blocks and by frozen-feature probes of SST-2 (mean-pooled),
# CoNLL-2003 (each word's first token) and SciFact (cosine of mean-pooled states), 5 seeds of each probe's training
# subset. About 35 minutes on 2 idle cores.
_CPT = {"max_steps": 120, "per_device_train_batch_size": 8, "block_size": 128, "learning_rate": 5e-4}
STUDIES["real-decoder"] = Study(
    scale="real-cpu",
    models=(),
    tasks=(),
    lrs=(),
    seeds=(0, 1, 2, 3, 4),
    heldout_blocks=32,
    decoder="smollm2-135m-instruct",
    arms=(
        Arm("decoder-causal", causal=True),
        Arm("decoder-bidirectional"),
        Arm("cpt-lora", cpt_of="decoder-bidirectional", cpt={"lora": True, "lora_rank": 16, "learning_rate": 2e-3}),
        Arm("cpt-full", cpt_of="decoder-bidirectional"),
    ),
    cpt={
        **_CPT,
        "warmup_steps": 12,
        "lr_scheduler_kwargs": {"num_decay_steps": 24, "decay_type": "linear", "min_lr_ratio": 0.0},
    },
    probes=(
        Probe("sst2", "accuracy", test=400, pool=384, train=256),
        Probe("conll2003", "entity_f1", test=250, pool=192, train=128),
        Probe("scifact", "ndcg@10", test=100),
    ),
    family=(
        ("decoder-bidirectional", "decoder-causal"),
        ("cpt-lora", "decoder-bidirectional"),
        ("cpt-full", "decoder-bidirectional"),
        ("cpt-lora", "decoder-causal"),
        ("cpt-full", "decoder-causal"),
    ),
)
# The same on one GPU (not run: this project's device cannot receive the 650 MB of weights, docs/studies.md): 50x the
# CPU's CPT tokens in bf16, the probes on the whole SST-2 dev set and CoNLL testb, SciFact's 300 test queries.
STUDIES["real-decoder-gpu"] = dataclasses.replace(
    STUDIES["real-decoder"],
    scale="real-gpu",
    heldout_blocks=256,
    cpt={
        **STUDIES["real-decoder"].cpt,
        "max_steps": 1500,
        "per_device_train_batch_size": 32,
        "warmup_steps": 150,
        "lr_scheduler_kwargs": {"num_decay_steps": 300, "decay_type": "linear", "min_lr_ratio": 0.0},
        "use_cpu": False,
        "bf16": True,
    },
    probes=(
        Probe("sst2", "accuracy", test=872, pool=4096, train=2048),
        Probe("conll2003", "entity_f1", test=3453, pool=2048, train=1024),
        Probe("scifact", "ndcg@10", test=300),
    ),
    device="cuda",
)
# The real-decoder study redesigned for a reviewer (issue 53; docs/real-decoder-controlled-study, sized in its
# PILOT.md): the same base, plus the control arm, full CLM CPT of the causal decoder on the same tokens, steps and
# schedule as full MLM CPT (so "MLM CPT beats the decoder" is not "any further training does"); every CPT arm trained
# 3 times (`pretrain_seeds`: weights' initialisation where any (LoRA), masks and block order vary; the CPT runs are the
# units of its intervals, as the horizon study's pretraining runs); each arm's readout chosen on validation
# (`evaluation.probe.READOUTS`); SciFact on the protocol's pooled corpus with BM25 (`bm25s`) as its reference row; the
# causal arms' held-out score is next-token loss only. CPT of 90 steps x 8 blocks x 128 tokens (92,160 tokens) per
# run, 3 probe seeds: about 125 minutes on 2 idle cores by the pilot's figures.
STUDIES["real-decoder-controlled"] = dataclasses.replace(
    STUDIES["real-decoder"],
    seeds=(0, 1, 2),
    pretrain_seeds=(0, 1, 2),
    pretrain_data_order=True,
    arms=(
        Arm("decoder-causal", causal=True),
        Arm("decoder-bidirectional"),
        Arm("cpt-clm", causal=True, cpt_of="decoder-causal", cpt={"objective": "clm"}),
        *STUDIES["real-decoder"].arms[2:],
    ),
    cpt={
        **_CPT,
        "max_steps": 90,  # the most 150 minutes allow with 3 runs of 3 CPT arms (PILOT.md); warmup 10%, decay 20%
        "warmup_steps": 9,
        "lr_scheduler_kwargs": {"num_decay_steps": 18, "decay_type": "linear", "min_lr_ratio": 0.0},
    },
    family=(
        ("cpt-full", "cpt-clm"),
        ("cpt-lora", "cpt-clm"),
        ("cpt-full", "decoder-causal"),
        ("cpt-clm", "decoder-causal"),
        ("decoder-bidirectional", "decoder-causal"),
    ),
)
STUDY_NAMES = (*STUDIES, "paper")
DECODER_FIELDS = ("decoder", "arms", "cpt", "probes", "probe_max_length", "family", "device")
DEFAULTS = json.loads(json.dumps(dataclasses.asdict(Study(scale="", models=(), tasks=(), lrs=(), seeds=()))))
TOY_VOCAB_SIZE = 8192  # the tiny architecture's vocabulary (a scale may set its own `vocab_size`)


def read_study_marker(stored, where) -> dict:
    """A study.json's content, refused in one line when of another format (`run_folders.STUDY_FORMAT`)."""
    found = stored.get("format", 1) if isinstance(stored, dict) else "unknown"
    if found != run_folders.STUDY_FORMAT:
        raise ValueError(
            f"{where} is study.json format {found}, this code reads format {run_folders.STUDY_FORMAT}: "
            "run the study again into a new --output, or use the commit that wrote it"
        )
    counts = stored.get("parameters", {"total": 2, "input_embedding": 1})  # none yet: nothing to check
    total, embedding = (counts.get(key) if isinstance(counts, dict) else None for key in ("total", "input_embedding"))
    if not (type(total) is int and type(embedding) is int and 0 < embedding < total):  # else the report's refusal
        raise ValueError(  # of --embedding_parameters, a flag no one passed
            f"{where} records parameters {counts}, where a study records its models' total and the input "
            "embedding's part of it (0 < input_embedding < total), from their run_info.json: the file was changed "
            "since; restore it (or use the archive --docs wrote)"
        )
    return stored


def study_marker(output: Path) -> dict:
    """The study.json of a study directory."""
    return read_study_marker(read_json(output / "study.json", "study marker"), output / "study.json")


def regime(stored: dict) -> tuple[float, int, int]:
    """(pretraining tokens per paper step, parameters with the input embedding and without the LM head, the input
    embedding's) of a study as its study.json records them (`recipes.study.record_parameters`)."""
    if "parameters" not in stored:
        raise ValueError("study.json records no parameter counts: the study's models are not all pretrained yet")
    scale = manifest.SCALES[stored["definition"]["scale"]]
    batch = scale.per_device_train_batch_size * scale.gradient_accumulation_steps * scale.block_size
    return batch / scale.step_divisor, stored["parameters"]["total"], stored["parameters"]["input_embedding"]
