"""The house rules a reviewer would otherwise check by hand: imports point downward only, the remote-code model
files stand alone, and the lint configuration in pyproject.toml holds for the whole tree."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Ground floor first: a package may import the ones before it, never one after it. The benchmarks sit on top:
# they build their models with the tests' fixtures.
LAYERS = ("core", "modeling_eurobert", "evaluation", "model_cards", "recipes", "tests", "bench")
# Copied into every checkpoint and loaded with trust_remote_code: only torch, transformers and each other.
# The one exception: the benchmarks' own test runs them (their `main(argv)`), as a user's command line would.
ALLOWED_UPWARD = {("tests/test_bench.py", "bench")}
REMOTE_CODE = ("modeling_eurobert/modeling_eurobert.py", "modeling_eurobert/configuration_eurobert.py")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Absolute imports of a file, with their line numbers (`from a import b` gives `a` and `a.b`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def upward_imports(root: Path) -> list[str]:
    problems = []
    for rank, package in enumerate(LAYERS):
        for path in sorted((root / package).rglob("*.py")):
            seen = set()
            for line, module in imported_modules(path):
                top = module.split(".")[0]
                allowed = (str(path.relative_to(root)), top) in ALLOWED_UPWARD
                if top in LAYERS and LAYERS.index(top) > rank and line not in seen and not allowed:
                    seen.add(line)
                    problems.append(f"{path.relative_to(root)}:{line} imports {module} (a layer above {package})")
    return problems


def test_packages_import_downward_only():
    assert upward_imports(ROOT) == []


def test_the_check_sees_an_upward_import(tmp_path):
    for package in LAYERS:
        (tmp_path / package).mkdir()
    (tmp_path / "core" / "names.py").write_text("from recipes import manifest\nimport evaluation.report\n")
    (tmp_path / "recipes" / "study.py").write_text("from core import names\n")
    assert upward_imports(tmp_path) == ["core/names.py:1 imports recipes (a layer above core)",
                                        "core/names.py:2 imports evaluation.report (a layer above core)"]


def module_circles(root: Path) -> list[str]:
    """Circles among the tree's modules: every import, at module level or inside a function, is an edge (an import
    deferred into a function hides a circle from Python, not from a reader)."""
    modules = {".".join(path.relative_to(root).with_suffix("").parts): path for package in LAYERS
               for path in sorted((root / package).rglob("*.py"))}
    modules = {name.removesuffix(".__init__"): path for name, path in modules.items()}
    edges = {name: sorted({m for _, imported in imported_modules(path) for m in (imported, imported.rpartition(".")[0])
                           if m in modules and m != name}) for name, path in modules.items()}
    circles, state = [], {}

    def visit(name, stack):
        state[name] = "open"
        for target in edges[name]:
            if state.get(target) == "open":
                circles.append(" -> ".join(stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target, stack + [target])
        state[name] = "done"

    for name in sorted(modules):
        if name not in state:
            visit(name, [name])
    return circles


def test_modules_import_as_a_dag():
    assert module_circles(ROOT) == []


def test_the_check_sees_a_module_circle(tmp_path):
    for package in LAYERS:
        (tmp_path / package).mkdir()
    (tmp_path / "evaluation" / "findings.py").write_text("from evaluation import report\n")
    (tmp_path / "evaluation" / "report.py").write_text("def main():\n    from evaluation import findings\n")
    (tmp_path / "evaluation" / "statistics.py").write_text("import numpy\n")
    assert module_circles(tmp_path) == ["evaluation.findings -> evaluation.report -> evaluation.findings"]


def test_the_study_driver_is_on_top():
    users = [str(path.relative_to(ROOT)) for package in LAYERS[:5] for path in sorted((ROOT / package).rglob("*.py"))
             if any(module == "recipes.study" for _, module in imported_modules(path))]
    assert users == [], "recipes/study.py drives everything; nothing below the tests imports it"


@pytest.mark.parametrize("file", REMOTE_CODE)
def test_remote_code_files_stand_alone(file):
    path = ROOT / file
    outside = [module for _, module in imported_modules(path) if module.split(".")[0] in LAYERS]
    assert outside == [], f"{file} is shipped with checkpoints and must not import {outside}"
    relative = [node.module for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and node.level]
    assert set(relative) <= {"configuration_eurobert"}, relative


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
