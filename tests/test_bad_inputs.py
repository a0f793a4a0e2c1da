"""The bad-input table: every row is refused in one line `error: ...`, exit status 2, before anything is written.

Rows are (CLI main, argv, expected message fragment); `{out}` is replaced by a fresh output path. Every row must be
refused before work starts (no training), so the table stays fast. A new flag ships with its row here.
"""

import argparse
import dataclasses
import functools
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from transformers import TrainingArguments

from core import artifacts, run_folders, store
from core.cli import BadInput
from core.paths import REPO_ROOT
from evaluation import run as grid
from evaluation import tasks
from pretraining.settings import CPT_SETTINGS, PretrainArguments

ROWS = [
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs", "0", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (grid.main, ["--model", "x", "--tasks", "sst2", "--lrs=-1e-5", "--seeds", "0", "--output", "{out}"], "--lrs"),
    (
        grid.main,
        [
            "--model",
            "x",
            "--tasks",
            "sst2",
            "--lrs",
            "1e-5",
            "--seeds",
            "0",
            "--warmup_ratio",
            "2",
            "--output",
            "{out}",
        ],
        "--warmup_ratio",
    ),
    (
        grid.main,
        ["--model", "x", "--tasks", "sst2,sst2", "--lrs", "1e-5", "--seeds", "0", "--output", "{out}"],
        "more than once",
    ),
]


@pytest.mark.parametrize("main, argv, fragment", ROWS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(main, argv, fragment, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(BadInput) as refused:
        main([a.replace("{out}", str(out)) for a in argv])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and fragment in err[0]
    assert not out.exists()


# ================================================================================================ the table per CLI
# One table per command line: {module: [(argv, fragment of the one-line message)]}. Placeholders: {out} a path that
# does not exist yet (nothing may appear there), {tmp} the test's folder, {file} a plain file in it, {repo} the
# repository, {model} a tiny saved model (outside {tmp}), {dup_a}/{dup_b} two task YAMLs of one name, {bad_yaml} a
# YAML syntax error, {escaped} a task named ../../escaped, {dupkey} a task YAML giving `name` twice, {negbudget} one
# with max_steps -1, {dupcfg} a recipe YAML giving `objective` twice, {noid} a results folder whose one result file
# has no identity, {study} a smoke study's folder whose results folder holds a result of a model not its own
# (my-encoder). Each row runs `main(argv)` in-process in {tmp}:
# exit 2, one `error:` line holding the fragment, no traceback, and {tmp} unchanged.
DEBUG = ["--config", "{repo}/recipes/configs/debug.yaml", "--output_dir", "{out}"]
GRID = ["--model", "{model}", "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0", "--output", "{out}"]
MTEB = ["--model", "{model}", "--tasks", "scifact", "--output", "{out}"]
INSPECT = ["--model", "{model}", "--task", "sst2"]
CPT = [*DEBUG, "--architecture", "none", "--model_name_or_path", "{model}", "--switch_step", "none"]
# issue 46 item 3: `runs/my-decoder-cp` (a typo of the folder {tmp}/runs/my-decoder-cpt, relative to {tmp}) is a
# missing local path with its nearest sibling, not a Hub id to fetch
TYPO = "runs/my-decoder-cp: no such directory (did you mean runs/my-decoder-cpt?)"
HELDOUT = ["--model", "{model}", "--tokenizer", "{model}", "--block_size", "16", "--output", "{out}/loss.csv"]

CLI_ROWS = {
    "recipes.pretrain": [
        (["--config", "{tmp}/missing.yaml", "--output_dir", "{out}"], "missing.yaml does not exist"),
        (
            ["--config", "recipes/configs/debug.yaml", "--output_dir", "{out}"],  # issue 46 item 8: run from {tmp}
            "does not exist (relative to the current folder {tmp}); the recipe's own config is "
            "{repo}/recipes/configs/debug.yaml: pass that path",
        ),
        ([*DEBUG, "--objective", "mlm", "clm"], "--objective takes one value, and ['clm'] follow(s) it"),
        (["--config", "{dupcfg}", "--output_dir", "{out}"], "dupcfg.yaml is not valid YAML: duplicate key 'objective'"),
        (
            [*DEBUG, "--lr_scheduler_kwargs", '{"num_decay_steps": 100}'],
            "num_decay_steps=100 does not fit in max_steps=20",
        ),
        ([*DEBUG, "--architecture", "nope"], "architecture='nope' is unknown"),
        ([*DEBUG, "--architecture", "none", "--model_name_or_path", "{tmp}/missing"], "missing: no such directory"),
        ([*DEBUG, "--tokenizer_name_or_path", "{tmp}/missing"], "missing: no such directory"),
        ([*DEBUG, "--toy_vocab_size", "0"], "toy_vocab_size=0 must be >= 261"),
        ([*DEBUG, "--corpus_source", "{tmp}/missing.txt"], "missing.txt"),
        ([*DEBUG, "--corpus_name", "sample-10BT"], "corpus_name='sample-10BT' names a config"),
        ([*DEBUG, "--data_dir", "{tmp}/missing"], "data bundle not found"),
        ([*DEBUG, "--max_docs", "0"], "max_docs=0 must be >= 1"),
        ([*DEBUG, "--block_size", "1"], "block_size=1 is out of range"),
        ([*DEBUG, "--num_proc", "0"], "num_proc=0 must be >= 1"),
        ([*DEBUG, "--epochs", "0"], "epochs=0 must be >= 1"),
        ([*DEBUG, "--global_batch_size", "7"], "global_batch_size"),
        ([*DEBUG, "--objective", "nope"], "objective='nope' is unknown"),
        ([*DEBUG, "--keep_optimizer_state", "true"], "keep_optimizer_state is a CPT setting: set cpt: true"),
        ([*DEBUG, "--lora_rank", "4"], "lora_rank is a CPT setting"),
        ([*DEBUG, "--cpt", "true"], "CPT starts from existing weights"),
        ([*DEBUG, "--mlm_probability", "1.5"], "mlm_probability=1.5 must be in (0, 1)"),
        ([*DEBUG, "--mask_replace_prob", "2"], "mask_replace_prob=2.0 and random_replace_prob=0.0"),
        ([*DEBUG, "--random_replace_prob=-1"], "random_replace_prob=-1.0 must each be in [0, 1]"),
        ([*DEBUG, "--masking_seed=-1"], "masking_seed=-1 must be >= 0"),
        ([*DEBUG, "--switch_step", "100"], "switch_step=100 must be strictly between 0 and max_steps=20"),
        ([*DEBUG, "--weight_decay_scope", "nope"], "weight_decay_scope='nope'"),
        ([*DEBUG, "--reset_optimizer_at_switch", "maybe"], "--reset_optimizer_at_switch"),
        ([*DEBUG, "--decay_branches", "5"], "decay_branches [5] must lie in"),
        ([*DEBUG, "--branch_from", "{tmp}/missing"], "branch_from"),
        ([*DEBUG, "--intermediate_steps", "30"], "intermediate_steps [30] fall outside"),
        ([*DEBUG, "--intermediate_steps", "5,5"], "intermediate_steps [5, 5] names 5 more than once"),  # a comma list
        ([*DEBUG, "--run_name", "../../x"], "run_name='../../x' names the TensorBoard folder"),  # logs outside
        ([*DEBUG, "--scale", "Bad Scale"], "scale 'Bad Scale' must be lower-case words"),  # was after run_config.json
        ([*DEBUG, "--step_divisor", "0"], "step_divisor=0 must be >= 1"),
        ([*DEBUG, "--log_block_order", "maybe"], "--log_block_order"),
        ([*DEBUG, "--compile", "nope"], "compile='nope' is unknown"),
        ([*DEBUG, "--mlm_fixed_shape", "maybe"], "--mlm_fixed_shape"),
        ([*DEBUG, "--mlm_fixed_shape_std=-1"], "mlm_fixed_shape_std=-1.0 must be >= 0"),
        ([*DEBUG, "--max_steps", "0"], "set max_steps > 0"),
        ([*DEBUG, "--per_device_train_batch_size", "0"], "per_device_train_batch_size=0 is out of range"),
        ([*DEBUG, "--gradient_accumulation_steps", "0"], "gradient_accumulation_steps=0 is out of range"),
        ([*DEBUG, "--max_grad_norm=-1"], "max_grad_norm=-1.0 is out of range"),
        ([*DEBUG, "--learning_rate=-1e-4"], "learning_rate=-0.0001 must be > 0"),
        ([*DEBUG, "--save_steps", "0"], "save_steps=0"),
        ([*DEBUG, "--lr_scheduler_kwargs", "{oops"], "lr_scheduler_kwargs is not a JSON object"),
        ([*DEBUG, "--train_sampling_strategy", "random"], "set train_sampling_strategy: sequential"),
        ([*DEBUG, "--remove_unused_columns", "true"], "set remove_unused_columns: false"),
        ([*DEBUG, "--data_seed", "none"], "--data_seed"),
        ([*DEBUG, "--compile", "regional", "--torch_compile", "true"], "drop torch_compile"),
        (
            [
                *DEBUG,
                "--decay_branches",
                "20",
                "--save_total_limit",
                "1",
                "--switch_step",
                "none",
                "--objective",
                "clm",
            ],
            "save_total_limit would delete the decay-branch checkpoints",
        ),
        (
            [
                *DEBUG,
                "--decay_branches",
                "20",
                "--save_only_model",
                "true",
                "--switch_step",
                "none",
                "--objective",
                "clm",
            ],
            "save_only_model would save the decay-branch checkpoints without optimizer",
        ),
        (
            [*DEBUG, "--warmup_steps", "14", "--decay_branches", "18", "--switch_step", "none", "--objective", "clm"],
            "decay_branches [18] must lie in (warmup + decay",
        ),
        ([*DEBUG, "--resume_from_checkpoint", "{tmp}/missing"], "--resume_from_checkpoint"),
        (["--config", "{repo}/recipes/configs/debug.yaml", "--output_dir", "{tmp}"], "is not empty"),
    ],
    "recipes.cpt": [
        (
            [*DEBUG, "--architecture", "none", "--model_name_or_path", "runs/my-decoder-cp", "--switch_step", "none"],
            TYPO,
        ),  # issue 46 item 3: a typo under an existing folder was tried as a Hub id
        (
            [*DEBUG, "--architecture", "none", "--model_name_or_path", "{tmp}/llama", "--switch_step", "none"],
            "llama is a llama decoder, not yet this project's model: convert it first with `python -m "
            "modeling_eurobert.convert {tmp}/llama {tmp}/llama-eurobert`",
        ),  # issue 46 item 9: "no mask token"
        ([*CPT, "--keep_optimizer_state", "maybe"], "--keep_optimizer_state"),
        ([*CPT, "--data_start_block=-5"], "data_start_block=-5 is out of range"),
        ([*CPT, "--lora", "maybe"], "--lora"),
        ([*CPT, "--lora", "true", "--lora_rank", "0"], "lora_rank=0 must be >= 1"),
        ([*CPT, "--lora", "true", "--lora_alpha", "0"], "lora_alpha=0.0 > 0"),
        ([*CPT, "--lora", "true", "--lora_dropout", "1.5"], "lora_dropout=1.5 in [0, 1)"),
        ([*CPT, "--lora", "true", "--lora_target_modules", "nope"], "lora_target_modules=['nope']"),
        (
            [*CPT, "--lora", "true", "--lora_target_modules", "q_proj,q_proj"],
            "lora_target_modules ['q_proj', 'q_proj'] names q_proj more than once",
        ),
        ([*CPT, "--lora", "true", "--lora_train_embeddings", "maybe"], "--lora_train_embeddings"),
        ([*CPT, "--switch_step", "10"], "CPT is one objective"),
        ([*CPT, "--objective", "nope"], "objective='nope' is unknown"),  # clm or mlm: the controlled study's CPT arms
        # issue 43: a file, or a folder with only config.json (transformers' "Repo id must be..." and a traceback)
        (
            [
                *DEBUG,
                "--architecture",
                "none",
                "--model_name_or_path",
                "{file}",
                "--tokenizer_name_or_path",
                "{model}",
                "--switch_step",
                "none",
            ],
            "file.txt is not a saved model: pass a folder holding config.json and its weights",
        ),
        (
            [
                *DEBUG,
                "--architecture",
                "none",
                "--model_name_or_path",
                "{configonly}",
                "--tokenizer_name_or_path",
                "{model}",
                "--switch_step",
                "none",
            ],
            "configonly is not a saved model",
        ),
        ([*CPT, "--lora", "true", "--keep_optimizer_state", "true"], "drop keep_optimizer_state or lora"),
        (  # issue 54: a base whose run_info.json says tokens_seen -5 and parameters "lots" was accepted
            [*DEBUG, "--architecture", "none", "--model_name_or_path", "{badinfo}", "--switch_step", "none"],
            "badinfo/run_info.json holds tokens_seen -5, parameters 'lots', where its run writes whole numbers",
        ),
    ],
    "recipes.study": [
        (["nope", "--output", "{out}"], "unknown study 'nope'"),
        (["smoke", "--output", "{tmp}"], "{tmp}"),
        (["smoke", "--output", "{out}", "--data_dir", "{tmp}/missing"], "data bundle not found"),
        (["smoke", "--output", "{out}", "--org", "bad org!!"], "--org 'bad org!!'"),
        (["smoke", "--output", "{out}", "--until", "nope"], "--until"),
        (["smoke", "--output", "{out}", "--from_results", "{tmp}/missing.tar.xz"], "missing.tar.xz"),
        (["paper", "--output", "{out}", "--gpu", "nope"], "nope"),
        (["paper", "--output", "{out}", "--mfu", "0"], "mfu=0.0 must be in (0, 1]"),
        (["real-decoder", "--output", "{out}", "--decoder", "{tmp}"], "missing config.json"),
        (["real-decoder", "--output", "{out}", "--decoder", "{model}"], "--decoder"),
        (["real-decoder", "--output", "{out}", "--real_models", "{file}"], "is a file"),
        (["smoke", "--output", "{out}", "--decoder", "{model}"], "are for a decoder study"),
    ],
    "recipes.prepare_data": [
        (["nope"], "invalid choice: 'nope'"),
        (["pretraining", "--config", "{tmp}/missing.yaml"], "missing.yaml does not exist"),
        (["evaluation", "--tasks", "nope"], "unknown task 'nope'"),
        (["evaluation", "--tasks", "{bad_yaml}"], "bad.yaml is not valid YAML"),
        (["evaluation", "--tasks", "sst2", "--source", "web"], "--source"),
        (
            ["evaluation", "--tasks", "sst2", "--source", "offline", "--data_dir", "{tmp}/missing"],
            "data bundle not found",
        ),
    ],
    "recipes.manifest": [
        (["--write_configs", "nope"], "nope"),
        (["--write_configs", "paper,toy"], "pass --output"),
        (["--write_configs", "toy", "--output", "{file}"], "is a file"),
    ],
    "recipes.real_models": [
        (["--output", "{file}"], "is a file"),
        (["--output", "{out}", "--models", "smollm2"], "unknown ['smollm2']"),
    ],
    "pretraining.heldout": [
        (
            ["--model", "{tmp}/missing", "--tokenizer", "{model}", "--block_size", "16", "--output", "{out}/loss.csv"],
            "missing",
        ),
        (
            [
                "--model",
                "runs/my-decoder-cp",
                "--tokenizer",
                "{model}",
                "--block_size",
                "16",
                "--output",
                "{out}/loss.csv",
            ],
            TYPO,
        ),
        (
            ["--model", "{model}", "--tokenizer", "{tmp}/missing", "--block_size", "16", "--output", "{out}/loss.csv"],
            "missing",
        ),
        ([*HELDOUT[:4], "--block_size", "1", *HELDOUT[6:]], "--block_size 1 must be >= 2"),
        ([*HELDOUT, "--blocks", "0"], "--blocks 0 >= 1"),
        ([*HELDOUT, "--mlm_probability", "1.5"], "--mlm_probability 1.5 in (0, 1)"),
        ([*HELDOUT, "--data_dir", "{tmp}/missing"], "data bundle not found"),
        ([*HELDOUT, "--output", "{file}"], "is not a held-out CSV this tool wrote"),
        ([*HELDOUT, "--output", "{tmp}"], "is a directory"),
    ],
    "evaluation.run": [
        ([*GRID, "--model", "{tmp}/missing"], "missing: no such directory"),
        ([*GRID, "--model", "runs/my-decoder-cp"], TYPO),
        (
            [*GRID, "--tasks", "sst2", "conll2003"],
            "--tasks takes one value, and ['conll2003'] follow(s) it: a list is "
            "one comma-separated value (--tasks sst2,conll2003)",
        ),  # issue 46 8
        ([*GRID, "--tasks", "{dup_a},{dup_b}"], "a/task.yaml, "),
        ([*GRID, "--tasks", "{escaped}"], "name '../../escaped' cannot name a results folder"),
        ([*GRID, "--tasks", "{bad_yaml}"], "bad.yaml is not valid YAML"),
        ([*GRID, "--tasks", "{dupkey}"], "dupkey.yaml is not valid YAML (duplicate key 'name'"),
        ([*GRID, "--tasks", "{negbudget}"], "budget max_steps must be a positive integer, got -1"),
        ([*GRID, "--seeds", "x"], "--seeds"),
        ([*GRID, "--workers", "0"], "--workers 0 must be >= 1"),
        ([*GRID[:-1], "{study}/results"], "is the smoke study's results folder, for its own checkpoints"),
        ([*GRID, "--save_models", "nope:1:0"], "--save_models entry 'nope:1:0'"),
        ([*GRID, "--batch_size", "0"], "batch_size=0 must be >= 1"),
        ([*GRID, "--eval_batch_size", "0"], "eval_batch_size=0 must be >= 1"),
        ([*GRID, "--adam_beta1", "1.5"], "adam_beta1=1.5"),
        ([*GRID, "--adam_beta2=-1"], "adam_beta2=-1.0"),
        ([*GRID, "--adam_epsilon", "0"], "adam_epsilon=0.0"),
        ([*GRID, "--weight_decay=-1"], "weight_decay=-1.0"),
        ([*GRID, "--max_steps", "0"], "max_steps=0 must be >= 1"),
        ([*GRID, "--precision", "nope"], "--precision"),
        ([*GRID, "--attention", "nope"], "--attention"),
        ([*GRID, "--max_length", "0"], "max_length=0 must be >= 1"),
        ([*GRID, "--qa_max_length", "0"], "qa_max_length=0 must be >= 1"),
        ([*GRID, "--doc_stride=-1"], "doc_stride=-1"),
        ([*GRID, "--n_best", "0"], "n_best=0"),
        ([*GRID, "--max_answer_length", "0"], "max_answer_length=0"),
        ([*GRID, "--ir_corpus", "nope"], "--ir_corpus"),
        ([*GRID, "--pair_encoding", "nope"], "--pair_encoding"),
        ([*GRID, "--ir_relevance", "nope"], "--ir_relevance"),
        ([*GRID, "--tc_labelling", "nope"], "--tc_labelling"),
        ([*GRID, "--ir_pooling", "nope"], "--ir_pooling"),
        ([*GRID, "--peft", "nope"], "--peft"),
        ([*GRID, "--peft", "lora", "--lora_rank", "0"], "lora_rank=0"),
        ([*GRID, "--peft", "lora", "--lora_alpha", "0"], "lora_alpha=0.0"),
        ([*GRID, "--logging_steps", "0"], "logging_steps=0"),
        ([*GRID, "--source", "nope"], "--source"),
        ([*GRID, "--data_dir", "{tmp}/missing"], "data bundle not found"),
        ([*GRID, "--max_train", "0"], "max_train=0 must be >= 1"),
        ([*GRID, "--max_eval", "0"], "max_eval=0 must be >= 1"),
        # issue 35: each of these was a traceback after the output folder was created
        ([*GRID, "--tasks", "squad", "--doc_stride", "500"], "--doc_stride 500 must be below half the QA window"),
        ([*GRID, "--lrs", "inf"], "--lrs [inf] must be finite and > 0"),
        ([*GRID, "--seeds=-1"], "--seeds [-1] must be in [0, 2**32)"),
        ([*GRID, "--output", "{file}"], "--output {file} is a file"),
        ([*GRID, "--output", "{file}/results"], "is under {file}, which is a file"),
        ([*GRID, "--tasks", "scifact", "--peft", "lora"], "ir task scifact fine-tunes fully only"),
    ],
    "analysis.report": [
        (["{tmp}/missing"], "missing"),
        (["{noid}"], "noid/m/sst2/lr1e-05-seed0.json lacks identity"),
        (["{tmp}", "--tokens_per_step", "0", "--parameters", "1e6"], "--tokens_per_step and --parameters go together"),
        (["{tmp}", "--parameters", "1e6"], "--tokens_per_step and --parameters go together"),
        (["{tmp}", "--scale", "Mini Study"], "scale 'Mini Study' must be lower-case words"),
        (["{tmp}", "--embedding_parameters", "5"], "--embedding_parameters is a part of --parameters"),
        (["{study}/results"], "holds results of my-encoder, not one of its models: move"),
        (["{study}/results", "--scale", "mini"], "is the smoke study's results folder, trained at the smoke scale"),
        (["{study}/results", "{noid}"], "several results directories make one report: pass --output DIR"),
        (["{study}/results", "{study}/results/", "--output", "{out}"], "a results directory is given twice"),
        (["{study}/results", "{noid}", "--output", "{out}", "--scale", "mini"], "describe one study's names"),
        (["{noid}", "{study}/results", "--output", "{study}/report"], "is a study's own report"),
        (["{tmp}", "--bracketed_by", "conll2003=0.1"], "give each task once as TASK=LOW,HIGH"),
        (["{tmp}", "--step_divisor", "0"], "--step_divisor 0: give a whole number of 1 or more"),
        (["{study}/results", "{noid}", "--output", "{out}", "--step_divisor", "4"], "describe one study's names"),
        (
            ["{tmp}", "--tokens_per_step", "1", "--parameters", "10", "--embedding_parameters", "10"],
            "--embedding_parameters is a part of --parameters",
        ),
    ],
    "analysis.import_encodeval": [
        (["{tmp}/missing", "--output", "{out}"], "is not a directory"),
        (["{tmp}", "--output", "{out}"], "is outside EncodEval's layout"),
        (["{repo}/tests/fixtures/encodeval/results", "--output", "{file}"], "file.txt is a file"),
    ],
    "evaluation.identity": [
        (["--migrate", "{tmp}/missing"], "no result files under"),
        ([], "--migrate"),
    ],
    "evaluation.inspect": [
        (["--model", "{tmp}/missing", "--task", "sst2"], "missing"),
        (["--model", "runs/my-decoder-cp", "--task", "sst2"], TYPO),
        (["--model", "{model}", "--task", "nope"], "unknown task 'nope'"),
        (["--model", "{model}", "--task", "{bad_yaml}"], "bad.yaml is not valid YAML"),
        ([*INSPECT, "--n", "0"], "--n"),
        ([*INSPECT, "--split", "nope"], "--split"),
        ([*INSPECT, "--data_dir", "{tmp}/missing"], "data bundle not found"),
        ([*INSPECT, "--max_length", "x"], "--max_length"),
        ([*INSPECT, "--tc_labelling", "nope"], "--tc_labelling"),
    ],
    "evaluation.mteb": [
        ([*MTEB[:-1], "{study}/results"], "is the smoke study's results folder, which holds its grid's results only"),
        ([*MTEB, "--model", "{tmp}/missing"], "missing"),
        ([*MTEB, "--model", "runs/my-decoder-cp"], TYPO),
        ([*MTEB, "--tasks", "scifact", "nfcorpus"], "(--tasks scifact,nfcorpus)"),
        ([*MTEB, "--tasks", "NoSuchTask"], "unknown task 'NoSuchTask'"),
        ([*MTEB, "--max_eval", "0"], "max_eval"),
        ([*MTEB, "--ir_corpus", "nope"], "--ir_corpus"),
        ([*MTEB, "--ir_relevance", "nope"], "--ir_relevance"),
        ([*MTEB, "--source", "nope"], "--source"),
        ([*MTEB, "--data_dir", "{tmp}/missing"], "data bundle not found"),
        ([*MTEB, "--batch_size", "0"], "batch_size"),
        ([*MTEB, "--max_length", "0"], "max_length"),
        ([*MTEB, "--precision", "nope"], "--precision"),
        ([*MTEB, "--pooling", "nope"], "--pooling"),
    ],
    "model_cards.generate": [
        (["{tmp}/missing"], "missing"),
        (["runs/my-decoder-cp"], TYPO),
        (["{model}"], "run_info.json"),
        (["{model}", "--summary", "{tmp}/missing.csv"], "--summary and --results go together"),
        (["{model}", "--results", "{tmp}/missing"], "--summary and --results go together"),
        (["{model}", "--base_model", ""], "repo id '' must be ORG/NAME"),
    ],
    "model_cards.push": [
        (["{tmp}/missing", "--repo_id", "org/name", "--dry_run", "{out}"], "missing"),
        (["{model}", "--repo_id", "bad id!!", "--dry_run", "{out}"], "bad id!!"),
        (["--results", "{tmp}/missing", "--repo_id", "org/name", "--dry_run", "{out}"], "missing"),
        (["--results_dir", "{tmp}/missing", "--repo_id", "org/name", "--dry_run", "{out}"], "nothing to push"),
        (["{model}", "--repo_id", "org/name", "--results_repo_id", "bad id!!", "--dry_run", "{out}"], "bad id!!"),
        (["{model}", "--repo_id", "org/name", "--base_model", "", "--dry_run", "{out}"], "repo id '' must be ORG/NAME"),
    ],
    "modeling_eurobert.convert": [
        (["{tmp}/missing", "{out}"], "missing"),
        (["runs/my-decoder-cp", "{out}"], TYPO),
        (
            ["meta-llama/Llama-3.2-1B", "{out}"],
            "from the Hub: HF_HUB_OFFLINE is set and it is not in the local Hub cache",
        ),  # issue 46 item 3: was "LocalEntryNotFoundError"
        (["{model}", "{tmp}"], "{tmp}"),
        (["{model}", "{out}"], "unsupported source architecture"),
        (["{model}", "{out}", "--dtype", "nope"], "--dtype"),
        (["{model}", "{out}", "--mask_token", ""], "--mask_token '' is empty"),
        (["{model}", "{out}", "--pad_token", " "], "--pad_token ' ' is empty"),
        (["{model}", "{out}", "--max_position_embeddings", "x"], "--max_position_embeddings"),
        # issue 54: a GGUF release (the file, or the folder it was unpacked into) said only "is a file" / "missing
        # config.json"
        (
            ["{tmp}/gguf/model.Q4_1.gguf", "{out}"],
            "is a file; pass the directory of a saved transformers model: a GGUF",
        ),
        (["{tmp}/gguf", "{out}"], "missing config.json in {tmp}/gguf; SOURCE must be a saved transformers model"),
        (["{tmp}/gguf", "{out}"], "(model.Q4_1.gguf): a GGUF release is no transformers checkpoint: dequantise it"),
    ],
    "modeling_eurobert.export_native": [
        (["{tmp}/missing", "{out}"], "missing"),
        (["runs/my-decoder-cp", "{out}"], TYPO),
        (["{model}", "{tmp}"], "{tmp}"),
    ],
}

CLIS = sorted(CLI_ROWS)
POSITIONALS = {  # {module: the positionals that rows above give a bad value}
    "recipes.study": {"study", "output"},
    "recipes.prepare_data": {"what"},
    "analysis.report": {"results"},
    "analysis.import_encodeval": {"results"},
    "model_cards.generate": {"checkpoint"},
    "model_cards.push": {"checkpoint"},
    "modeling_eurobert.convert": {"source", "output"},
    "modeling_eurobert.export_native": {"checkpoint", "output"},
}

# Flags without a row of their own, each with the reason. A new flag needs a row above or an entry here.
TRAINING_ARGUMENTS_CHECKED = {
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_grad_norm",
    "learning_rate",
    "save_steps",
    "lr_scheduler_kwargs",
    "train_sampling_strategy",
    "remove_unused_columns",
    "data_seed",
    "torch_compile",
    "save_total_limit",
    "save_only_model",
    "warmup_steps",
    "resume_from_checkpoint",
    "output_dir",
}
EXEMPT = {
    "recipes.pretrain": {
        f"--{f.name}": "a TrainingArguments flag the recipes pass to transformers, which parses "
        "and checks it (the ones the recipes check have rows)"
        for f in dataclasses.fields(TrainingArguments)
        if f.name not in TRAINING_ARGUMENTS_CHECKED
    },
}
EXEMPT["recipes.pretrain"].update(
    {
        "--data_cache_dir": "a file there is H2's row (issue 24 point 6); any folder path is valid",
        **{
            f"--{name}": "a CPT setting: refused outside CPT (the --keep_optimizer_state and --lora_rank rows), its "
            "values checked in recipes.cpt's rows"
            for name in CPT_SETTINGS
            if name not in ("cpt", "keep_optimizer_state", "lora_rank")
        },
    }
)
EXEMPT["pretraining.heldout"] = {
    "--cache_dir": "a file there is H2's kind of row (output paths that are files, issue 24 point 6)",
    "--output": "the CSV to write; an existing file is replaced (left to the lead: issue 24 point 1, overwrites)",
}
EXEMPT["model_cards.generate"] = {
    "--repo_id": "H2's rows (issue 24 point 5)",
    "--output": "H2's rows (issue 24 point 6: an --output folder)",
    "--force": "a switch: no value to get wrong",
}
EXEMPT["model_cards.push"] = {
    "--retries": "H2's rows (issue 24 point 5)",
    "--dry_run": "H2's rows (issue 24 point 6: a file)",
}
EXEMPT["modeling_eurobert.export_native"] = {"--bidirectional": "a switch: no value to get wrong"}
EXEMPT["evaluation.run"] = {
    "--rerun_changed": "a switch: no value to get wrong",
    "--query_prompt": "any text is a prompt",
    "--document_prompt": "any text is a prompt",
    "--scratch_dir": "a file there is H2's kind of row (output paths that are files)",
}
EXEMPT["evaluation.mteb"] = {
    "--rerun_changed": "a switch: no value to get wrong",
    "--query_prompt": "any text is a prompt",
    "--document_prompt": "any text is a prompt",
    "--output": "H2's rows (issue 24 point 6: an --output that is a file)",
}
EXEMPT["analysis.report"] = {
    "--bootstrap": "a switch: no value to get wrong",
    "--output": "H2's rows (issue 24 point 6) and tests/test_report.py (foreign files)",
    "--compare": "needs results: tests/test_report.py refuses A,A and unknown names",
}
EXEMPT["recipes.manifest"] = {"--list": "a switch: no value to get wrong"}
EXEMPT["analysis.import_encodeval"] = {
    "--models": "tests/test_import_encodeval.py (a subset that matches nothing)",
    "--datasets": "tests/test_import_encodeval.py (a subset that matches nothing)",
}
EXEMPT["recipes.study"] = {"--docs": "H2's rows (issue 24 point 4: --docs FILE)"}
EXEMPT["recipes.cpt"] = {
    **EXEMPT["recipes.pretrain"],
    **{
        f"--{f.name}": "parsed and checked as in recipes.pretrain (the same settings and main, cpt: true)"
        for f in dataclasses.fields(PretrainArguments)
    },
    **{f"--{name}": "parsed and checked as in recipes.pretrain (the same main)" for name in TRAINING_ARGUMENTS_CHECKED},
}
EXEMPT["recipes.cpt"].pop("--objective")


class _Parsed(Exception):
    """Raised by the first parse of a CLI's parser in `cli_flags`, carrying the parser."""


def cli_flags(module: str, monkeypatch) -> dict[str, set[str]]:
    """The settings of a CLI's parser as its main builds it: {name: the flags that set it} (a positional: {name:
    {"<dest>"}}; `--x` and HfArgumentParser's `--no_x` set one); a sub-command's are prefixed with its name
    (`evaluation --tasks`)."""

    def parsed(parser, *args, **kwargs):
        raise _Parsed(parser)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", parsed)
        with pytest.raises(_Parsed) as caught:
            importlib.import_module(module).main(["--help"])
    settings = {}

    def walk(parser, prefix=""):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix}{name} ")
            elif not isinstance(action, argparse._HelpAction):
                flags = set(action.option_strings) or {f"<{action.dest}>"}
                settings.setdefault(prefix + action.dest, set()).update(prefix + flag for flag in flags)

    walk(caught.value.args[0])
    return settings


def _all_rows() -> dict[str, list[tuple[list[str], str]]]:
    """Every row of this file, per CLI module: the tables here and any other module-level `*ROWS` constant
    ((main, argv, fragment) lists, as the first table)."""
    rows = {}
    for name, value in globals().items():
        if not name.endswith("ROWS"):
            continue
        entries = (
            value.items()
            if isinstance(value, dict)
            else [(row[0].__module__, [row[1:]]) for row in value if callable(row[0])]
        )
        for module, module_rows in entries:
            rows.setdefault(module, []).extend(module_rows)
    return rows


def _placeholders(tmp_path, model_dir) -> dict:
    task = {
        "family": "sc",
        "metric": "accuracy",
        "budget": {"max_steps": 1},
        "labels": ["negative", "positive"],
        "offline": {
            "format": "tsv",
            "files": {"train": "sc/sst2/dev.tsv", "test": "sc/sst2/dev.tsv"},
            "columns": {"text": "sentence", "label": "label"},
            "label_values": ["0", "1"],
        },
    }
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "task.yaml").write_text(yaml.safe_dump({"name": "dup", **task}))
    (tmp_path / "escaped.yaml").write_text(yaml.safe_dump({"name": "../../escaped", **task}))
    (tmp_path / "bad.yaml").write_text("name: t\nfamily: [sc\n")
    (tmp_path / "dupkey.yaml").write_text("name: first\n" + yaml.safe_dump({"name": "second", **task}))
    (tmp_path / "negbudget.yaml").write_text(yaml.safe_dump({"name": "neg", **task, "budget": {"max_steps": -1}}))
    (tmp_path / "dupcfg.yaml").write_text("objective: mlm\narchitecture: tiny\nobjective: clm\n")
    (tmp_path / "file.txt").write_text("a plain file\n")
    (tmp_path / "gguf").mkdir()  # a GGUF release unpacked
    (tmp_path / "gguf" / "model.Q4_1.gguf").write_bytes(b"GGUF")
    (tmp_path / "configonly").mkdir()
    (tmp_path / "configonly" / "config.json").write_text('{"model_type": "llama", "max_position_embeddings": 128}')
    (tmp_path / "runs" / "my-decoder-cpt").mkdir(parents=True)
    (tmp_path / "llama").mkdir()  # an unconverted decoder: its config.json says so
    (tmp_path / "llama" / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "architectures": ["LlamaForCausalLM"],
                "vocab_size": 99,
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 37,
            }
        )
    )
    (tmp_path / "llama" / "model.safetensors").write_bytes(b"")  # its weights (only their presence is read first)
    return {
        "{out}": str(tmp_path / "out"),
        "{tmp}": str(tmp_path),
        "{file}": str(tmp_path / "file.txt"),
        "{repo}": str(REPO_ROOT),
        "{model}": str(model_dir),
        "{dup_a}": str(tmp_path / "a" / "task.yaml"),
        "{dup_b}": str(tmp_path / "b" / "task.yaml"),
        "{bad_yaml}": str(tmp_path / "bad.yaml"),
        "{escaped}": str(tmp_path / "escaped.yaml"),
        "{dupkey}": str(tmp_path / "dupkey.yaml"),
        "{negbudget}": str(tmp_path / "negbudget.yaml"),
        "{dupcfg}": str(tmp_path / "dupcfg.yaml"),
        "{noid}": str(tmp_path / "noid"),
        "{study}": str(tmp_path / "study"),
        "{configonly}": str(tmp_path / "configonly"),
        "{badinfo}": str(tmp_path / "badinfo"),
    }


def _write_noid(tmp_path) -> None:
    """{noid}: a results folder whose one result file has no identity (written for the rows that name it only)."""
    noid = store.result_path(tmp_path / "noid", "m", "sst2", 1e-5, 0)
    noid.parent.mkdir(parents=True)
    noid.write_text(
        json.dumps(
            {
                "format": store.RESULT_FORMAT,
                "model": "m",
                "task": "sst2",
                "family": "sc",
                "lr": 1e-5,
                "seed": 0,
                "status": "ok",
                "main_metric": "accuracy",
                "validation": {"accuracy": 0.5},
                "test": {"accuracy": 0.5},
            }
        )
    )


def _write_study(tmp_path) -> None:
    """{study}: a smoke study's folder (study.json) whose results folder holds a result of a model not its own."""
    artifacts.write_json_atomic(
        tmp_path / "study" / "study.json",
        {
            "format": run_folders.STUDY_FORMAT,
            "study": "smoke",
            "definition": {"scale": "smoke", "models": ["610m-clm-42k"]},
        },
    )
    record = {
        "format": store.RESULT_FORMAT,
        "model": "my-encoder",
        "task": "sst2",
        "family": "sc",
        "lr": 1e-5,
        "seed": 0,
        "status": "ok",
        "main_metric": "accuracy",
        "validation": {"accuracy": 0.5},
        "test": {"accuracy": 0.5},
        "per_instance": {"test": [{"accuracy": 0.5}]},
        "identity": {"model": {"config": "m"}},
    }
    path = store.result_path(tmp_path / "study" / "results", "my-encoder", "sst2", 1e-5, 0)
    artifacts.write_json_atomic(path, record)


def _write_badinfo(tmp_path, model_dir) -> None:
    """{badinfo}: a CPT base (the tiny model) whose run_info.json says tokens_seen -5 and parameters "lots"."""
    import shutil

    shutil.copytree(model_dir, tmp_path / "badinfo")
    info = dict.fromkeys(run_folders.RUN_INFO_KEYS) | {"format": run_folders.RUN_INFO_FORMAT, "name": "badinfo"}
    info |= {"steps": 20, "tokens_seen": -5, "tokens_before_cpt": 0, "parameters": "lots"}
    artifacts.write_json_atomic(tmp_path / "badinfo" / run_folders.RUN_INFO_NAME, info)


def _listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.stat().st_size if p.is_file() else None for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, data_dir):
    from tests.fixtures.tiny_models import build_tiny_eurobert, build_tiny_tokenizer

    return build_tiny_eurobert(tmp_path_factory.mktemp("tiny") / "model", build_tiny_tokenizer(data_dir, 300))


@pytest.mark.parametrize(
    "module, argv, fragment",
    [(m, a, f) for m, rows in CLI_ROWS.items() for a, f in rows],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v if "." in v else None,
)
def test_every_cli_refuses_bad_input_in_one_line_before_writing(
    module, argv, fragment, request, tmp_path, monkeypatch, capsys
):
    uses_model = any("{model}" in a or "{badinfo}" in a for a in argv)
    model_dir = request.getfixturevalue("tiny_model") if uses_model else tmp_path / "none"
    values = _placeholders(tmp_path, model_dir)
    monkeypatch.chdir(tmp_path)
    if any("{noid}" in a for a in argv):
        _write_noid(tmp_path)
    if any("{study}" in a for a in argv):
        _write_study(tmp_path)
    if any("{badinfo}" in a for a in argv):
        _write_badinfo(tmp_path, model_dir)
    before = _listing(tmp_path)
    argv = [functools.reduce(lambda text, key: text.replace(key, values[key]), values, a) for a in argv]
    with pytest.raises(SystemExit) as refused:
        importlib.import_module(module).main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert refused.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert functools.reduce(lambda text, key: text.replace(key, values[key]), values, fragment) in lines[0]
    assert _listing(tmp_path) == before


LIGHT_CHECK = """
import importlib
import sys
try:
    importlib.import_module(sys.argv[1]).main(sys.argv[2:])
except SystemExit as refused:
    print(refused.code, sorted(name for name in ("torch", "datasets", "sentence_transformers", "mteb")
                               if name in sys.modules))
"""
UNKNOWN_SST = "error: unknown task 'sst-2'; known tasks: {} (or pass a task YAML path)"
# (command, bad argv, its error line; {tmp} the folder it runs in, {repo} the repository)
LIGHT_REFUSALS = [
    ("evaluation.run", ["--model", "x", "--tasks", "sst-2", "--output", "out"], UNKNOWN_SST),
    ("evaluation.run", ["--model", "runs/my-decoder-cp", "--tasks", "sst2", "--output", "out"], f"error: model {TYPO}"),
    ("evaluation.mteb", ["--model", "runs/my-decoder-cp", "--tasks", "scifact", "--output", "out"], None),
    ("evaluation.inspect", ["--model", "x", "--task", "sst-2"], UNKNOWN_SST),
    (
        "pretraining.heldout",
        [
            "--model",
            "runs/my-decoder-cp",
            "--tokenizer",
            "runs/my-decoder-cpt",
            "--block_size",
            "8",
            "--output",
            "out/heldout.csv",
        ],
        f"error: --model {TYPO}",
    ),
    ("model_cards.generate", ["--summary", "summary.csv"], None),
    ("model_cards.push", ["runs/my-decoder-cp", "--repo_id", "org/name", "--dry_run", "out"], None),
    ("recipes.real_models", ["--output", "out", "--models", "nope"], None),
    ("recipes.study", ["real-decoder", "--output", "out", "--decoder", "runs/my-decoder-cp"], None),
    ("modeling_eurobert.convert", ["runs/my-decoder-cp", "out"], f"error: SOURCE {TYPO}"),
    (
        "modeling_eurobert.convert",
        ["runs/my-decoder-cpt", "out", "--mask_token", " "],
        "error: --mask_token ' ' is empty: pass a special or reserved token or a new one (default <|mask|>)",
    ),
    ("modeling_eurobert.export_native", ["runs/my-decoder-cp", "out"], f"error: CHECKPOINT {TYPO}"),
    (
        "recipes.pretrain",
        ["--config", "recipes/configs/debug.yaml", "--output_dir", "out"],
        "error: config file recipes/configs/debug.yaml does not exist (relative to the current folder {tmp}); the "
        "recipe's own config is {repo}/recipes/configs/debug.yaml: pass that path",
    ),
    (
        "recipes.pretrain",
        [
            "--config",
            f"{REPO_ROOT}/recipes/configs/debug.yaml",
            "--output_dir",
            "out",
            "--resume_from_checkpoint",
            "runs/my-decoder-cp",
        ],
        f"error: --resume_from_checkpoint {TYPO}",
    ),
    (
        "recipes.cpt",
        [
            "--config",
            f"{REPO_ROOT}/recipes/configs/cpt-debug.yaml",
            "--output_dir",
            "out",
            "--model_name_or_path",
            "runs/my-decoder-cp",
        ],
        f"error: model_name_or_path {TYPO}",
    ),
    ("recipes.prepare_data", ["evaluation", "--tasks", "sst-2"], UNKNOWN_SST),
    (
        "recipes.prepare_data",
        [
            "pretraining",
            "--config",
            f"{REPO_ROOT}/recipes/configs/debug.yaml",
            "--tokenizer_name_or_path",
            "runs/my-decoder-cp",
        ],
        f"error: tokenizer_name_or_path {TYPO}",
    ),
]


@pytest.mark.parametrize(
    "command, argv, line", LIGHT_REFUSALS, ids=[f"{c}-{i}" for i, (c, *_) in enumerate(LIGHT_REFUSALS)]
)
def test_clis_refuse_bad_input_before_loading_torch(command, argv, line, tmp_path):
    """Issue 46 item 4: the command lines imported torch, the Trainer, datasets or mteb before checking their
    arguments (80 to 106 s to the error line on a busy machine); the flags, task names and paths are checked first, in
    a fresh process with none of them loaded: exit 2, one line."""
    (tmp_path / "runs" / "my-decoder-cpt").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "HF_TOKEN": ""}
    done = subprocess.run(
        [sys.executable, "-c", LIGHT_CHECK, command, *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    if line is not None:
        assert lines[0] == line.format(", ".join(tasks.list_tasks()), tmp=tmp_path, repo=REPO_ROOT)
    assert not (tmp_path / "out").exists()


def test_every_flag_of_every_cli_has_a_bad_input_row_or_a_reason(monkeypatch):
    rows = _all_rows()
    missing = {}
    for module in CLIS:
        covered = {arg.split("=")[0] for argv, _ in rows.get(module, []) for arg in argv if arg.startswith("--")}
        covered |= {f"<{dest}>" for dest in POSITIONALS.get(module, ())} | set(EXEMPT.get(module, {}))
        uncovered = sorted(
            max(flags)
            for flags in cli_flags(module, monkeypatch).values()
            if not {flag.split(" ")[-1] for flag in flags} & covered and not flags & covered
        )
        if uncovered:
            missing[module] = uncovered
    assert not missing, f"flags without a bad-input row in tests/test_bad_inputs.py (or a reason in EXEMPT): {missing}"


def test_every_command_line_of_the_project_has_a_table():
    """A module of the installed packages with a `main(argv)` is a command line (`python -m ...`): it needs its table
    (bench/ holds developer benchmarks, not shipped: pyproject's packages leave it out; a library module whose main
    only names the real command, `cli.not_a_command`, has its row among the writers')."""
    sources = {
        ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts): path.read_text(encoding="utf-8")
        for package in ("core", "pretraining", "recipes", "evaluation", "analysis", "model_cards", "modeling_eurobert")
        for path in (REPO_ROOT / package).glob("*.py")
    }
    modules = {m for m, text in sources.items() if "\ndef main(" in text and "cli.not_a_command(" not in text}
    # the training loop's main is run by the command recipes/pretrain.py (and, with cpt: true, recipes/cpt.py)
    assert "from pretraining.pretrain import main as run\n" in sources["recipes.pretrain"]
    assert modules - {"pretraining.pretrain"} == set(CLIS)


# ------------------------------------------------------------------------------------------------------------------
# Writers, models and plans (issue 24, points 4-6): placeholders name prepared inputs (the `inputs` fixture): {file}
# an existing file, {dir} an existing empty folder, {ckpt} a complete small checkpoint, {trunc} one whose
# model.safetensors is truncated ({trunc_llama}: a Llama one), {badtok} / {badcfg} one whose tokenizer.json /
# config.json is corrupt ({badtok_llama}: a Llama one with a corrupt tokenizer.json), {badyaml} a recipe YAML that is
# not UTF-8. Nothing under the test's folders may change.
# ------------------------------------------------------------------------------------------------------------------
def _writer_rows():
    from evaluation import inspect
    from model_cards import generate, push
    from modeling_eurobert import convert, export_native
    from pretraining import heldout, pretrain
    from recipes import launch, plan, prepare_data, study

    debug = ["--config", str(REPO_ROOT / "recipes" / "configs" / "debug.yaml")]
    return [
        (inspect.main, ["--model", "{ckpt}", "--task", "sst2", "--max_length", "0"], "--max_length"),
        (inspect.main, ["--model", "{badtok}", "--task", "sst2"], "tokenizer.json"),
        (inspect.main, ["--model", "{badcfg}", "--task", "sst2"], "config.json"),
        (generate.main, ["{ckpt}", "--repo_id", "org/bad repo id!!", "--output", "{out}"], "refused by the Hub"),
        (generate.main, ["{ckpt}", "--output", "{dir}"], "is a directory"),
        (generate.main, ["{ckpt}", "--output", "{file}/README.md"], "is a file"),
        (generate.main, ["{trunc}", "--output", "{out}"], "truncated or corrupt"),
        (push.main, ["{ckpt}", "--repo_id", "org/m", "--dry_run", "{out}", "--retries=-1"], "--retries"),
        (push.main, ["{ckpt}", "--repo_id", "org/m", "--dry_run", "{file}"], "--dry_run"),
        (push.main, ["{trunc}", "--repo_id", "org/m", "--dry_run", "{out}"], "truncated or corrupt"),
        (export_native.main, ["{trunc}", "{out}"], "truncated or corrupt"),
        (convert.main, ["{trunc_llama}", "{out}"], "truncated or corrupt"),
        (convert.main, ["{badtok_llama}", "{out}"], "badtok_llama/tokenizer.json is not valid JSON"),
        (convert.main, ["{badcfg}", "{out}"], "badcfg/config.json is not valid JSON"),
        (plan.main, [], "python -m recipes.study paper"),
        (launch.main, [], "python -m recipes.study paper"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--block_size", "0"], "block_size"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--block_size=-5"], "block_size"),
        (pretrain.main, [*debug, "--output_dir", "{file}"], "output_dir"),
        (pretrain.main, [*debug, "--output_dir", "{out}", "--data_cache_dir", "{file}"], "data_cache_dir"),
        (pretrain.main, ["--config", "{badyaml}", "--output_dir", "{out}"], "not valid YAML"),
        (prepare_data.main, ["pretraining", *debug, "--block_size=-5", "--data_cache_dir", "{out}"], "block_size"),
        (
            heldout.main,
            ["--model", "{ckpt}", "--tokenizer", "{ckpt}", "--block_size", "0", "--output", "{out}"],
            "--block_size",
        ),
        (study.main, ["smoke", "--output", "{file}"], "--output"),
        # R5 and issue 43: a LoRA run's checkpoint-N (adapters, for resuming) is no model to describe, evaluate,
        # score or export (a card was written for it; OSError tracebacks; "causal, pass --bidirectional")
        *[
            (main, argv, "lora holds LoRA adapters (adapter_config.json), not a loadable model")
            for main, argv in (
                (generate.main, ["{lora}", "--force"]),
                (push.main, ["{lora}", "--repo_id", "org/m", "--dry_run", "{out}"]),
                (
                    grid.main,
                    ["--model", "{lora}", "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0", "--output", "{out}"],
                ),
                (
                    heldout.main,
                    ["--model", "{lora}", "--tokenizer", "{ckpt}", "--block_size", "8", "--output", "{out}/loss.csv"],
                ),
                (export_native.main, ["{lora}", "{out}"]),
            )
        ],
        (
            push.main,
            ["{noinfo}", "--repo_id", "org/m", "--dry_run", "{out}"],  # said "save it with save_pretrained"
            "has no run_info.json, which this project's pretraining runs write beside every checkpoint",
        ),
        (study.main, ["smoke", "--output", "{out}", "--docs", "{file}"], "--docs"),
    ]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    import shutil

    from transformers import LlamaConfig

    from modeling_eurobert import load_architecture
    from tests.test_model_cards import make_checkpoint

    root = tmp_path_factory.mktemp("bad-inputs")
    (root / "file").write_text("a user's file\n")
    (root / "dir").mkdir()
    paths = {"file": root / "file", "dir": root / "dir", "ckpt": make_checkpoint(root / "ckpt", "610m-mlm40-42k")}
    for name in ("trunc", "badtok", "badcfg"):
        paths[name] = make_checkpoint(root / name, "610m-mlm40-42k")
    config = load_architecture(
        "tiny", vocab_size=99, bos_token_id=1, eos_token_id=2, mask_token_id=3, pad_token_id=0
    ).to_dict()
    (paths["trunc"] / "config.json").write_text(json.dumps({**config, "architectures": ["EuroBertClmMlmForMaskedLM"]}))
    weights = paths["trunc"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    paths["trunc_llama"] = shutil.copytree(paths["trunc"], root / "trunc_llama")
    llama = LlamaConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=37,
        bos_token_id=1,
        eos_token_id=2,
    )
    (paths["trunc_llama"] / "config.json").write_text(llama.to_json_string())
    (paths["badtok"] / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    (paths["badcfg"] / "config.json").write_text('{"model_type": ')
    paths["badtok_llama"] = shutil.copytree(paths["badtok"], root / "badtok_llama")
    (paths["badtok_llama"] / "config.json").write_text(llama.to_json_string())
    paths["lora"] = make_checkpoint(root / "lora", "610m-mlm40-42k")  # a LoRA run's checkpoint-N: its adapters
    (paths["lora"] / "adapter_model.safetensors").write_bytes((paths["lora"] / "model.safetensors").read_bytes())
    (paths["lora"] / "adapter_config.json").write_text("{}")
    paths["noinfo"] = make_checkpoint(root / "noinfo", "610m-mlm40-42k")  # as a converted decoder: no run_info.json
    (paths["noinfo"] / "run_info.json").unlink()
    paths["badyaml"] = root / "bad.yaml"
    paths["badyaml"].write_bytes(b"objective: mlm\nname: \xff\xfe\n")
    return paths


def _tree(*roots) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for root in roots for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(
    "index", range(len(_writer_rows())), ids=lambda i: f"{i}-{_writer_rows()[i][0].__module__}-{_writer_rows()[i][2]}"
)
def test_writer_bad_input_is_one_line_exit_2_and_writes_nothing(index, inputs, tmp_path, capsys, monkeypatch):
    main, argv, fragment = _writer_rows()[index]
    monkeypatch.setenv("HF_TOKEN", "")  # push without --dry_run would need one; every row here is refused first
    out = tmp_path / "out"
    values = {**{k: str(v) for k, v in inputs.items()}, "out": str(out)}
    before = _tree(inputs["file"].parent, tmp_path)
    with pytest.raises(BadInput) as refused:
        main([a.format(**values) for a in argv])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists() and _tree(inputs["file"].parent, tmp_path) == before


def _unwritable_rows():
    from analysis import report
    from model_cards import generate, push
    from modeling_eurobert import convert, export_native
    from pretraining import heldout

    return [
        (grid.main, ["--model", "{ckpt}", "--tasks", "sst2", "--lrs", "1e-3", "--seeds", "0", "--output", "{ro}/r"]),
        (report.main, ["{dir}", "--output", "{ro}/report"]),
        (
            heldout.main,
            ["--model", "{ckpt}", "--tokenizer", "{ckpt}", "--block_size", "16", "--output", "{ro}/loss.csv"],
        ),
        (convert.main, ["{ckpt}", "{ro}/converted"]),
        (export_native.main, ["{ckpt}", "{ro}/native"]),
        (generate.main, ["{ckpt}", "--output", "{ro}/README.md"]),
        (push.main, ["{ckpt}", "--repo_id", "org/m", "--dry_run", "{ro}/dry"]),
    ]


@pytest.mark.parametrize("kind", ["read_only", "under_a_file"])
@pytest.mark.parametrize("index", range(len(_unwritable_rows())), ids=lambda i: _unwritable_rows()[i][0].__module__)
def test_an_output_that_cannot_be_written_is_one_line_naming_it(index, kind, inputs, tmp_path, capsys, monkeypatch):
    """Issue 35: a read-only output folder (chmod 0555; as root, where chmod does not bind, a path under a file)
    gave an OSError traceback in the grid, report, heldout, convert, export_native, generate and push."""
    import os

    if kind == "read_only" and os.geteuid() == 0:
        pytest.skip("root writes into a chmod 0555 folder: the under_a_file case covers root")
    main, argv = _unwritable_rows()[index]
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.chdir(tmp_path)
    ro = tmp_path / "ro"
    if kind == "read_only":
        ro.mkdir()
        ro.chmod(0o555)
    else:
        ro.write_text("a user's file\n")
    values = {**{k: str(v) for k, v in inputs.items()}, "ro": str(ro)}
    before = _tree(inputs["file"].parent, tmp_path)
    try:
        with pytest.raises(BadInput) as refused:
            main([a.format(**values) for a in argv])
    finally:
        ro.chmod(0o755)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and str(ro) in lines[0] and "Traceback" not in err, err
    assert ("not writable" if kind == "read_only" else "is a file") in lines[0], lines[0]
    assert _tree(inputs["file"].parent, tmp_path) == before


# Task files a loader cannot read exactly as written (issue 54): (the task YAML's fields, the text of its one data
# file `data.txt`, a fragment of the one-line refusal naming the file and line); the grid runs `--tasks <yaml>`.
_SC = {"family": "sc", "metric": "accuracy", "labels": ["a", "b"], "budget": {"max_steps": 1}}
_TC = {"family": "tc", "metric": "entity_f1", "labels": ["O", "B-LOC", "I-LOC"], "budget": {"max_steps": 1}}
_FILES = {"root": ".", "files": {"train": "data.txt", "test": "data.txt"}}
LOADER_CASES = {
    "tsv row with a tab inside a field": (
        {**_SC, "offline": {"format": "tsv", "columns": {"label": "label", "text": "text"}, **_FILES}},
        "label\ttext\n" + "a\tfine\n" * 40 + "b\ta tab\tinside\n",
        "data.txt: line 42 has 3 tab-separated cells, line 1 (the header) 2: a tab inside a field",
    ),
    "conll token holding a space, whitespace separator": (
        {**_TC, "tc_labelling": "all", "offline": {"format": "conll", **_FILES}},
        "I\tO\nlove\tO\n\n" * 20 + "New York\tB-LOC\n",
        "data.txt: line 61 ('New York\\tB-LOC') has 2 tab-separated cells but 3 whitespace-separated columns: a "
        'token or tag holds a space; set offline.separator: "\\t"',
    ),
    "conll sent_id line, whitespace separator": (
        {**_TC, "tc_labelling": "all", "offline": {"format": "conll", **_FILES}},
        "# sent_id = 1\nParis B-LOC\n",
        "data.txt: line 2 ('Paris B-LOC') has 2 columns, line 1 4: a comment line? set offline.comment_prefix",
    ),
    "tc task without tc_labelling": (
        {**_TC, "offline": {"format": "conll", **_FILES}},
        "Paris B-LOC\n",
        "task.yaml: a tc task needs `tc_labelling`: all (the paper's",
    ),
}


@pytest.mark.parametrize("case", LOADER_CASES)
def test_a_task_file_not_read_as_written_is_refused_in_one_line_naming_file_and_line(
    case, tiny_model, tmp_path, capsys
):
    fields, text, fragment = LOADER_CASES[case]
    (tmp_path / "data.txt").write_text(text)
    (tmp_path / "task.yaml").write_text(yaml.safe_dump({"name": "loader_case", **fields}))
    before = _listing(tmp_path)
    argv = ["--model", str(tiny_model), "--tasks", str(tmp_path / "task.yaml"), "--lrs", "1e-3", "--seeds", "0"]
    with pytest.raises(BadInput) as refused:
        grid.main([*argv, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert refused.value.code == 2 and len(lines) == 1 and fragment in lines[0] and "Traceback" not in err, err
    assert _listing(tmp_path) == before


def test_list_settings_take_comma_lists_and_a_model_path_may_hold_a_comma(tmp_path):
    """The project's list convention (core/cli.py) for pretraining's list settings, and `--model` naming a folder
    whose name holds a comma (it exists as a whole; NAME=DIR too)."""
    from core import cli
    from pretraining.pretrain import make_parser

    debug = ["--config", str(REPO_ROOT / "recipes" / "configs" / "debug.yaml"), "--output_dir", str(tmp_path / "o")]
    run_args, _ = make_parser().parse_args_and_config(
        [*debug, "--intermediate_steps", "5,10", "--decay_branches=18,20"]
    )
    assert (run_args.intermediate_steps, run_args.decay_branches) == ([5, 10], [18, 20])
    cpt = [*debug, "--architecture", "none", "--model_name_or_path", "x", "--switch_step", "none", "--lora", "true"]
    run_args, _ = make_parser(cpt=True).parse_args_and_config([*cpt, "--lora_target_modules", "q_proj,v_proj"])
    assert run_args.lora_target_modules == ["q_proj", "v_proj"]
    (tmp_path / "bs8,lr1e-4").mkdir()
    comma = str(tmp_path / "bs8,lr1e-4")
    assert cli.split_paths(f"{comma},org/m") == [comma, "org/m"]
    assert cli.split_paths(f"a=org/m, b={comma}") == ["a=org/m", f"b={comma}"]
    assert cli.split_paths(f"{tmp_path}/x,y") == [f"{tmp_path}/x", "y"]  # no such folder: two entries


def test_second_study_on_one_output_is_refused_naming_the_lock_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    """One study process per --output: a second is refused in one line naming the lock (nothing written); the lock
    dies with its process, so one left by a killed study (its pid still in the file) does not block the next."""
    import subprocess
    import sys

    from core import artifacts
    from recipes import study

    output = tmp_path / "study"
    with artifacts.exclusive_lock(output / study.STUDY_LOCK, "a running study"):
        with pytest.raises(BadInput) as refused:
            study.main(["smoke", "--output", str(output)])
    assert refused.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and f"lock {output / study.STUDY_LOCK}" in err[0], err
    assert [p.name for p in output.iterdir()] == [study.STUDY_LOCK]  # no study.json: nothing started
    held = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, fcntl; f = open(sys.argv[1], 'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX); f.write('123'); f.flush(); import os; os._exit(9)",
            str(output / study.STUDY_LOCK),
        ],
        timeout=60,
    )
    assert held.returncode == 9  # died holding the lock
    with study.study_lock(output):  # taken over
        assert (output / study.STUDY_LOCK).read_text().strip() == str(__import__("os").getpid())
