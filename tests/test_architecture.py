"""The layer rules (SPEC §2, docs/architecture.md), read from every module's imports with `ast`.

- `assay/` is the domain core: no Prefect import anywhere under it except `assay/cli/`;
- `assay/cli/` imports nothing from `tasks/` (configuration comes from `blocks/`);
- `tasks/` imports no `flows/`;
- no import cycles between packages (a feature package of `assay/`, a ground-floor module of
  `assay/`, or one of `tasks`, `flows`, `blocks`, `deployments`).

Every import counts, also one inside a function or under `TYPE_CHECKING`: a lazy import is
still a dependency.
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


def test_the_domain_core_imports_no_prefect_outside_the_edges() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if _within(i.source, "assay")
        and not any(_within(i.source, edge) for edge in EDGES)
        and i.target.split(".")[0].startswith("prefect")
    ]
    assert broken == [], "Prefect under assay/ outside assay/cli/ and assay/api/:\n" + "\n".join(
        broken
    )


def test_the_edges_import_nothing_from_tasks() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if any(_within(i.source, edge) for edge in EDGES) and _within(i.target, "tasks")
    ]
    assert broken == [], "assay/cli/ or assay/api/ imports tasks/:\n" + "\n".join(broken)


def test_tasks_import_no_flows() -> None:
    broken = [
        f"{i.where}: {i.source} imports {i.target}"
        for i in _imports()
        if _within(i.source, "tasks") and _within(i.target, "flows")
    ]
    assert broken == [], "tasks/ imports flows/:\n" + "\n".join(broken)


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
