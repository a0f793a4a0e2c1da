"""The house rules a reviewer would otherwise check by hand: imports point downward only, the remote-code model
files stand alone, and the lint configuration in pyproject.toml holds for the whole tree."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The package graph, a DAG: what each package may import. The library (pretraining, evaluation, model_cards) defines;
# recipes only choose and orchestrate; pretraining and evaluation sit on the same floor and never import each other.
# The benchmarks sit on top: they build their models with the tests' fixtures.
MAY_IMPORT = {
    "core": set(),
    "modeling_eurobert": {"core"},
    "pretraining": {"core", "modeling_eurobert"},
    "evaluation": {"core", "modeling_eurobert"},
    "analysis": {"core"},
    "model_cards": {"core", "modeling_eurobert", "evaluation", "analysis"},
    "recipes": {"core", "modeling_eurobert", "pretraining", "evaluation", "analysis", "model_cards"},
    "tests": {"core", "modeling_eurobert", "pretraining", "evaluation", "analysis", "model_cards", "recipes"},
    "bench": {"core", "modeling_eurobert", "pretraining", "evaluation", "analysis", "model_cards", "recipes", "tests"},
}
PACKAGES = tuple(MAY_IMPORT)
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


def forbidden_imports(root: Path, graph: dict = MAY_IMPORT) -> list[str]:
    """Imports of a package the graph does not let the importing package reach."""
    problems = []
    for package, allowed in graph.items():
        for path in sorted((root / package).rglob("*.py")):
            seen = set()
            for line, module in imported_modules(path):
                top = module.split(".")[0]
                exempt = (str(path.relative_to(root)), top) in ALLOWED_UPWARD
                if top in graph and top != package and top not in allowed and line not in seen and not exempt:
                    seen.add(line)
                    problems.append(
                        f"{path.relative_to(root)}:{line} imports {module} ({package} may not import {top})"
                    )
    return problems


def test_the_package_graph_is_a_dag():
    order, state = [], {}

    def visit(package):
        assert state.get(package) != "open", f"the package graph has a circle through {package}"
        if package not in state:
            state[package] = "open"
            for target in sorted(MAY_IMPORT[package]):
                visit(target)
            state[package] = "done"
            order.append(package)

    for package in PACKAGES:
        visit(package)
    assert not MAY_IMPORT["pretraining"] & {"evaluation", "model_cards", "recipes"}  # the library beside evaluation
    assert "pretraining" not in MAY_IMPORT["evaluation"]


def test_packages_import_along_the_graph_only():
    assert forbidden_imports(ROOT) == []


def test_the_check_sees_a_forbidden_import(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "core" / "names.py").write_text("from recipes import manifest\nimport evaluation.report\n")
    (tmp_path / "pretraining" / "data.py").write_text("from evaluation import tasks\nfrom core import cli\n")
    (tmp_path / "recipes" / "study.py").write_text("from core import names\nfrom pretraining import data\n")
    assert forbidden_imports(tmp_path) == [
        "core/names.py:1 imports recipes (core may not import recipes)",
        "core/names.py:2 imports evaluation.report (core may not import evaluation)",
        "pretraining/data.py:1 imports evaluation (pretraining may not import evaluation)",
    ]


def module_circles(root: Path) -> list[str]:
    """Circles among the tree's modules: every import, at module level or inside a function, is an edge (an import
    deferred into a function hides a circle from Python, not from a reader)."""
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts): path
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    }
    modules = {name.removesuffix(".__init__"): path for name, path in modules.items()}
    edges = {
        name: sorted(
            {
                m
                for _, imported in imported_modules(path)
                for m in (imported, imported.rpartition(".")[0])
                if m in modules and m != name
            }
        )
        for name, path in modules.items()
    }
    circles, state = [], {}

    def visit(name, stack):
        state[name] = "open"
        for target in edges[name]:
            if state.get(target) == "open":
                circles.append(" -> ".join(stack[stack.index(target) :] + [target]))
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
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "evaluation" / "findings.py").write_text("from evaluation import report\n")
    (tmp_path / "evaluation" / "report.py").write_text("def main():\n    from evaluation import findings\n")
    (tmp_path / "evaluation" / "statistics.py").write_text("import numpy\n")
    assert module_circles(tmp_path) == ["evaluation.findings -> evaluation.report -> evaluation.findings"]


# A result record's own keys and status words: read through core/store.py's accessors only (`scored`, ...)
RECORD_KEYS = {"per_instance", "main_metric", "instance_scores", "trivial_baseline", "evaluation", "kind"}
STATUS_WORDS = {"ok", "diverged"}
# (file, function) whose reads of those names are of another dict: summary rows (the trivial_baseline column), a
# scorer's or a probe's metrics (their per_instance columns), a command's exit status
NOT_RECORDS = {("analysis/statistics.py", f) for f in ("trivial_baseline", "above_baseline", "at_baseline")} | {
    ("analysis/report.py", "checks_lines"),
    ("analysis/findings.py", "chance_reasons"),
    ("evaluation/retrieval.py", "score"),
    ("evaluation/probe.py", "with_predictions"),
    ("bench/gpu_check.py", "report"),
    ("model_cards/summary.py", "baseline"),  # a summary.csv row's column
}


def _in_functions(node, function=None):
    """(node, the outermost function or method around it) of every node under `node`."""
    for child in ast.iter_child_nodes(node):
        inner = (
            child.name if function is None and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        )
        yield child, inner
        yield from _in_functions(child, inner)


def _read_key(node):
    """What a node reads a dict by: x["key"], x.get("key"), x.pop("key"), "key" in x; else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
        return node.args[0] if node.args else None
    return node.left if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) else None


def raw_record_reads(root: Path) -> list[str]:
    """Reads of `RECORD_KEYS` and status words used as values (not in a docstring, a dict key or a subscript)
    outside core/store.py, in every package but the tests."""
    found = []
    for path in [p for package in PACKAGES if package != "tests" for p in sorted((root / package).rglob("*.py"))]:
        name, nodes = str(path.relative_to(root)), list(_in_functions(ast.parse(path.read_text())))
        names = {id(n.value) for n, _ in nodes if isinstance(n, ast.Expr)}  # docstrings, subscripts, dict keys
        names |= {id(n.slice) for n, _ in nodes if isinstance(n, ast.Subscript)}
        names |= {id(key) for n, _ in nodes if isinstance(n, ast.Dict) for key in n.keys}
        for node, function in nodes:
            read = isinstance(key := _read_key(node), ast.Constant) and key.value in RECORD_KEYS
            word = isinstance(node, ast.Constant) and node.value in STATUS_WORDS and id(node) not in names
            if (read or word) and name != "core/store.py" and (name, function) not in NOT_RECORDS:
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_result_records_are_read_through_core_store_only(tmp_path):
    """(Before issue 44 it found 49 raw reads: statistics, findings, the importer, mteb, run, metrics, the cards.)"""
    assert raw_record_reads(ROOT) == []
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "x.py").write_text(
        '"""ok"""\ndef f(r, s):\n    s["ok"] = r.get("kind")\n'
        '    return r["main_metric"] if r["status"] == "ok" else None\n'
    )
    assert raw_record_reads(tmp_path) == [
        "analysis/x.py:3 r.get('kind')",
        "analysis/x.py:4 'ok'",
        "analysis/x.py:4 r['main_metric']",
    ]


def test_the_study_driver_is_on_top():
    users = [
        str(path.relative_to(ROOT))
        for package in PACKAGES[:6]
        for path in sorted((ROOT / package).rglob("*.py"))
        if any(module == "recipes.study" for _, module in imported_modules(path))
    ]
    assert users == [], "recipes/study.py drives everything; nothing below the tests imports it"


@pytest.mark.parametrize("file", REMOTE_CODE)
def test_remote_code_files_stand_alone(file):
    path = ROOT / file
    outside = [module for _, module in imported_modules(path) if module.split(".")[0] in PACKAGES]
    assert outside == [], f"{file} is shipped with checkpoints and must not import {outside}"
    relative = [
        node.module for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom) and node.level
    ]
    assert set(relative) <= {"configuration_eurobert"}, relative


LONGEST_FUNCTION = 50  # statements, nested ones included: a longer function does several things. Counted in
# statements, not lines, so that `ruff format` (which decides the layout) never moves it.


def long_functions(root: Path) -> list[str]:
    """Functions of the library (every package but the tests) of more than `LONGEST_FUNCTION` statements."""
    found = []
    for package in (p for p in PACKAGES if p != "tests"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    statements = sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - 1
                    if statements > LONGEST_FUNCTION:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({statements} statements)")
    return found


def test_no_library_function_holds_more_than_50_statements(tmp_path):
    assert long_functions(ROOT) == []
    (tmp_path / "analysis").mkdir()  # the check sees one
    (tmp_path / "analysis" / "long.py").write_text("def f():\n" + "    x = 1\n" * 51)
    assert long_functions(tmp_path) == ["analysis/long.py:1 f (51 statements)"]


def test_ruff_format_leaves_the_tree_as_it_is():
    """The layout is ruff format's (the pinned ruff, pyproject's 120 columns), never compacted by hand."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_longest_test_files_are_handed_out_first():
    """conftest's LONGEST_FIRST names files that exist, and xdist keeps that order (its default reorders files by
    their number of tests, which left the study run for last: 5:50 instead of 4:42 on 2 cores)."""
    import tomllib

    from tests.conftest import LONGEST_FIRST

    assert [name for name in LONGEST_FIRST if not (ROOT / "tests" / name).is_file()] == []
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "--no-loadscope-reorder" in addopts and addopts[addopts.index("--dist") + 1] == "loadfile"


def test_the_report_and_the_cards_load_neither_torch_nor_datasets():
    """The analysis reads result files and the cards read configs and task definitions: neither needs the fine-tuning
    stack (torch, transformers, datasets), measured on the modules a fresh process has loaded."""
    code = (
        "import sys; import analysis.report, model_cards.generate; from evaluation import tasks; "
        "tasks.describe_test_data('sst2', 'offline'); "
        "model_cards.generate._is_causal(sys.argv[1]); "
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    checkpoint = ROOT / "modeling_eurobert" / "architectures" / "tiny"  # a config.json, as a checkpoint holds one
    done = subprocess.run([sys.executable, "-c", code, str(checkpoint)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]
