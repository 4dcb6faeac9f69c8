"""The layer rules (SPEC §2, docs/architecture.md), read from every module's imports with `ast`.

- `assay/` is the domain core: no `prefect*`, `flows`, `tasks` or `blocks` import anywhere under
  it except the edges, `assay/cli/` and `assay/api/`;
- the edges import nothing from `tasks/` (configuration comes from `blocks/`);
- the edges launch flows only through the one launcher, `flows/launch.py`: they import no other
  module of `flows/` (so they call no flow object) and nothing that starts deployment runs;
- `tasks/` and `blocks/` import no `flows/`;
- no import cycles between packages (a feature package of `assay/`, a ground-floor module of
  `assay/`, or one of `tasks`, `flows`, `blocks`, `deployments`).

Every import counts, also one inside a function or under `TYPE_CHECKING`, and a string handed
to `importlib.import_module` or `__import__` (its constant prefix, for an f-string such as
`f"flows.{name}"`): a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ("assay", "tasks", "flows", "blocks", "deployments")


@dataclass(frozen=True)
class Import:
    source: str
    """The importing module (`assay.runs.records`)."""
    target: str
    """The imported module, as precisely as it is known (`assay.suites.registry`)."""
    where: str
    """`path:line`, for the failure message."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for top in TOP_LEVEL
        for path in sorted((ROOT / top).rglob("*.py"))
        if ".venv" not in path.parts
    }


def _string_import(node: ast.Call) -> str | None:
    """The module named by `import_module("…")` / `__import__("…")`: the constant text, or the
    constant prefix of an f-string up to its last dot (`f"flows.{name}"` → `flows`)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.JoinedStr) and argument.values:
        first = argument.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rpartition(".")[0] or first.value
    return None


def _imports() -> list[Import]:
    modules = _modules()
    found: list[Import] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [Import(name, alias.name, where) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    found.append(Import(name, submodule if submodule in modules else base, where))
            elif isinstance(node, ast.Call) and (target := _string_import(node)):
                found.append(Import(name, target, where))
    return found


def _unit(module: str) -> str | None:
    """The package a module belongs to for the cycle rule (None: outside the project)."""
    parts = module.split(".")
    if parts[0] not in TOP_LEVEL:
        return None
    if parts[0] == "assay" and len(parts) > 1:
        return f"assay.{parts[1]}"
    return parts[0]


def _cycles(edges: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[list[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                yield from visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                yield sorted(component)

    for node in sorted(edges):
        if node not in index:
            yield from visit(node)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


EDGES = ("assay.cli", "assay.api")
"""The command line and the HTTP service: the parts of assay/ that launch flows."""


ORCHESTRATION = ("flows", "tasks", "blocks")
"""The layers above the domain: only the edges may reach them from under assay/."""


def test_the_domain_core_imports_no_prefect_or_orchestration_outside_the_edges() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if _within(i.source, "assay")
        and not any(_within(i.source, edge) for edge in EDGES)
        and (
            i.target.split(".")[0].startswith("prefect")
            or any(_within(i.target, layer) for layer in ORCHESTRATION)
        )
    ]
    assert broken == [], (
        "Prefect, flows/, tasks/ or blocks/ under assay/ outside assay/cli/ and assay/api/:\n"
        + "\n".join(broken)
    )


def test_the_edges_import_nothing_from_tasks() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if any(_within(i.source, edge) for edge in EDGES) and _within(i.target, "tasks")
    ]
    assert broken == [], "assay/cli/ or assay/api/ imports tasks/:\n" + "\n".join(broken)


LAUNCHER = "flows.launch"
"""The one module that starts flow runs for the edges."""
DEPLOYMENT_RUNS = ("prefect.deployments", "prefect.flow_runs")
"""Where Prefect's `run_deployment` lives: starting a deployment run is launching a flow."""


def test_the_edges_launch_flows_only_through_the_launcher() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if any(_within(i.source, edge) for edge in EDGES)
        and (
            (_within(i.target, "flows") and i.target != LAUNCHER)
            or any(_within(i.target, runs) for runs in DEPLOYMENT_RUNS)
        )
    ]
    assert broken == [], (
        f"assay/cli/ or assay/api/ launches flows other than through {LAUNCHER}:\n"
        + "\n".join(broken)
    )


def test_tasks_and_blocks_import_no_flows() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if (_within(i.source, "tasks") or _within(i.source, "blocks"))
        and _within(i.target, "flows")
    ]
    assert broken == [], "tasks/ or blocks/ imports flows/:\n" + "\n".join(broken)


def test_no_import_cycles_between_packages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    witness: dict[tuple[str, str], str] = {}
    for i in _imports():
        source, target = _unit(i.source), _unit(i.target)
        if source is None or target is None or source == target or target == "assay":
            continue  # `assay/__init__.py` is only the package's docstring and version
        edges[source].add(target)
        witness.setdefault((source, target), f"{i.where}: {i.source} imports {i.target}")
    cycles = list(_cycles(edges))
    lines = [
        f"{' <-> '.join(cycle)}: "
        + "; ".join(witness[(a, b)] for a in cycle for b in cycle if (a, b) in witness)
        for cycle in cycles
    ]
    assert cycles == [], "import cycles between packages:\n" + "\n".join(lines)


def test_the_rules_see_the_whole_tree() -> None:
    """A guard on the reader itself: it finds the modules and the edges the rules are about."""
    imports = _imports()
    sources = {i.source for i in imports}
    assert {"assay.cli", "assay.judge.service", "tasks.scoring", "flows.suite_run"} <= sources
    assert any(i.source == "flows.suite_run" and i.target.startswith("tasks.") for i in imports)
    assert any(i.source.startswith("assay.cli") and i.target.startswith("prefect") for i in imports)
    # The edges reach flows through the launcher, which names them by string.
    assert any(i.source.startswith("assay.cli") and i.target == LAUNCHER for i in imports)
    assert any(i.source.startswith("assay.api") and i.target == LAUNCHER for i in imports)
    assert any(i.source == LAUNCHER and i.target == "flows" for i in imports)


def test_string_imports_are_read(tmp_path: Path) -> None:
    """A guard on the reader: `import_module` strings and f-string prefixes are imports."""
    tree = ast.parse(
        "import importlib\n"
        "importlib.import_module('tasks.scoring')\n"
        "import_module(f'tasks.{name}')\n"
        "__import__('blocks')\n"
        "import_module(name)\n"
    )
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert [_string_import(call) for call in calls] == ["tasks.scoring", "tasks", "blocks", None]


def test_the_architecture_page_names_every_package_and_ground_floor_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(path.parent.name for path in (ROOT / "assay").glob("*/__init__.py"))
    ground = sorted(path.stem for path in (ROOT / "assay").glob("*.py") if path.stem != "__init__")
    unnamed = [
        f"assay/{name}/"
        for name in packages
        if f"`assay/{name}/`" not in page and (f"{name}/" not in page)
    ]
    floor = page.split("ground floor:", 1)[1].split("```", 1)[0]
    unnamed += [
        f"assay/{name}.py" for name in ground if name not in floor.replace(",", " ").split()
    ]
    assert unnamed == [], "docs/architecture.md does not name: " + ", ".join(unnamed)
