"""FSDP: FSDP2 proven on 2 CPU processes, and the shipped launch config (`recipes/accelerate/fsdp.yaml`).

FSDP2 on the CPU (gloo). accelerate 1.15 enables FSDP on accelerators only: on a CPU its state is MULTI_CPU and the
FSDP plugin is dropped, so the recipe's Trainer cannot run FSDP here. torch's own `fully_shard` does run on CPU, so
the sharded tests run 2 processes of this file (`python tests/test_fsdp.py`, the `worker` below) that wrap the
project's own model (`pretraining.trainer.build_model`, tiny architecture, fp32) with `fully_shard` per decoder
layer and at the root, feed it the project's collator (`pretraining.collator.build_collator`: CLM, MLM 40% with the
fixed-shape head, a PFS switch) and train on the model's own loss with the Trainer's arithmetic (loss summed over
the global batch's labels / their count, `num_items_in_batch`; AdamW with the paper's betas, eps and weight decay;
grad clip 1.0), in a plain loop instead of the Trainer:
(a) the losses of 4 steps equal the same steps unsharded in one process (rtol 1e-5);
(b) a sharded checkpoint (`torch.distributed.checkpoint`, model and AdamW state) at step 2, a SIGKILL of both
processes after step 3, and a resume from it whose losses and final weights equal the uninterrupted run's;
(c) the full state dict gathered to rank 0 and saved as a normal checkpoint that plain `AutoModelForMaskedLM`
loads (with and without trust_remote_code) and gives the unsharded model's logits.
What this leaves for a GPU: accelerate's FSDP path inside the Trainer (`test_fsdp_trains_saves_resumes_and_loads`,
bf16 mixed precision, NCCL), which needs CUDA.

The launch config. On the CPU: the launcher accepts the config and hands the FSDP settings to the process, they
name a layer class of our model, and `recipes.pretrain` refuses to start instead of training without FSDP. On a
GPU: a real FSDP run (2 processes when 2 GPUs exist, else 1, which still takes the sharded save/load path) with
save, resume and loading the result like any other checkpoint.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "recipes/accelerate/fsdp.yaml"

PROBE = """
import json, os
from accelerate.utils import FullyShardedDataParallelPlugin
from modeling_eurobert import EuroBertClmMlmForMaskedLM, load_architecture

plugin = FullyShardedDataParallelPlugin()  # built from the FSDP_* variables `accelerate launch` set
layers = {type(m).__name__ for m in EuroBertClmMlmForMaskedLM(load_architecture("tiny")).modules()}
print(json.dumps({"use_fsdp": os.environ.get("ACCELERATE_USE_FSDP"), "version": plugin.fsdp_version,
                  "state_dict_type": plugin.state_dict_type.name, "wrap": plugin.transformer_cls_names_to_wrap,
                  "wrap_found": all(name in layers for name in plugin.transformer_cls_names_to_wrap),
                  "mixed_precision": os.environ.get("ACCELERATE_MIXED_PRECISION")}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_launcher_accepts_the_fsdp_config(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            CONFIG,
            "--num_processes",
            "1",
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            str(free_port()),
            str(probe),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    settings = json.loads(result.stdout.strip().splitlines()[-1])
    assert settings == {
        "use_fsdp": "true",
        "version": 2,
        "state_dict_type": "FULL_STATE_DICT",
        "wrap": ["EuroBertClmMlmDecoderLayer"],
        "wrap_found": True,
        "mixed_precision": "bf16",
    }


def test_pretrain_refuses_fsdp_on_the_cpu(monkeypatch):
    from pretraining import pretrain  # here: the FSDP2 worker processes (this file) never import peft and datasets
    from pretraining.checks import check_run_settings

    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch --config_file fsdp.yaml` sets
    run_args, training_args = pretrain.make_parser().parse_args_and_config(["--config", "recipes/configs/debug.yaml"])
    with pytest.raises(ValueError, match="asks for FSDP, which accelerate runs on GPUs only"):
        check_run_settings(run_args, training_args)


RUN = [
    "--config",
    "recipes/configs/debug.yaml",
    "--use_cpu",
    "false",
    "--max_docs",
    "200",
    "--block_size",
    "64",
    "--max_steps",
    "4",
    "--switch_step",
    "2",
    "--intermediate_steps",
    "2",
    "--warmup_steps",
    "1",
    "--lr_scheduler_kwargs",
    '{"num_decay_steps": 1}',
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--save_strategy",
    "steps",
    "--save_steps",
    "1",
    "--global_batch_size",
    "4",
]


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="accelerate runs FSDP on GPUs only (device check)")
def test_fsdp_trains_saves_resumes_and_loads(tmp_path):
    processes = min(2, torch.cuda.device_count())

    def launch(output_dir: Path, *extra: str) -> None:
        command = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            CONFIG,
            "--num_processes",
            str(processes),
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            str(free_port()),
            "--mixed_precision",
            "no",
            "-m",
            "recipes.pretrain",
            *RUN,
            "--output_dir",
            str(output_dir),
            "--data_cache_dir",
            str(tmp_path / "cache"),
            "--per_device_train_batch_size",
            str(4 // processes),
            *extra,
        ]
        result = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"}
        )
        assert result.returncode == 0, result.stderr[-4000:]

    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    launch(reference)
    checkpoint = reference / "checkpoint-2"
    assert (checkpoint / "pytorch_model_fsdp.bin").is_file() and (checkpoint / "optimizer.bin").is_file()
    launch(resumed, "--resume_from_checkpoint", str(checkpoint))

    expected, got = load_file(str(reference / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:  # GPU kernels need not be bitwise deterministic
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-5)
    ids = torch.arange(10).unsqueeze(0)
    for directory in (reference, checkpoint, reference / "intermediate" / "step-2"):  # like any other checkpoint
        model = AutoModelForMaskedLM.from_pretrained(directory, trust_remote_code=True)
        saved = load_file(str(directory / "model.safetensors"))
        assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items() if k in saved)
        assert torch.isfinite(model(input_ids=ids).logits).all()
    info = json.loads((reference / "run_info.json").read_text())
    assert info["steps"] == 4 and info["run_config"]["training_args"]["world_size"] == processes


# FSDP2 on 2 CPU processes (module docstring). One global batch = WORLD x MICRO blocks of BLOCK tokens per step.
WORLD, MICRO, BLOCK, STEPS, SWITCH, SAVE_AT = 2, 2, 32, 4, 2, 2
RUNS = {"clm": ("clm", None), "mlm": ("mlm", None), "pfs": ("mlm", SWITCH)}  # name -> (objective, switch_step)
WORDS = [f"w{i}" for i in range(252)]


def word_tokenizer():
    """A word-level tokenizer with the tiny architecture's special ids (bos 0, eos 1, mask 2, pad 3)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<s>", "</s>", "<mask>", "<pad>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", mask_token="<mask>", pad_token="<pad>"
    )


def setup(run: str):
    """(model, collator, optimizer) of a run as the recipe builds them: `build_model`, `build_collator`, AdamW."""
    from pretraining.collator import build_collator
    from pretraining.settings import PretrainArguments
    from pretraining.trainer import build_model

    objective, switch_step = RUNS[run]
    run_args = PretrainArguments(
        architecture="tiny", objective=objective, switch_step=switch_step, block_size=BLOCK, mlm_fixed_shape=True
    )
    tokenizer = word_tokenizer()
    model = build_model(run_args, tokenizer, seed=0)
    collator = build_collator(run_args, tokenizer, blocks_per_step=WORLD * MICRO)
    return model, collator, tokenizer


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-5, weight_decay=0.1)


def blocks(step: int, first: int, count: int) -> list[dict]:
    """`count` blocks of global step `step`, from its `first` block: random ids, the same in every process."""
    ids = torch.randint(4, 4 + len(WORDS), (STEPS * WORLD * MICRO, BLOCK), generator=torch.Generator().manual_seed(0))
    start = step * WORLD * MICRO + first
    return [{"input_ids": ids[i].tolist(), "block_index": i} for i in range(start, start + count)]


def train_step(model, optimizer, collator, examples, world: int) -> float:
    """One optimizer step as the Trainer takes it: the loss is the sum over the global batch's labels divided by
    their count (`num_items_in_batch`, summed over processes); each process backpropagates `world` times its share
    because FSDP averages gradients over processes. Returns the global batch's loss."""
    import torch.distributed as dist

    batch = collator(examples)
    batch.pop("block_index"), batch.pop("mlm_overflow", None)
    labels = batch["labels"][:, 1:] if batch["is_causal"] else batch["labels"]  # the model shifts CLM labels
    count = (labels != -100).sum()
    if world > 1:
        dist.all_reduce(count)
    loss = model(**batch, num_items_in_batch=count).loss
    (loss * world).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    loss = loss.detach()
    if world > 1:
        dist.all_reduce(loss)
    return loss.item()


def unsharded_run(run: str):
    """The reference: one process, the whole global batch in one forward. Returns (losses, model)."""
    model, collator, _ = setup(run)
    optimizer = make_optimizer(model)
    losses = [train_step(model, optimizer, collator, blocks(step, 0, WORLD * MICRO), 1) for step in range(STEPS)]
    return losses, model


def worker(argv: list[str]) -> None:
    """One process of a sharded run (`python tests/test_fsdp.py OUT RUN[,RUN] [--hang_after N] [--resume DIR]`,
    RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment). Writes OUT/<run>/losses.json (rank 0: the
    losses of the steps it ran; each rank: its share of the parameters), a sharded checkpoint OUT/<run>/step-2,
    and the gathered weights as a normal checkpoint OUT/<run>/final. --hang_after N: wait to be killed after
    step N (and write OUT/<run>/hanging); --resume DIR: start from the sharded checkpoint DIR."""
    import argparse
    import time

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_state_dict,
        set_state_dict,
    )
    from torch.distributed.fsdp import fully_shard

    from modeling_eurobert.modeling_eurobert import EuroBertClmMlmDecoderLayer
    from pretraining.trainer import finish_checkpoint

    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("runs")
    parser.add_argument("--hang_after", type=int)
    parser.add_argument("--resume", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for run in args.runs.split(","):
        out = args.out / run
        out.mkdir(parents=True, exist_ok=True)
        model, collator, tokenizer = setup(run)
        for layer in model.modules():
            if isinstance(layer, EuroBertClmMlmDecoderLayer):
                fully_shard(layer)
        fully_shard(model)  # the root: embeddings, final norm, LM head
        optimizer = make_optimizer(model)
        start = 0
        if args.resume:
            model_state, optimizer_state = get_state_dict(model, optimizer)
            state = {"model": model_state, "optimizer": optimizer_state}
            dcp.load(state, checkpoint_id=args.resume)
            set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
            start = json.loads((args.resume / "step.json").read_text())["step"]
        losses = {}
        for step in range(start, STEPS):
            examples = blocks(step, rank * MICRO, MICRO)
            losses[step + 1] = train_step(model, optimizer, collator, examples, WORLD)
            if step + 1 == SAVE_AT and not args.resume:
                model_state, optimizer_state = get_state_dict(model, optimizer)
                dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=out / f"step-{SAVE_AT}")
                if rank == 0:  # written last: the checkpoint is complete
                    (out / f"step-{SAVE_AT}" / "step.json").write_text(json.dumps({"step": SAVE_AT}))
            if step + 1 == args.hang_after:
                dist.barrier()
                if rank == 0:
                    (out / "hanging").write_text(json.dumps(losses))
                time.sleep(600)  # killed here
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        local = sum(p.to_local().numel() for p in model.parameters())
        (out / f"shares-rank{rank}.json").write_text(
            json.dumps({"local": local, "full": sum(t.numel() for t in full.values()) if rank == 0 else None})
        )
        if rank == 0:
            plain, _, _ = setup(run)
            plain.load_state_dict(full)
            plain.save_pretrained(out / "final")
            tokenizer.save_pretrained(out / "final")
            finish_checkpoint(out / "final", {"steps": STEPS})
            (out / "losses.json").write_text(json.dumps(losses))
        dist.barrier()
    dist.destroy_process_group()


def launch(out: Path, runs: str, *extra: str) -> list[subprocess.Popen]:
    """Start the 2 processes of a sharded run."""
    port = str(free_port())
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "WORLD_SIZE": str(WORLD),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": port,
        "HF_HUB_OFFLINE": "1",
    }
    return [
        subprocess.Popen(
            [sys.executable, __file__, str(out), runs, *extra],
            cwd=ROOT,
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(WORLD)
    ]


def finish(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output[-4000:]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """The uninterrupted sharded runs (CLM, MLM, PFS) and, meanwhile, a PFS run killed after step 3."""
    root = tmp_path_factory.mktemp("fsdp")
    uninterrupted = launch(root / "full", ",".join(RUNS))
    finish(uninterrupted)
    killed = launch(root / "killed", "pfs", "--hang_after", "3")
    hanging = root / "killed" / "pfs" / "hanging"
    deadline = time.monotonic() + 300
    while not hanging.is_file() and time.monotonic() < deadline and all(p.poll() is None for p in killed):
        time.sleep(0.2)
    for process in killed:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert hanging.is_file(), killed[0].stdout.read()[-4000:]
    assert [p.returncode for p in killed] == [-signal.SIGKILL] * WORLD
    return root


@pytest.mark.slow
@pytest.mark.parametrize("run", list(RUNS))
def test_fsdp2_on_cpu_losses_equal_the_unsharded_run(sharded, run, one_thread):
    expected, _ = unsharded_run(run)
    got = json.loads((sharded / "full" / run / "losses.json").read_text())
    assert list(got) == [str(step) for step in range(1, STEPS + 1)]
    torch.testing.assert_close(list(got.values()), expected, rtol=1e-5, atol=0)
    assert len(set(expected)) == STEPS  # the steps changed the model
    shares = [json.loads((sharded / "full" / run / f"shares-rank{r}.json").read_text()) for r in range(WORLD)]
    assert all(share["local"] < shares[0]["full"] for share in shares)  # each process holds a part of the weights
    assert sum(share["local"] for share in shares) >= shares[0]["full"]


@pytest.mark.slow
def test_fsdp2_on_cpu_resumes_a_killed_run_from_its_sharded_checkpoint(sharded):
    killed = sharded / "killed" / "pfs"
    assert json.loads((killed / "hanging").read_text()).keys() == {"1", "2", "3"}  # it ran past its checkpoint
    assert not (killed / "final").exists()
    finish(launch(sharded / "resumed", "pfs", "--resume", str(killed / f"step-{SAVE_AT}")))
    resumed = json.loads((sharded / "resumed" / "pfs" / "losses.json").read_text())
    uninterrupted = json.loads((sharded / "full" / "pfs" / "losses.json").read_text())
    assert list(resumed) == [str(step) for step in range(SAVE_AT + 1, STEPS + 1)]
    torch.testing.assert_close([resumed[s] for s in resumed], [uninterrupted[s] for s in resumed], rtol=1e-6, atol=0)
    expected = load_file(str(sharded / "full" / "pfs" / "final" / "model.safetensors"))
    got = load_file(str(sharded / "resumed" / "pfs" / "final" / "model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-6, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("trust_remote_code", [False, True])
def test_fsdp2_on_cpu_gathered_weights_load_as_a_normal_checkpoint(sharded, trust_remote_code, one_thread):
    _, reference = unsharded_run("pfs")
    model = AutoModelForMaskedLM.from_pretrained(
        sharded / "full" / "pfs" / "final", trust_remote_code=trust_remote_code
    ).eval()
    assert type(model).__module__.startswith("transformers_modules") == trust_remote_code
    ids = torch.tensor([blocks(0, 0, 1)[0]["input_ids"]])
    with torch.no_grad():
        expected = reference.eval()(input_ids=ids).logits
        got = model(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    worker(sys.argv[1:])
