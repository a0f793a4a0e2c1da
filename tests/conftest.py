"""Shared fixtures. Tests never touch the network: the Hub is switched off before transformers is imported."""

import gc
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:  # pytest -n N: the cores shared out, in this worker and its children
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0))
                                                    // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import pytest  # noqa: E402
import torch  # noqa: E402

from core.paths import resolve_data_dir  # noqa: E402
from tests.fixtures.in_process import run_main  # noqa: E402

# The longest files first (measured, longest first: the shortened study run, then the launch, grid and CLI process
# tests): under -n a worker takes the next file when it is free, so the short ones fill the end evenly. This order
# holds only with `--no-loadscope-reorder` (pyproject.toml): by default xdist hands out files by their number of tests,
# which left the study run for last (5:50 against 4:42 on 2 cores).
LONGEST_FIRST = ("test_study.py", "test_docs_commands.py", "test_launch.py", "test_decoder_path.py", "test_grid.py",
                 "test_pretrain_cli.py", "test_bench.py",
                 "test_pretrain.py", "test_report.py", "test_resume.py", "test_study_driver.py", "test_push.py")


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
