"""Shared fixtures. Tests never touch the network: the Hub is switched off before transformers is imported."""

import fcntl
import gc
import os
import subprocess
import sys
from pathlib import Path

from core.threads import use_thread_policy

use_thread_policy()  # before torch loads; the tests' subprocesses inherit it
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:  # pytest -n N: the cores shared out, in this worker and its children
    os.environ.setdefault(
        "OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )

import pytest  # noqa: E402
import torch  # noqa: E402

from core.cli import BadInput  # noqa: E402
from core.paths import resolve_data_dir  # noqa: E402
from recipes import real_models  # noqa: E402
from tests.fixtures.in_process import run_main  # noqa: E402

# The longest files first (measured on 2 cores, 2026-12-04: the shortened study run, the committed studies'
# regeneration, then the launch, benchmark, FSDP and docs process tests): under -n a worker takes the next file when
# it is free, so the short ones fill the end evenly. This order holds only with `--no-loadscope-reorder`
# (pyproject.toml): by default xdist hands out files by their number of tests, which left the study run for last.
LONGEST_FIRST = (
    "test_study.py",
    "test_study_engine.py",
    "test_bench.py",
    "test_study_driver.py",
    "test_launch.py",
    "test_fsdp.py",
    "test_docs_commands.py",
    "test_grid_models.py",
    "test_grid.py",
    "test_real_models.py",
    "test_pretrain_cli.py",
    "test_decoder_path.py",
    "test_pretrain.py",
    "test_resume.py",
    "test_convert.py",
    "test_checkpoint_files.py",
    "test_bad_inputs.py",
    "test_modeling.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: otherwise in collection order


def pytest_collection_finish(session):
    """The modules every test imported live as long as the session: out of the collector's way, so the full
    collection each Trainer.train starts with (accelerate's free_memory) scans only what the tests made since."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def data_dir():
    """The offline data bundle (flag > $MLM_VS_CLM_DATA > ../shared/data)."""
    return resolve_data_dir()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on 2 shared cores: one torch thread is many times faster than two fighting other processes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def call_main(capsys):
    """`call_main(module.main, *argv)`: `python -m <module> ARGV` as the shell runs it, in this process
    (`tests.fixtures.in_process.run_main`)."""
    return lambda main, *argv: run_main(main, argv, capsys)


# ------------------------------------------------------------------------------------------ real weights (`real`)
# SmolLM2-135M-Instruct and all-MiniLM-L6-v2 from the package index (`recipes.real_models`), kept in
# $MLM_VS_CLM_REAL_MODELS (default ~/.cache/mlm-vs-clm/real-models) between runs; tests using them carry the `real`
# marker and skip, with the reason, when the index cannot be reached. The optional extra `gguf` is installed into
# that cache (`pip install --target`) when the environment lacks it, so the suite's environment stays the README's.
REAL_MODELS_CACHE = Path(
    os.environ.get("MLM_VS_CLM_REAL_MODELS", Path.home() / ".cache" / "mlm-vs-clm" / "real-models")
)


def _gguf_importable() -> bool:
    try:
        import gguf  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="session")
def real(tmp_path_factory):
    """{name: folder} of the real models, made once into the cache."""
    if not _gguf_importable():  # also for a cached folder: one made before its weights' sha256 was recorded is remade
        site = REAL_MODELS_CACHE / "site"
        if not (site / "gguf").exists():
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(site),
                    real_models.GGUF_EXTRA,
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                pytest.skip(
                    f"the optional extra {real_models.GGUF_EXTRA} cannot be installed (package index "
                    f"unreachable?): {done.stderr.strip().splitlines()[-1:]}"
                )
        sys.path.insert(0, str(site))
    REAL_MODELS_CACHE.mkdir(parents=True, exist_ok=True)
    with open(REAL_MODELS_CACHE / ".tests.lock", "a") as lock:  # test processes of one run fetch one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return real_models.main(["--output", str(REAL_MODELS_CACHE)])
        except BadInput as error:
            if "cannot download" in str(error):
                pytest.skip(f"real models unavailable: {error}")
            raise


@pytest.fixture(scope="session")
def converted(real, tmp_path_factory):
    from modeling_eurobert.convert import main as convert

    output = tmp_path_factory.mktemp("real") / "smollm2-eurobert"
    convert([str(real["smollm2-135m-instruct"]), str(output)])
    return output
