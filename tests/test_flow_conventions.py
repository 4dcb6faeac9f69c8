"""Every flow is built with `flows/_conventions.py` `assay_flow`, and the decorator keeps the
four conventions: task runs untagged, the caller told the recorded result once, the verdict as
the final state, a suite run's report left to a caller that publishes it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect import Flow, tags, task
from prefect.client.orchestration import get_client
from prefect.context import TagsContext
from prefect.results import get_result_store
from prefect.settings import PREFECT_API_URL, temporary_settings
from pydantic import BaseModel

import flows._conventions as conventions
from assay.verdicts import FlowVerdict
from flows._conventions import assay_flow, publish_run_report, run_subflow, tell_caller
from tasks.verdicts import told_when_recorded, verdict_result
from tests.local_http import JsonHandler, serving

FLOWS = Path(__file__).resolve().parent.parent / "flows"
FLOW_MODULES = sorted(p.stem for p in FLOWS.glob("*.py") if p.stem != "_conventions")


class ToyOptions(BaseModel):
    label: str
    passes: bool = True


def _toy_verdict(result: dict[str, Any]) -> FlowVerdict:
    passed = bool(result["passes"])
    return FlowVerdict(name="Fine" if passed else "Not fine", message="toy", passed=passed)


@task
def _task_tags() -> list[str]:
    return sorted(TagsContext.get().current_tags)


def _toy_name(options: ToyOptions) -> str:
    return f"toy · {options.label}"


@assay_flow(run_name=_toy_name, verdict=_toy_verdict)
def toy(options: ToyOptions) -> dict[str, Any]:
    return {"label": options.label, "passes": options.passes, "task_tags": _task_tags()}


@assay_flow(run_name=lambda options: "early", verdict=None)
def early(options: ToyOptions) -> str:
    tell_caller("recorded")
    return "published"


@assay_flow(run_name=lambda options: "child", verdict=None)
def child(options: ToyOptions) -> str | None:
    return publish_run_report("file:///nowhere", "child-run")


@assay_flow(run_name=lambda options: "parent", verdict=None, publishes_subflow_reports=True)
def parent(options: ToyOptions) -> tuple[str | None, str | None, UUID | None]:
    state = run_subflow(child, options)
    report = publish_run_report("file:///nowhere", "parent-run")
    return verdict_result(state), report, state.state_details.flow_run_id


@assay_flow(run_name=lambda options: "direct", verdict=None)
def direct(options: ToyOptions) -> str | None:
    return child(options)


def _imports_prefect_flow(tree: ast.Module) -> bool:
    """Whether a module takes Prefect's `flow` (or `Flow`) by import or as `prefect.flow`."""
    return any(
        (
            isinstance(node, ast.ImportFrom)
            and node.module in ("prefect", "prefect.flows")
            and any(alias.name in ("flow", "Flow") for alias in node.names)
        )
        or (
            isinstance(node, ast.Attribute)
            and node.attr == "flow"
            and isinstance(node.value, ast.Name)
            and node.value.id == "prefect"
        )
        for node in ast.walk(tree)
    )


@pytest.mark.parametrize("module", FLOW_MODULES)
def test_every_flow_is_built_with_assay_flow(module: str) -> None:
    tree = ast.parse((FLOWS / f"{module}.py").read_text())
    assert not _imports_prefect_flow(tree), (
        f"flows/{module}.py uses Prefect's flow decorator: build the flow with "
        "flows._conventions.assay_flow (docs/architecture.md, How to add a flow)"
    )
    # Every flow assay_flow builds runs the same wrapper, whatever its body.
    wrapper = toy.fn.__code__
    loaded = importlib.import_module(f"flows.{module}")
    for name, value in vars(loaded).items():
        if isinstance(value, Flow) and value.fn.__module__ == loaded.__name__:
            assert value.fn.__code__ is wrapper, (
                f"flows.{module}.{name} is not built with assay_flow"
            )


def test_a_flow_takes_one_options_model() -> None:
    with pytest.raises(TypeError, match="one parameter, `options`"):

        @assay_flow(run_name=lambda options: "loose", verdict=None)  # type: ignore[type-var]
        def loose(store: str, judge_block: str | None = None) -> None: ...


@pytest.mark.usefixtures("prefect_api")
def test_tasks_untagged_caller_told_once_and_the_verdict_is_the_state() -> None:
    told: list[Any] = []
    with tags("assay", "suite:toy"), told_when_recorded("toy", told.append):
        passed = toy(ToyOptions(label="a"), return_state=True)
        failed = toy(ToyOptions(label="b", passes=False), return_state=True)

    result = verdict_result(passed)
    assert result["task_tags"] == []  # the flow run carries the tags, its tasks none
    assert (passed.type.value, passed.name) == ("COMPLETED", "Fine")
    assert (failed.type.value, failed.name) == ("FAILED", "Not fine")
    assert verdict_result(failed)["label"] == "b"  # a negative verdict still holds its result
    assert [r["label"] for r in told] == ["a", "b"]


@pytest.mark.usefixtures("prefect_api")
def test_a_body_that_tells_early_is_not_told_again() -> None:
    told: list[Any] = []
    with told_when_recorded("early", told.append):
        assert early(ToyOptions(label="x")) == "published"
    assert told == ["recorded"]


@pytest.mark.usefixtures("prefect_api")
def test_a_suite_runs_report_is_left_to_a_caller_that_publishes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    published: list[str] = []

    def publish(store: str, run_id: str) -> str:
        published.append(run_id)
        return f"link:{run_id}"

    monkeypatch.setattr(conventions, "publish_report", publish)
    with tags("assay", "suite:toy"):
        left, report, child_run = parent(ToyOptions(label="x"))
    assert (left, report) == (None, "link:parent-run")
    assert child(ToyOptions(label="y")) == "link:child-run"  # on its own, it publishes
    assert published == ["parent-run", "child-run"]
    with get_client(sync_client=True) as client:
        assert child_run is not None
        assert set(client.read_flow_run(child_run).tags) == {"assay", "suite:toy"}


@pytest.mark.usefixtures("prefect_api")
def test_a_flow_that_calls_another_directly_fails() -> None:
    with pytest.raises(RuntimeError, match="call run_subflow"):
        direct(ToyOptions(label="x"))


class _StorageAsked(JsonHandler):
    """A Prefect API that counts the reads of its default result storage (`GET /admin/storage`)
    and answers none configured."""

    asked = 0

    def answer(self, method: str, path: str) -> tuple[int, object]:
        if path.split("?")[0] == "/api/admin/storage":
            type(self).asked += 1
        return 200, {"default_result_storage_block_id": None}


def test_a_flow_names_its_result_storage_so_prefect_does_not_ask_its_server_for_one() -> None:
    """Prefect asks its server for a default result storage twice before every flow run that
    names none (two API round trips on the way to the first task); an Assay flow persists
    nothing and names Prefect's local storage path."""
    with (
        serving(_StorageAsked) as server,
        temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{server.server_port}/api"}),
    ):
        store = get_result_store().update_for_flow(toy, _sync=True)
    assert _StorageAsked.asked == 0
    assert (toy.persist_result, type(store.result_storage).__name__) == (False, "LocalFileSystem")
