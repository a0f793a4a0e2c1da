"""The pretraining recipe end to end on the tiny architecture: objectives, PFS, decay branches, CPT, outputs, bad
input."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForMaskedLM

from core import model_folders, paths, run_folders
from evaluation import finetune_args
from pretraining import data, pretrain
from pretraining.checks import check_run_settings
from pretraining.trainer import build_model
from recipes import cpt, manifest
from tests.fixtures.file_modes import not_following_umask

DEBUG = "recipes/configs/debug.yaml"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "pretrain-cache"  # shared by every recipe test of the session


def parse(output_dir, cache_dir, *extra, parser=None):
    """Run settings + TrainingArguments as the CLI builds them: debug.yaml, then overrides."""
    argv = [
        "--config",
        DEBUG,
        "--output_dir",
        str(output_dir),
        "--data_cache_dir",
        str(cache_dir),
        "--max_docs",
        "200",
        "--block_size",
        "64",
        "--per_device_train_batch_size",
        "2",
        "--report_to",
        "none",
        "--intermediate_steps",
        "2",
        "--switch_step",
        "2",
        "--max_steps",
        "4",
        "--warmup_steps",
        "1",
        "--logging_steps",
        "1",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 1, "decay_type": "linear"}',
        *extra,
    ]
    return (parser or pretrain.make_parser()).parse_args_and_config(argv)


def block_order(output_dir):
    """{step: (is_causal, block indices)} from the audit log (last record per step wins, as after a resume)."""
    records = [json.loads(line) for line in (Path(output_dir) / "block_order-rank0.jsonl").read_text().splitlines()]
    return {r["step"]: (r["causal"], r["blocks"]) for r in records}


def weights(directory):
    return load_file(str(Path(directory) / "model.safetensors"))


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory, cache_dir):
    """CLM, MLM and PFS (switch at 2, optimizer reset) runs of 4 steps on the same blocks."""
    root = tmp_path_factory.mktemp("objectives")
    runs = {}
    for name, extra in {
        "clm": ["--objective", "clm", "--switch_step", "null"],
        "mlm": ["--objective", "mlm", "--switch_step", "null"],
        "pfs": ["--objective", "mlm", "--reset_optimizer_at_switch", "true"],
    }.items():
        run_args, training_args = parse(root / name, cache_dir, "--log_block_order", "true", *extra)
        runs[name] = (run_args, training_args, pretrain.pretrain(run_args, training_args))
    return runs


def test_objectives_read_the_same_blocks_in_the_same_order(three_runs):
    orders = {name: block_order(args[1].output_dir) for name, args in three_runs.items()}
    blocks = {name: [order[s][1] for s in range(1, 5)] for name, order in orders.items()}
    assert blocks["clm"] == blocks["mlm"] == blocks["pfs"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [orders["pfs"][s][0] for s in range(1, 5)] == [True, True, False, False]  # CLM, CLM, then MLM
    assert all(orders["clm"][s][0] for s in range(1, 5)) and not any(orders["mlm"][s][0] for s in range(1, 5))


def test_pfs_clm_phase_is_bit_identical_to_a_clm_run(three_runs):
    clm = weights(Path(three_runs["clm"][1].output_dir) / "intermediate" / "step-2")
    pfs = weights(Path(three_runs["pfs"][1].output_dir) / "intermediate" / "step-2")
    assert all(torch.equal(clm[k], pfs[k]) for k in clm)
    final_clm, final_pfs = weights(three_runs["clm"][1].output_dir), weights(three_runs["pfs"][1].output_dir)
    assert not torch.equal(final_clm["lm_head.weight"], final_pfs["lm_head.weight"])  # MLM steps changed it


def test_pfs_optimizer_reset_restarts_adam_steps(three_runs):
    trainer = three_runs["pfs"][2]
    steps = {float(state["step"]) for state in trainer.optimizer.state.values()}
    assert steps == {2.0}  # 4 steps, reset before step 3
    steps = {float(state["step"]) for state in three_runs["mlm"][2].optimizer.state.values()}
    assert steps == {4.0}


@pytest.mark.parametrize("name", ["clm", "mlm", "pfs"])
def test_run_trains_every_parameter_and_reloads(three_runs, name):
    run_args, training_args, trainer = three_runs[name]
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert losses and all(torch.isfinite(torch.tensor(losses)))
    tokenizer = trainer.processing_class
    initial = build_model(run_args, tokenizer, training_args.seed).state_dict()
    trained = {k: v.detach() for k, v in trainer.model.state_dict().items()}
    unchanged = [k for k in initial if torch.equal(initial[k], trained[k])]
    assert not unchanged, f"parameters never updated: {unchanged}"
    for directory in (
        training_args.output_dir,
        f"{training_args.output_dir}/checkpoint-4",
        f"{training_args.output_dir}/intermediate/step-2",
    ):
        reloaded = AutoModelForMaskedLM.from_pretrained(directory, trust_remote_code=True)
        assert (Path(directory) / "tokenizer.json").is_file()
        info = json.loads((Path(directory) / "run_info.json").read_text())
        assert info["objective"] == run_args.objective and info["data"]["fingerprint"]
        assert set(info) >= {
            "name",
            "size",
            "mlm_probability",
            "steps",
            "switch_step",
            "cpt_base",
            "scale",
            "run_config",
            "training_args",
            "versions",
            "git_commit",
            "tokens_seen",
        }
    reloaded = AutoModelForMaskedLM.from_pretrained(training_args.output_dir, trust_remote_code=True).state_dict()
    assert all(torch.equal(reloaded[k], trained[k]) for k in trained)
    assert trainer.model.config.is_causal == (name == "clm")  # saved default attention follows the last objective
    info = json.loads((Path(training_args.output_dir) / "run_info.json").read_text())
    assert info["steps"] == 4 and info["tokens_seen"] == 4 * 2 * 64 and info["size"] == "tiny"
    assert info["tokens_before_cpt"] == 0  # from scratch
    encoder = AutoModel.from_pretrained(training_args.output_dir, trust_remote_code=True)  # the head-less encoder
    assert info["parameters"] == {
        "total": sum(p.numel() for p in encoder.parameters()),
        "input_embedding": encoder.get_input_embeddings().weight.numel(),
    }
    # R4: the run, its checkpoint-4 and its intermediate step-2, weights included, follow the umask (were 0600)
    assert not_following_umask(training_args.output_dir) == []


def test_decay_branch_of_the_stable_run(tmp_path, cache_dir):
    """Stable run (6 steps, 2-step decay, branches at 4 and 6 -> checkpoints 2 and 4); a 4-step branch decays from
    step 2, and the 6-step branch re-creates the stable run's own end bit for bit."""
    common = [
        "--switch_step",
        "null",
        "--intermediate_steps",
        "3",
        "--lr_scheduler_kwargs",
        '{"num_decay_steps": 2, "decay_type": "linear"}',
    ]
    stable = pretrain.pretrain(
        *parse(tmp_path / "stable", cache_dir, "--max_steps", "6", "--decay_branches", "4", "6", *common)
    )
    assert (tmp_path / "stable" / "checkpoint-2" / "optimizer.pt").is_file()
    branch_from = ["--branch_from", str(tmp_path / "stable")]
    branch = pretrain.pretrain(*parse(tmp_path / "b4", cache_dir, "--max_steps", "4", *branch_from, *common))
    stable_lrs = [log["learning_rate"] for log in stable.state.log_history if "learning_rate" in log]
    branch_lrs = [log["learning_rate"] for log in branch.state.log_history if "learning_rate" in log]
    assert branch.state.global_step == 4 and len(branch_lrs) == 4  # steps 1-2 come from the stable run's log
    assert stable_lrs[:4] == pytest.approx([0, 5e-4, 5e-4, 5e-4])
    assert branch_lrs == pytest.approx([0, 5e-4, 5e-4, 2.5e-4])
    pretrain.pretrain(*parse(tmp_path / "b6", cache_dir, "--max_steps", "6", *branch_from, *common))
    end, branch_end = weights(tmp_path / "stable"), weights(tmp_path / "b6")
    assert all(torch.equal(end[k], branch_end[k]) for k in end)
    other = parse(
        tmp_path / "b4x",
        cache_dir,
        "--max_steps",
        "4",
        "--branch_from",
        str(tmp_path / "stable"),
        *common,
        "--mlm_probability",
        "0.2",
    )
    with pytest.raises(ValueError, match="differs from its stable run"):
        pretrain.pretrain(*other)
    (tmp_path / "stable" / "checkpoint-2" / "optimizer.pt").unlink()  # a branch never restarts AdamW silently
    with pytest.raises(ValueError, match="cannot continue the stable checkpoint .*-2 exactly \\(no optimizer"):
        pretrain.prepare(*parse(tmp_path / "b4y", cache_dir, "--max_steps", "4", *branch_from, *common))
    assert not (tmp_path / "b4y").exists()


def test_cpt_from_a_fine_tuned_classifier_is_refused(three_runs, tmp_path, cache_dir):
    """Its LM head is not in the checkpoint: CPT would train from a random head, so it is refused naming it."""
    from modeling_eurobert import EuroBertClmMlmForSequenceClassification

    base = three_runs["mlm"][1].output_dir
    classifier = EuroBertClmMlmForSequenceClassification.from_pretrained(base, num_labels=2)
    classifier.save_pretrained(tmp_path / "classifier")
    shutil.copy(Path(base) / "tokenizer.json", tmp_path / "classifier")
    shutil.copy(Path(base) / "tokenizer_config.json", tmp_path / "classifier")
    args = parse(
        tmp_path / "cpt",
        cache_dir,
        "--architecture",
        "null",
        "--model_name_or_path",
        str(tmp_path / "classifier"),
        "--switch_step",
        "null",
        "--data_start_block",
        "0",
        parser=cpt.make_parser(),
    )
    with pytest.raises(ValueError, match="lacks 1 weights of a language model \\(lm_head.weight\\)"):
        pretrain.prepare(*args)
    assert not (tmp_path / "cpt").exists()


def test_a_run_that_wrote_the_output_dir_while_another_prepared_is_not_overwritten(tmp_path, cache_dir):
    """O1: the checks are repeated once the lock is held. Run A is prepared, run B (another learning rate) trains
    into the same output_dir meanwhile, then A takes the freed lock: A is refused and B's files stay."""
    out = tmp_path / "out"
    common = ("--objective", "clm", "--switch_step", "null", "--max_steps", "2", "--intermediate_steps", "1")
    run_a = pretrain.prepare(*parse(out, cache_dir, *common, "--learning_rate", "1e-3"))
    pretrain.pretrain(*parse(out, cache_dir, *common))
    before = (out / "run_config.json").read_text(), (out / "model.safetensors").read_bytes()
    with pytest.raises(pretrain.OutputChanged, match="made by a different config .*learning_rate"):
        pretrain.train(run_a)
    assert ((out / "run_config.json").read_text(), (out / "model.safetensors").read_bytes()) == before
    run_b = pretrain.prepare(*parse(tmp_path / "b", cache_dir, *common))
    pretrain.pretrain(*parse(tmp_path / "b", cache_dir, *common))  # the same run, finished meanwhile
    with pytest.raises(pretrain.OutputChanged, match="would now start from .*checkpoint-2, not from step 0"):
        pretrain.train(run_b)


def test_cpt_continues_after_the_base_blocks(three_runs, tmp_path, cache_dir):
    base = three_runs["clm"][1].output_dir
    argv = [
        "--architecture",
        "null",
        "--model_name_or_path",
        base,
        "--switch_step",
        "null",
        "--objective",
        "mlm",
        "--keep_optimizer_state",
        "true",
        "--max_steps",
        "2",
        "--log_block_order",
        "true",
        "--intermediate_steps",
        "1",
    ]
    run_args, training_args = parse(tmp_path / "cpt", cache_dir, *argv, parser=cpt.make_parser())
    trainer = pretrain.pretrain(run_args, training_args)
    order = block_order(training_args.output_dir)
    assert order[1] == (False, [8, 9]) and order[2] == (False, [10, 11])  # base read blocks 0..7
    info = json.loads((Path(training_args.output_dir) / "run_info.json").read_text())
    assert info["cpt_base"] == Path(base).name and info["size"] == "tiny"
    assert info["tokens_seen"] == 2 * 2 * 64 and info["tokens_before_cpt"] == 4 * 2 * 64  # this run's; the base's
    assert {float(s["step"]) for s in trainer.optimizer.state.values()} == {6.0}  # 4 kept + 2 new


def _tokenizer_without_mask(path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|end_of_text|>": 0, "<|pad|>": 1, "[UNK]": 2, **{chr(c): c - 94 for c in range(97, 123)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|end_of_text|>", pad_token="<|pad|>", unk_token="[UNK]"
    ).save_pretrained(str(path))
    return str(path)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--objective", "rlm"], "objective='rlm' is unknown"),
        (["--mlm_probability", "0"], "must be in \\(0, 1\\)"),
        (["--mlm_probability", "1.5"], "must be in \\(0, 1\\)"),
        (["--switch_step", "0"], "switch_step=0 must be strictly between"),
        (["--switch_step", "4"], "switch_step=4 must be strictly between"),
        (["--corpus_source", "/nonexistent/corpus.jsonl"], "does not exist"),
        (["--corpus_source", "EMPTY"], "is empty"),
        (["--tokenizer_name_or_path", "NOMASK"], "no mask token"),
        (["--train_sampling_strategy", "random"], "sequential"),
        (["--per_device_train_batch_size", "0"], "per_device_train_batch_size=0 is out of range"),
        (["--gradient_accumulation_steps", "0"], "gradient_accumulation_steps=0 is out of range"),
        (["--learning_rate", "-1"], "learning_rate=-1.0 must be > 0"),
        (["--save_steps", "0"], "save_steps=0.0 must be > 0"),
        (["--max_grad_norm", "-1"], "max_grad_norm=-1.0 is out of range"),
        (["--block_size", "0"], "block_size=0 is out of range"),
        (["--lr_scheduler_kwargs", "not-json"], "is not a JSON object"),
    ],
)
def test_bad_input_fails_before_writing(tmp_path, cache_dir, extra, message):
    if "EMPTY" in extra:
        (tmp_path / "empty.jsonl").write_text("")
        extra = [str(tmp_path / "empty.jsonl") if e == "EMPTY" else e for e in extra]
    if "NOMASK" in extra:
        extra = [_tokenizer_without_mask(tmp_path / "tok") if e == "NOMASK" else e for e in extra]
    error = FileNotFoundError if "does not exist" in message else ValueError
    with pytest.raises(error, match=message):
        pretrain.pretrain(*parse(tmp_path / "out", cache_dir, *extra))
    assert not (tmp_path / "out").exists()


def test_resuming_into_a_directory_of_another_config_fails(three_runs, cache_dir):
    output_dir = Path(three_runs["mlm"][1].output_dir)
    before = sorted(p.name for p in output_dir.iterdir())
    args = parse(output_dir, cache_dir, "--objective", "mlm", "--switch_step", "null", "--mlm_probability", "0.3")
    with pytest.raises(ValueError, match="made by a different config .*mlm_probability"):
        pretrain.pretrain(*args)
    assert sorted(p.name for p in output_dir.iterdir()) == before


def test_a_run_config_of_another_format_is_refused_in_one_line(three_runs, cache_dir, tmp_path):
    source = Path(three_runs["mlm"][1].output_dir)
    output_dir = tmp_path / "old"
    shutil.copytree(source, output_dir, ignore=shutil.ignore_patterns(".lock"))
    stored = json.loads((output_dir / "run_config.json").read_text())
    (output_dir / "run_config.json").write_text(json.dumps({**stored, "format": 2}))
    before = sorted(p.name for p in output_dir.iterdir())
    args = parse(output_dir, cache_dir, "--objective", "mlm", "--switch_step", "null")
    with pytest.raises(ValueError, match="another version of the recipes \\(format 2, now 3\\).*git_commit"):
        pretrain.pretrain(*args)
    assert sorted(p.name for p in output_dir.iterdir()) == before


def test_run_info_of_another_format_is_refused(three_runs, tmp_path):
    """A run_info.json without the current format (format 1 had no "format" key) is refused in one line."""
    today = run_folders.read_run_info(Path(three_runs["pfs"][1].output_dir))
    format_2 = {k: v for k, v in today.items() if k not in ("tokens_before_cpt", "parameters")} | {"format": 2}
    format_3 = {k: v for k, v in today.items() if k != "parameters"} | {"format": 3}  # before parameter counts
    for stored, found in (
        ({k: v for k, v in today.items() if k != "format"}, 1),
        (format_2, 2),
        (format_3, 3),
        ({**today, "format": 5}, 5),
    ):
        (tmp_path / "run_info.json").write_text(json.dumps(stored))
        with pytest.raises(ValueError, match=f"run_info format {found}, this code reads format 4"):
            run_folders.read_run_info(tmp_path)


def test_yaml_cli_precedence_and_unknown_keys(tmp_path, cache_dir):
    run_args, training_args = parse(tmp_path, cache_dir, "--mlm_probability", "0.3")
    assert run_args.mlm_probability == 0.3 and run_args.architecture == "tiny" and training_args.adam_beta2 == 0.95
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load(Path(DEBUG).read_text()), "masking_ratio": 0.3}))
    with pytest.raises(ValueError, match="unknown keys \\['masking_ratio'\\]"):
        pretrain.make_parser().parse_args_and_config(["--config", str(bad)])


def test_every_shipped_yaml_parses(tmp_path):
    """The committed configs, and those the manifest writes for the other scales."""
    configs = sorted(Path("recipes/configs").rglob("*.yaml"))
    assert len(configs) == 4 + 38  # debug, cpt-debug, cpt-from-decoder, real-decoder-cpt + paper
    for scale in (scale for scale in manifest.SCALES if scale not in manifest.COMMITTED_SCALES):
        configs += manifest.write_configs(scale, tmp_path)
    for path in configs:
        recipe = manifest.recipes().get(path.stem)
        decoder = path.stem in ("cpt-from-decoder", "cpt-debug", "real-decoder-cpt")  # base from the command line
        parser = cpt.make_parser() if (recipe and recipe.cpt_base) or decoder else pretrain.make_parser()
        # use_cpu: TrainingArguments refuses bf16 (paper configs) on a machine without a bf16 GPU otherwise
        # paper configs assume 8 GPUs (global batch 1152); here there is one CPU process
        extra = ["--global_batch_size", "null"] if "paper" in path.parts or decoder else []
        extra += ["--model_name_or_path", "out/decoder"] if decoder else []
        run_args, training_args = parser.parse_args_and_config(["--config", str(path), "--use_cpu", "true", *extra])
        check_run_settings(run_args, training_args)
        if recipe:
            assert run_args.objective == recipe.objective and training_args.run_name == recipe.name


def test_weight_decay_reaches_every_parameter_as_in_the_original(three_runs, tmp_path, cache_dir):
    trainer = three_runs["mlm"][2]
    decayed = [g for g in trainer.optimizer.param_groups if g["weight_decay"] == 0.1]
    n_params = len(list(trainer.model.parameters()))
    assert sum(len(g["params"]) for g in decayed) == n_params  # norms included: one decayed group, as Optimus
    run_args, training_args = parse(
        tmp_path / "wd",
        cache_dir,
        "--max_steps",
        "1",
        "--intermediate_steps",
        "1",
        "--switch_step",
        "null",
        "--weight_decay_scope",
        "no_norms_biases",
    )
    other = pretrain.pretrain(run_args, training_args)
    undecayed = [p for g in other.optimizer.param_groups if g["weight_decay"] == 0.0 for p in g["params"]]
    norms = [p for n, p in other.model.named_parameters() if "norm" in n]
    assert len(undecayed) == len(norms) > 0  # the Trainer's default: norms (and biases) undecayed


def test_token_estimate_is_close_to_the_real_count(tmp_path):
    corpus = data.load_corpus("bundle").select(range(1500))
    tokenizer = data.cached_toy_tokenizer(corpus, 2000, tmp_path / "tok")
    estimate = data.estimate_tokens(corpus, tokenizer, sample=300)
    real = sum(len(ids) for ids in data.tokenize_corpus(tokenizer, corpus, tmp_path)["input_ids"])
    assert estimate["documents"] == 1500 and estimate["sampled"] == 300
    assert abs(estimate["tokens"] - real) / real < 0.05, (estimate, real)


def test_tensorboard_run_is_named_with_its_scale(tmp_path, cache_dir):
    """A run at the smoke scale logs to runs/smoke-610m-clm-42k, where TensorBoard shows its name."""
    run_args, training_args = parse(
        tmp_path / "run",
        cache_dir,
        "--objective",
        "clm",
        "--switch_step",
        "null",
        "--report_to",
        "tensorboard",
        "--run_name",
        "610m-clm-42k",
        "--scale",
        "smoke",
    )
    pretrain.pretrain(run_args, training_args)
    assert [p.name for p in (tmp_path / "run" / "runs").iterdir()] == ["smoke-610m-clm-42k"]
    assert list((tmp_path / "run" / "runs" / "smoke-610m-clm-42k").glob("events.out.tfevents.*"))


def test_undersized_corpus_is_refused_before_tokenizing(tmp_path, capsys):
    cache = tmp_path / "cache"
    argv = [
        "--config",
        DEBUG,
        "--output_dir",
        str(tmp_path / "out"),
        "--data_cache_dir",
        str(cache),
        "--max_docs",
        "30",
        "--block_size",
        "64",
        "--per_device_train_batch_size",
        "4",
        "--max_steps",
        "5000",
        "--report_to",
        "none",
    ]
    with pytest.raises(SystemExit) as error:
        pretrain.main(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.value.code == 2 and last.startswith("error: corpus bundle yields about") and "set epochs" in last
    assert "needs 20,000 blocks" in last
    assert not list(cache.glob("tokenized-*")) and not list(cache.glob("packed-*"))  # refused before tokenizing
    assert not (tmp_path / "out").exists()


def test_epochs_read_the_order_again_with_fresh_masks(tmp_path, cache_dir):
    run_args, training_args = parse(
        tmp_path / "epochs",
        cache_dir,
        "--max_docs",
        "10",
        "--max_steps",
        "60",
        "--epochs",
        "3",
        "--switch_step",
        "null",
        "--intermediate_steps",
        "30",
        "--log_block_order",
        "true",
    )
    trainer = pretrain.pretrain(run_args, training_args)
    stream = trainer.train_dataset
    n_blocks = len(stream.blocks)
    assert 60 * 2 > n_blocks  # the run needs more blocks than one pass holds
    first, again = stream[0], stream[n_blocks]
    assert (first["input_ids"] == again["input_ids"]).all()
    assert (first["block_index"], again["block_index"]) == (0, n_blocks)
    masked = trainer.data_collator([first, again])["labels"] != -100
    assert not torch.equal(masked[0], masked[1])  # a repeated block gets a new mask
    logged = block_order(training_args.output_dir)
    assert [b for step in sorted(logged) for b in logged[step][1]] == list(range(120))
    with pytest.raises(ValueError, match="set epochs"):
        pretrain.pretrain(
            *parse(
                tmp_path / "one-epoch",
                cache_dir,
                "--max_docs",
                "10",
                "--max_steps",
                "60",
                "--switch_step",
                "null",
                "--intermediate_steps",
                "30",
            )
        )


def test_several_corpus_sources_are_concatenated_in_order(tmp_path):
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(json.dumps({"text": f"extra document {i}"}) + "\n" for i in range(5)))
    bundle = data.load_corpus("bundle", split="valid")
    both = data.load_corpora(f"bundle,{extra}", split="valid")
    assert len(both) == len(bundle) + 5 and both[len(bundle)]["text"] == "extra document 0"
    assert paths.is_hub_id("HuggingFaceFW/fineweb-edu")
    assert not paths.is_hub_id("bundle") and not paths.is_hub_id(str(extra))


def test_one_rule_tells_a_hub_id_from_a_local_path(tmp_path, monkeypatch):
    """Dotted ids are Hub ids (`looks_like_path` once read `dclm-baseline-1.0` as a missing file)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name.jsonl").write_text("")
    for hub_id in ("mlfoundations/dclm-baseline-1.0", "HuggingFaceFW/fineweb-edu", "gpt2"):
        assert paths.is_hub_id(hub_id) and not paths.is_local_path(hub_id), hub_id
    for path in ("org/name.jsonl", "./x", "../x", "/x", "~/x", "a/b/c", "a b/c", "."):
        assert paths.is_local_path(path) and not paths.is_hub_id(path), path
    for neither in ("a b", "https://huggingface.co/org/name"):
        assert not paths.is_local_path(neither) and not paths.is_hub_id(neither), neither
    (tmp_path / "out" / "my-decoder-cpt").mkdir(parents=True)  # issue 46 item 3: a typo under an existing folder
    assert paths.is_local_path("out/my-decoder-cp") and not paths.is_hub_id("out/my-decoder-cp")
    with pytest.raises(
        FileNotFoundError,
        match=r"^--model out/my-decoder-cp: no such directory \(did you mean "
        r"out/my-decoder-cpt\?\)$",
    ):
        model_folders.local_or_hub("out/my-decoder-cp", "--model")
    with pytest.raises(ValueError, match="'mlfoundations/dclm-baseline-1.0' from the Hub"):  # offline: not "missing"
        data.load_corpus("mlfoundations/dclm-baseline-1.0")
    with pytest.raises(FileNotFoundError, match="neither a local path nor a Hub id"):
        model_folders.local_or_hub("a b", "tokenizer")


PLAIN_LOAD = """
import json, sys, torch, transformers
from sentence_transformers import SentenceTransformer
dirs, ids = json.loads(sys.argv[1]), torch.tensor(json.loads(sys.argv[2]))
report = {}
for name, path in dirs.items():
    tok = transformers.AutoTokenizer.from_pretrained(path)
    with torch.no_grad():
        heads = {auto: getattr(transformers, auto).from_pretrained(path).eval()
                 for auto in ("AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification",
                              "AutoModelForTokenClassification")}
        remote = transformers.AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True)
        remote_backbone = transformers.AutoModel.from_pretrained(path, trust_remote_code=True).eval()
        st = SentenceTransformer(path, device="cpu")
        report[name] = {
            "classes": {auto: type(m).__name__ for auto, m in heads.items()}, "remote": type(remote).__module__,
            "tokens": tok("The capital is <|mask|>.")["input_ids"],
            "hidden": heads["AutoModel"](ids).last_hidden_state.tolist(),
            "remote_hidden": remote_backbone(ids).last_hidden_state.tolist(),
            "logits": heads["AutoModelForMaskedLM"](ids).logits.tolist(),
            "embedding": st.encode_query(["what is the capital"], convert_to_tensor=True).tolist()}
print("REPORT " + json.dumps(report))
"""


@pytest.mark.slow
def test_every_objective_loads_with_plain_auto_classes_in_a_fresh_process(three_runs, tmp_path, cache_dir):
    """CLM, MLM, PFS and CPT checkpoints load with plain `AutoModel*`, `AutoTokenizer` and `SentenceTransformer`
    (no flag; a process that cannot import this project, stdin closed, so a [y/N] prompt would fail it) as
    transformers' own EuroBERT, bidirectional, with hidden states, MLM logits and embeddings equal to this project's
    classes; `trust_remote_code=True` still gives this project's classes (here the causal LM head)."""
    from evaluation import retrieval, tasks
    from modeling_eurobert import EuroBertClmMlmForMaskedLM, EuroBertClmMlmModel
    from tests.fixtures.fresh_process import run_fresh

    base = three_runs["clm"][1].output_dir
    cpt_args = parse(
        tmp_path / "cpt",
        cache_dir,
        "--architecture",
        "null",
        "--model_name_or_path",
        base,
        "--switch_step",
        "null",
        "--max_steps",
        "2",
        parser=cpt.make_parser(),
    )
    pretrain.pretrain(*cpt_args)
    dirs = {name: str(three_runs[name][1].output_dir) for name in ("clm", "mlm", "pfs")}
    dirs["cpt"] = str(tmp_path / "cpt")
    ids = [[0, 5, 17, 42, 8, 99, 3, 1]]
    result = run_fresh(PLAIN_LOAD, tmp_path, timeout=240, args=(json.dumps(dirs), json.dumps(ids)))
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert not [notice for notice in ("custom code", "trust_remote_code", "[y/N]", "model of type") if notice in output]
    report = json.loads(result.stdout.split("REPORT ", 1)[1])
    scifact = tasks.load_task("scifact")
    for name, path in dirs.items():
        config = json.loads((Path(path) / "config.json").read_text())
        assert config["model_type"] == "eurobert" and config["is_causal"] is False
        assert config.get("pretraining_attention") == ("causal" if name == "clm" else None)
        loaded = report[name]
        assert loaded["classes"] == {
            "AutoModel": "EuroBertModel",
            "AutoModelForMaskedLM": "EuroBertForMaskedLM",
            "AutoModelForSequenceClassification": "EuroBertForSequenceClassification",
            "AutoModelForTokenClassification": "EuroBertForTokenClassification",
        }
        assert loaded["remote"].startswith("transformers_modules")  # this project's code, from the checkpoint
        with torch.no_grad():
            ours = EuroBertClmMlmModel.from_pretrained(path, is_causal=False).eval()(torch.tensor(ids))
            logits = EuroBertClmMlmForMaskedLM.from_pretrained(path).eval()(torch.tensor(ids)).logits
        torch.testing.assert_close(torch.tensor(loaded["hidden"]), ours.last_hidden_state, atol=1e-5, rtol=1e-5)
        # one checkpoint, one default attention: remote code gives the plain load's hidden states (issue 46 item 10)
        torch.testing.assert_close(
            torch.tensor(loaded["remote_hidden"]), torch.tensor(loaded["hidden"]), atol=1e-5, rtol=1e-5
        )
        torch.testing.assert_close(torch.tensor(loaded["logits"]), logits, atol=1e-5, rtol=1e-5)
        embedding = (
            retrieval.build_model(path, scifact, finetune_args.FinetuneArgs())
            .eval()
            .encode_query(["what is the capital"], convert_to_tensor=True)
        )
        torch.testing.assert_close(torch.tensor(loaded["embedding"]), embedding, atol=1e-5, rtol=1e-5)
    # our classes keep the CLM run's record: bidirectional by default, as the plain load; causal on request
    config = EuroBertClmMlmModel.from_pretrained(dirs["clm"]).config
    assert config.is_causal is False and config.pretraining_attention == "causal"


def test_a_checkpoint_native_eurobert_cannot_hold_keeps_remote_code(tmp_path):
    """`make_plain_loadable` follows `check_exportable`: an LM head with an MLP bias (native EuroBERT's LM head would
    gain a bias) or a QA head keeps this project's model_type, so plain transformers cannot load it silently wrong."""
    from modeling_eurobert import EuroBertClmMlmForMaskedLM, EuroBertClmMlmForQuestionAnswering, load_architecture
    from modeling_eurobert.export_native import make_plain_loadable

    for name, model in {
        "mlp_bias": EuroBertClmMlmForMaskedLM(load_architecture("tiny", mlp_bias=True)),
        "qa": EuroBertClmMlmForQuestionAnswering(load_architecture("tiny")),
    }.items():
        model.save_pretrained(tmp_path / name)
        assert make_plain_loadable(tmp_path / name) is False
        assert json.loads((tmp_path / name / "config.json").read_text())["model_type"] == "eurobert_clm_mlm"
    model = EuroBertClmMlmForMaskedLM(load_architecture("tiny"))
    model.save_pretrained(tmp_path / "plain")
    assert make_plain_loadable(tmp_path / "plain") is True


def test_hub_token_is_never_written(tmp_path, cache_dir, monkeypatch):
    """`--hub_token` reaches huggingface_hub through the environment; no file of the run holds it (training_args.bin
    is a pickle of the TrainingArguments)."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    secret = "hf_not_a_real_token_0123456789"
    run_args, training_args = parse(
        tmp_path / "out",
        cache_dir,
        "--objective",
        "clm",
        "--switch_step",
        "null",
        "--max_steps",
        "2",
        "--save_steps",
        "1",
        "--hub_token",
        secret,
    )
    pretrain.pretrain(run_args, training_args)
    files = [path for path in (tmp_path / "out").rglob("*") if path.is_file()]
    assert any(path.name == "training_args.bin" for path in files)
    assert [path for path in files if secret.encode() in path.read_bytes()] == []
    assert os.environ["HF_TOKEN"] == secret


def test_cpt_refuses_a_negative_data_start_block(tmp_path, cache_dir):
    from recipes import cpt

    args = parse(
        tmp_path / "out",
        cache_dir,
        "--data_start_block",
        "-5",
        "--model_name_or_path",
        str(tmp_path),
        "--architecture",
        "null",
        "--switch_step",
        "null",
        parser=cpt.make_parser(),
    )
    with pytest.raises(ValueError, match="data_start_block=-5 is out of range"):
        pretrain.pretrain(*args)
    assert not (tmp_path / "out").exists()


def test_resume_skips_broken_checkpoints_and_refuses_an_unchecked_one(tmp_path, cache_dir, capsys):
    """A checkpoint killed before its run_info.json, or with truncated weights or optimizer state, is never resumed
    from: auto-resume falls back to the newest intact one and names what it skipped; an explicit one is refused."""
    from pretraining.checks import check_output_dir

    args = (
        "--objective",
        "clm",
        "--switch_step",
        "null",
        "--max_steps",
        "4",
        "--save_steps",
        "1",
        "--intermediate_steps",
        "4",
        "--save_strategy",
        "steps",
    )
    run_args, training_args = parse(tmp_path / "out", cache_dir, *args)
    pretrain.pretrain(run_args, training_args)
    out = tmp_path / "out"
    from pretraining.checks import checkpoint_problem

    assert checkpoint_problem(out / "checkpoint-1") is None
    for damage, named in (
        ("optimizer.pt", "no optimizer state"),
        ("scheduler.pt", "no scheduler state"),
        ("rng_state.pth", "no RNG state"),
        ("model.safetensors", "no weights"),
        ("config.json", "no config.json"),
        ("truncate rng_state.pth", "rng_state.pth is unreadable"),
        ("truncate scheduler.pt", "scheduler.pt is unreadable"),
    ):
        copy = shutil.copytree(out / "checkpoint-1", tmp_path / "damaged" / damage)
        *truncate, name = damage.split()
        (copy / name).write_bytes((copy / name).read_bytes()[:100]) if truncate else (copy / name).unlink()
        assert named in checkpoint_problem(copy), damage
    # a checkpoint saved with save_only_model (no optimizer, scheduler or RNG state) is never resumed from
    cpt_args = (
        "--architecture",
        "null",
        "--model_name_or_path",
        str(out),
        "--switch_step",
        "null",
        "--keep_optimizer_state",
        "true",
        "--max_steps",
        "1",
        "--intermediate_steps",
        "1",
    )
    (out / "checkpoint-4" / "scheduler.pt").unlink()
    with pytest.raises(
        ValueError,
        match=f"keep_optimizer_state: {out / 'checkpoint-4'}, the checkpoint of the "
        "base's weights, is not complete \\(no scheduler state",
    ):
        pretrain.prepare(*parse(tmp_path / "cpt", cache_dir, *cpt_args, parser=cpt.make_parser()))
    (out / "checkpoint-2" / "run_info.json").unlink()  # killed right after trainer_state.json
    for checkpoint, name in (("checkpoint-4", "model.safetensors"), ("checkpoint-3", "optimizer.pt")):
        data = (out / checkpoint / name).read_bytes()
        (out / checkpoint / name).write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert check_output_dir(*parse(out, cache_dir, *args)) == str(out / "checkpoint-1")
    skipped = capsys.readouterr().err
    assert all(f"skipping {out / c}" in skipped for c in ("checkpoint-4", "checkpoint-3", "checkpoint-2"))
    assert "no run_info.json" in skipped and "optimizer.pt is unreadable" in skipped and "no scheduler" in skipped
    for checkpoint in out.glob("checkpoint-*"):  # as saved with save_only_model: training starts again, and says so
        (checkpoint / "optimizer.pt").unlink(missing_ok=True)
    assert check_output_dir(*parse(out, cache_dir, *args)) is None
    assert "no checkpoint in" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is not a complete Trainer checkpoint \\(no run_info.json"):
        check_output_dir(*parse(out, cache_dir, *args, "--resume_from_checkpoint", str(out / "checkpoint-2")))
    # Issue 43: a checkpoint an FSDP run saved (its weights and optimizer state under FSDP's names) passed as complete,
    # and every rerun of a run that is not sharded then stopped in transformers' traceback: refused in one line
    fsdp = out / "checkpoint-1"
    (fsdp / "model.safetensors").unlink()
    torch.save({}, fsdp / "pytorch_model_fsdp.bin")
    torch.save({}, fsdp / "optimizer.bin")  # (its optimizer.pt was removed above)
    (fsdp / "rng_state.pth").rename(fsdp / "rng_state_0.pth")
    for argv in (args, (*args, "--resume_from_checkpoint", str(fsdp))):
        with pytest.raises(
            ValueError,
            match=f"{fsdp} was saved by a sharded \\(FSDP\\) run \\(optimizer.bin\\), "
            "which transformers resumes under FSDP only",
        ):
            check_output_dir(*parse(out, cache_dir, *argv))


def test_heldout_figure_places_every_row_at_its_csv_tokens(tmp_path, monkeypatch):
    """The held-out curves from a CSV: each line at the tokens its rows count (a CPT run's base included), in its
    objective's colour; a CPT run from a base of unknown tokens is left out of the axis and named in the caption."""
    import matplotlib.colors
    import matplotlib.pyplot as plt

    from core import colours
    from pretraining import heldout

    common = {"mlm_probability": 0.4, "blocks": 4, "block_size": 64}
    rows = [
        {
            "model": "mini-610m-clm-42k",
            "step": s,
            "tokens_seen": s * 50,
            "tokens_before_cpt": 0,
            "clm_loss": 9 - s / 1e4,
            "mlm_loss": 9.5 - s / 1e4,
            **common,
        }
        for s in (1000, 20000, 42000)
    ]
    rows += [
        {
            "model": "mini-610m-clm-dec42k-mlm40-54k",
            "step": 54000,
            "tokens_seen": 2_700_000,
            "tokens_before_cpt": 2_100_000,
            "clm_loss": 6.0,
            "mlm_loss": 6.1,
            **common,
        },
        {
            "model": "custom-llama-mlm",
            "step": 10,
            "tokens_seen": "unknown",
            "tokens_before_cpt": "unknown",
            "clm_loss": 5.0,
            "mlm_loss": 5.5,
            **common,
        },
    ]
    path = tmp_path / "heldout.csv"
    heldout.write_csv(rows, path)
    assert heldout.read_csv(path) == rows  # the CSV reads back as it was written
    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.append(fig), close(fig)))
    heldout.plot(heldout.read_csv(path), path.with_suffix(".png"))
    (fig,) = drawn
    titles = [ax.get_title() for ax in fig.axes]  # the CLM run's MLM loss (off-objective) in a panel of its own
    assert titles == [f"held-out {o} loss, runs trained on {o} (mini scale)" for o in ("CLM", "MLM")] + [
        "off-objective losses (mini scale)"
    ]
    for ax, expected in zip(
        fig.axes,
        (
            {"mini-610m-clm-42k", "mini-610m-clm-dec42k-mlm40-54k"},
            {"mini-610m-clm-dec42k-mlm40-54k"},
            {"mini-610m-clm-42k"},
        ),
    ):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == expected
        for model, line in lines.items():
            assert list(line.get_xdata()) == [r["tokens_seen"] / 1e6 for r in rows if r["model"] == model]
            assert matplotlib.colors.to_hex(line.get_color()) == matplotlib.colors.to_hex(colours.of(model))
        assert "tokens seen" in ax.get_xlabel()
    assert "custom-llama-mlm" in fig.texts[-1].get_text()
    assert path.with_suffix(".png").is_file()  # S11: a rerun with one checkpoint per run leaves no stale figure
    assert heldout.plot([rows[0], rows[3]], path.with_suffix(".png")) is None
    assert not path.with_suffix(".png").exists()
    path.write_text(path.read_text().replace(",tokens_before_cpt", ""))  # an older CSV: refused, not misread
    with pytest.raises(ValueError, match="not a held-out CSV of this version"):
        heldout.read_csv(path)


def test_the_private_trainer_api_the_pretraining_trainer_relies_on_is_still_there():
    """pretraining/trainer.py is the one place that uses transformers' private Trainer API: it overrides
    `Trainer._get_num_items_in_batch` and sets `_loss_shifts_labels`, which that method must still read (else CLM
    steps would count one label too many per row, silently)."""
    import inspect

    import transformers
    from transformers import Trainer

    from pretraining.trainer import PretrainingTrainer

    method, flag = PretrainingTrainer.PRIVATE_API
    assert callable(getattr(Trainer, method, None)), f"transformers {transformers.__version__} has no Trainer.{method}"
    assert flag in inspect.getsource(getattr(Trainer, method)), (
        f"transformers {transformers.__version__}: Trainer.{method} no longer reads {flag}; count the CLM labels "
        "another way in pretraining/trainer.py"
    )
