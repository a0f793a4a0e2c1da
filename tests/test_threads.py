"""The CPU thread policy (`core.threads`): set in every process before torch loads, by every package that loads
torch; a variable the user set wins; child processes (the grid's workers, a study's runs, the tests' subprocesses)
inherit it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import threads

ROOT = Path(__file__).resolve().parents[1]
# The packages whose modules load torch (core, analysis and tests do not; the tests set it in conftest.py).
PACKAGES = ("modeling_eurobert", "pretraining", "evaluation", "model_cards", "recipes", "bench")
# Run a module or script with the import of torch reported: the policy's variables at that moment, then exit.
SPY = """
import importlib, importlib.abc, json, os, runpy, sys

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            print(json.dumps({k: os.environ.get(k) for k in POLICY}), flush=True)
            os._exit(0)

POLICY = json.loads(sys.argv[1])
sys.meta_path.insert(0, Spy())
target, sys.argv = sys.argv[2], sys.argv[2:]
runpy.run_path(target) if target.endswith(".py") else importlib.import_module(target)
import torch
"""


def without_policy() -> dict:
    """This environment without the policy's variables (the tests' own process has them: conftest.py)."""
    return {k: v for k, v in os.environ.items() if k not in threads.POLICY}


def python(code: str, *args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_package_that_loads_torch_sets_the_policy_on_import_without_loading_torch():
    code = (
        "import importlib, json, os, sys\n"
        f"for package in {PACKAGES!r}:\n"
        "    importlib.import_module(package)\n"
        f"    print(json.dumps({{k: os.environ.pop(k, None) for k in {list(threads.POLICY)!r}}}))\n"
        "print('torch' in sys.modules)"
    )
    lines = python(code, env=without_policy()).splitlines()
    assert lines == [json.dumps(threads.POLICY)] * len(PACKAGES) + ["False"]


# Every command line of the project (a module run as `python -m`), and the two run by path as well.
ENTRY_POINTS = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for package in PACKAGES
    for path in (ROOT / package).glob("*.py")
    if 'if __name__ == "__main__":' in path.read_text()
)


@pytest.mark.parametrize("target", [*ENTRY_POINTS, "recipes/pretrain.py", "recipes/cpt.py"])
def test_the_policy_is_set_when_an_entry_point_loads_torch(target):
    """By module and by path (`python recipes/pretrain.py`, `accelerate launch recipes/cpt.py`)."""
    assert (
        python(SPY, json.dumps(list(threads.POLICY)), target, env=without_policy()) == json.dumps(threads.POLICY) + "\n"
    )


def test_a_variable_the_user_set_wins_and_a_child_process_inherits_the_policy():
    ((name, value),) = threads.POLICY.items()
    code = (
        "import os, subprocess, sys\n"
        "import evaluation\n"
        f"print(os.environ['{name}'])\n"
        f"subprocess.run([sys.executable, '-c', \"import os; print(os.environ['{name}'])\"], check=True)"
    )
    assert python(code, env=without_policy()).split() == [value] * 2
    assert python(code, env={**without_policy(), name: "12345"}).split() == ["12345", "12345"]
