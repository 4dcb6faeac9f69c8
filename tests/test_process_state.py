"""What a process remembers: every cache, frozen object, context variable and rebound global in
`assay/`, `flows/`, `tasks/`, `blocks/` and `deployments/` is named on the architecture page,
and `reset_process_state()` forgets exactly the ones the page says it forgets.

The source is read with `ast`, so a new cache fails here until it is on the page (and, if the
page says reset forgets it, registered with `remembered(__name__, "name", forget)`).
"""

from __future__ import annotations

import ast
import gc
import importlib
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from assay import process_state
from assay.process_state import remembered, remembered_names, reset_process_state

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("assay", "flows", "tasks", "blocks", "deployments")
PAGE = ROOT / "docs" / "architecture.md"
SECTION = "## What a process remembers"

CACHE_DECORATORS = frozenset({"lru_cache", "cache"})
CONTAINERS = frozenset(
    {
        "dict",
        "list",
        "set",
        "OrderedDict",
        "defaultdict",
        "deque",
        "WeakValueDictionary",
        "WeakKeyDictionary",
        "WeakSet",
        "local",
    }
)
"""Types whose empty instance at module level is state filled at run time."""
RESETS = frozenset({"forgotten", "kept", "unfrozen"})


class Site(NamedTuple):
    """Something a process remembers: the file and the name it goes by there (a gc.freeze site
    by its enclosing function)."""

    path: str
    name: str


def _called(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else None


def _empty_container(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set):
        return not (value.keys if isinstance(value, ast.Dict) else value.elts)
    if not isinstance(value, ast.Call) or _called(value) not in CONTAINERS:
        return False
    return not value.args or (_called(value) == "defaultdict" and len(value.args) == 1)


def _assigned(node: ast.stmt) -> tuple[str, ast.expr] | None:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return node.target.id, node.value
    return None


def _sources() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(), str(path))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _holders(trees: dict[str, ast.Module]) -> frozenset[str]:
    """Classes that keep an empty container on `self`: a module-level instance is a cache."""
    found = set()
    for tree in trees.values():
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    on_self = isinstance(target, ast.Attribute) and _called(target.value) == "self"
                    if on_self and _empty_container(node.value):
                        found.add(cls.name)
    return frozenset(found)


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _module_state(tree: ast.Module, holders: frozenset[str]) -> Iterator[str]:
    for statement in tree.body:
        assigned = _assigned(statement)
        if assigned is not None:
            name, value = assigned
            held = isinstance(value, ast.Call) and _called(value) in holders
            if held or _empty_container(value):
                yield name


def _context_variables(tree: ast.Module) -> Iterator[str]:
    for statement in (node for node in ast.walk(tree) if isinstance(node, ast.stmt)):
        assigned = _assigned(statement)
        if assigned is not None and _called(assigned[1]) == "ContextVar":
            yield assigned[0]


def _in_functions(tree: ast.Module) -> Iterator[str]:
    """Cached functions, functions that call `gc.freeze`, and globals rebound in a function."""
    for function in _functions(tree):
        if any(_called(decorator) in CACHE_DECORATORS for decorator in function.decorator_list):
            yield function.name
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                yield from node.names
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "gc.freeze":
                yield function.name


def remembered_sites() -> set[Site]:
    """Every cache, module-level container filled at run time, gc.freeze site, context
    variable and global rebound at run time in the source."""
    trees = _sources()
    holders = _holders(trees)
    return {
        Site(path, name)
        for path, tree in trees.items()
        for found in (_module_state(tree, holders), _context_variables(tree), _in_functions(tree))
        for name in found
    }


def registered_sites() -> set[Site]:
    """Every `remembered(__name__, "name", …)` line in the source."""
    sites = set()
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) == "remembered":
                module, name = node.args[:2]
                assert isinstance(module, ast.Name) and module.id == "__name__", path
                assert isinstance(name, ast.Constant) and isinstance(name.value, str), path
                sites.add(Site(path, name.value))
    return sites


def page_rows() -> dict[Site, set[str]]:
    """The section's table rows: (`path`, `name`) → what `reset_process_state` does to it (a
    function that caches and freezes has a row of each)."""
    section = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows: dict[Site, set[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        found = [re.fullmatch(r"`([^`]+)`", cell) for cell in cells[:2]]
        if line.startswith("|") and all(found):
            path, name = (match.group(1) for match in found if match)
            reset = cells[-1].split(":")[0].split()[0].lower()
            assert reset in RESETS, f"{path} {name}: last cell starts with one of {sorted(RESETS)}"
            rows.setdefault(Site(path, name), set()).add(reset)
    return rows


def test_the_page_names_everything_a_process_remembers() -> None:
    rows = page_rows()
    missing = sorted(f"{site.path}: {site.name}" for site in remembered_sites() - set(rows))
    assert not missing, f"add to docs/architecture.md, {SECTION[3:]!r}: {missing}"


def test_the_page_names_nothing_the_source_does_not_have() -> None:
    stale = sorted(f"{site.path}: {site.name}" for site in set(page_rows()) - remembered_sites())
    assert not stale, f"no longer in the source, drop from the page: {stale}"


def test_reset_forgets_what_the_page_says_it_forgets() -> None:
    forgotten = {site for site, resets in page_rows().items() if "forgotten" in resets}
    registered = registered_sites()
    assert sorted(forgotten - registered) == [], "register with `remembered(__name__, …)`"
    assert sorted(registered - forgotten) == [], "say `forgotten` on the page"


def test_every_registration_names_its_module_and_a_name_there() -> None:
    for site in registered_sites():
        module = importlib.import_module(site.path.removesuffix(".py").replace("/", "."))
        assert hasattr(module, site.name), site
        assert f"{module.__name__}.{site.name}" in remembered_names(), site


def test_reset_forgets_a_registered_cache_under_its_lock_and_unfreezes() -> None:
    from assay.scorers.spec import _SPECS, ScorerSpec

    ScorerSpec.model_validate({"contains": "refund"})
    assert _SPECS
    held = threading.Lock()
    seen: list[bool] = []
    remembered(__name__, "probe", lambda: seen.append(held.locked()), held)
    gc.freeze()
    try:
        reset_process_state()
    finally:
        del process_state._REMEMBERED[f"{__name__}.probe"]
    assert not _SPECS
    assert seen == [True]
    assert gc.get_freeze_count() == 0


def test_a_new_service_starts_from_nothing_its_process_remembered(
    store_dir: Path,
) -> None:
    pytest.importorskip("fastapi")
    from assay.api import ServeSettings, create_app
    from assay.scorers.spec import _SPECS, ScorerSpec

    ScorerSpec.model_validate({"contains": "refund"})
    create_app(ServeSettings(store=f"file://{store_dir}", start_prefect=False))
    assert not _SPECS
