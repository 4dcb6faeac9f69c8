"""`assay costs` and `assay budget show`: the cost ledger read back, grouped and against budgets.

Ledger records are written with `assay.finops.ledger.record_cost` into a real file store; budgets
are real FinOpsBudget blocks saved to the session's Prefect API and deleted afterwards.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.finops.ledger import CostRecord, record_cost
from assay.store import FileStore
from blocks import FinOpsBudget

ROW_KEYS = {"key", "records", "calls", "input_tokens", "output_tokens", "cost_usd"}
TOTAL_KEYS = ROW_KEYS - {"key"}
STATUS_KEYS = {
    "name",
    "scope",
    "period",
    "mode",
    "limit_usd",
    "period_start",
    "period_end",
    "spent_usd",
    "remaining_usd",
    "used_pct",
}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def spend(
    store: FileStore,
    at: datetime,
    *,
    run: str,
    cost_usd: float,
    suite: str = "refunds",
    subject: str = "agent:x@v1",
    model: str = "judge-a",
    calls: int = 2,
    input_tokens: int = 200,
    output_tokens: int = 40,
) -> None:
    assert record_cost(
        store,
        CostRecord(
            run_id=run,
            chunk=0,
            suite=suite,
            subject=subject,
            model=model,
            prompt_version="default@abc",
            calls=calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
            at=at,
        ),
    )


def day(d: int, hour: int = 12) -> datetime:
    return datetime(2024, 5, d, hour, tzinfo=UTC)


@pytest.fixture
def ledger(store_dir: Path) -> FileStore:
    """Five records over 30 April – 3 May 2024, two suites, two subjects, two models."""
    store = FileStore(store_dir)
    spend(store, datetime(2024, 4, 30, 23, 59, tzinfo=UTC), run="april", cost_usd=9.0)
    spend(store, day(1, 0), run="r1", cost_usd=0.25, calls=5, input_tokens=1000)
    spend(store, day(2), run="r2", cost_usd=0.50, suite="billing", subject="agent:y@v2")
    spend(store, day(2, 23), run="r3", cost_usd=0.125, model="judge-b", output_tokens=7)
    spend(store, day(3), run="r4", cost_usd=1.0, model="judge-b")
    return store


def costs_json(*args: str) -> dict[str, object]:
    code, text = invoke("costs", *args, "--json")
    assert code == 0, text
    report: dict[str, object] = json.loads(text)
    return report


def test_costs_by_day_between_since_and_until(ledger: FileStore) -> None:
    report = costs_json("--since", "2024-05-01", "--until", "2024-05-02")

    assert set(report) == {"since", "until", "by", "rows", "total"}
    assert (report["since"], report["until"], report["by"]) == ("2024-05-01", "2024-05-02", "day")
    rows = report["rows"]
    assert isinstance(rows, list) and all(set(row) == ROW_KEYS for row in rows)
    assert [(r["key"], r["records"], r["calls"], r["cost_usd"]) for r in rows] == [
        ("2024-05-01", 1, 5, 0.25),
        ("2024-05-02", 2, 4, 0.625),
    ]
    assert rows[1]["input_tokens"] == 400 and rows[1]["output_tokens"] == 47
    assert report["total"] == {
        "records": 3,
        "calls": 9,
        "input_tokens": 1400,
        "output_tokens": 87,
        "cost_usd": 0.875,
    }


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        # suites, subjects and models: largest spend first
        ("suite", [("refunds", 3, 1.375), ("billing", 1, 0.5)]),
        ("subject", [("agent:x@v1", 3, 1.375), ("agent:y@v2", 1, 0.5)]),
        ("model", [("judge-b", 2, 1.125), ("judge-a", 2, 0.75)]),
    ],
)
def test_costs_grouped_by_suite_subject_and_model(
    ledger: FileStore, by: str, expected: list[tuple[str, int, float]]
) -> None:
    report = costs_json("--since", "2024-05-01", "--until", "2024-05-31", "--by", by)

    assert report["by"] == by
    rows = report["rows"]
    assert isinstance(rows, list)
    assert [(r["key"], r["records"], r["cost_usd"]) for r in rows] == expected
    total = report["total"]
    assert isinstance(total, dict) and set(total) == TOTAL_KEYS
    assert (total["records"], total["cost_usd"]) == (4, 1.875)  # 30 April is before --since


def test_costs_since_defaults_to_the_first_of_this_month(store_dir: Path) -> None:
    store = FileStore(store_dir)
    now = datetime.now(UTC)
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spend(store, now, run="this-month", cost_usd=0.5)
    spend(store, first, run="first-of-month", cost_usd=0.25)
    spend(store, first - timedelta(seconds=1), run="last-month", cost_usd=8.0)

    report = costs_json()

    assert (report["since"], report["until"]) == (str(first.date()), str(now.date()))
    total = report["total"]
    assert isinstance(total, dict)
    assert (total["records"], total["cost_usd"]) == (2, 0.75)


def test_costs_human_output_has_groups_and_the_total(ledger: FileStore) -> None:
    code, text = invoke("costs", "--since", "2024-05-01", "--until", "2024-05-03", "--by", "model")
    assert code == 0
    assert "by model" in text and "judge-a" in text and "judge-b" in text
    total_line = next(line for line in text.splitlines() if "total" in line)
    assert "$1.8750" in total_line and "1,600" in total_line  # 4 records x 400 input tokens

    code, text = invoke("costs", "--since", "2024-06-01", "--until", "2024-06-30")
    assert code == 0 and "No judge spend recorded 2024-06-01 … 2024-06-30" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "2024-02-30"], "--since: '2024-02-30' is not a date; use YYYY-MM-DD"),
        (["--since", "2024/05/01"], "--since: '2024/05/01' is not a date"),
        (["--until", "20240501"], "--until: '20240501' is not a date"),
        (["--since", "2024-05-03", "--until", "2024-05-01"], "2024-05-03 is after --until"),
        (["--by", "week"], "--by must be one of day, suite, subject, model"),
    ],
)
def test_costs_rejects_bad_options(store_dir: Path, args: list[str], message: str) -> None:
    code, text = invoke("costs", *args)
    assert code == 2
    assert message in " ".join(text.split())


def test_a_corrupt_ledger_record_is_reported_not_counted_as_zero(ledger: FileStore) -> None:
    ledger.put_once("costs/2024/05/02/broken-000000.json", b'{"run_id": "broken"')

    code, text = invoke("costs", "--since", "2024-05-01", "--until", "2024-05-03")

    assert code == 2
    assert "cost ledger unreadable" in text and "ValidationError" in text


# --- assay budget show (real Prefect API) -----------------------------------------------------

BUDGETS = {
    "test-show-all": FinOpsBudget(limit_usd=1.0, period="month", mode="block", scope="*"),
    "test-show-suite": FinOpsBudget(
        limit_usd=0.05, period="day", mode="alert", scope="suite:refunds"
    ),
    "test-show-subject": FinOpsBudget(
        limit_usd=0.02, period="week", mode="throttle", scope="subject:agent:x"
    ),
}


@pytest.fixture
def saved_budgets(prefect_api: str) -> Iterator[dict[str, FinOpsBudget]]:
    for name, block in BUDGETS.items():
        block.save(name, overwrite=True)
    try:
        yield BUDGETS
    finally:
        for name in BUDGETS:
            FinOpsBudget.delete(name)  # type: ignore[attr-defined]


def test_budget_show_spent_and_remaining_per_period_and_scope(
    saved_budgets: dict[str, FinOpsBudget], store_dir: Path
) -> None:
    store = FileStore(store_dir)
    now = datetime.now(UTC)
    spend(store, now, run="refunds-x", cost_usd=0.03)
    spend(store, now, run="billing-y", cost_usd=0.01, suite="billing", subject="agent:y@v1")
    spend(store, now - timedelta(days=40), run="old", cost_usd=5.0)  # before every period

    code, text = invoke("budget", "show", "--json")

    assert code == 0, text
    statuses = {s["name"]: s for s in json.loads(text)}
    assert set(statuses) == set(BUDGETS)
    assert all(set(s) == STATUS_KEYS for s in statuses.values())
    figures = {
        name: (s["scope"], s["period"], s["mode"], s["limit_usd"], s["spent_usd"])
        for name, s in statuses.items()
    }
    assert figures == {
        "test-show-all": ("*", "month", "block", 1.0, pytest.approx(0.04)),
        "test-show-suite": ("suite:refunds", "day", "alert", 0.05, pytest.approx(0.03)),
        "test-show-subject": ("subject:agent:x", "week", "throttle", 0.02, pytest.approx(0.03)),
    }
    assert statuses["test-show-all"]["remaining_usd"] == pytest.approx(0.96)
    assert statuses["test-show-all"]["used_pct"] == pytest.approx(4.0)
    assert statuses["test-show-suite"]["remaining_usd"] == pytest.approx(0.02)
    assert statuses["test-show-suite"]["used_pct"] == pytest.approx(60.0)
    assert statuses["test-show-subject"]["remaining_usd"] == pytest.approx(-0.01)
    assert statuses["test-show-subject"]["used_pct"] == pytest.approx(150.0)
    day_status = statuses["test-show-suite"]
    assert day_status["period_start"].startswith(str(now.date()))

    code, text = invoke("budget", "show")
    assert code == 0
    subject_line = next(line for line in text.splitlines() if "test-show-subject" in line)
    assert "throttle" in subject_line and "$0.0300" in subject_line, text
    assert "150.0%" in subject_line and "-$0.0100" in subject_line, text
    suite_line = next(line for line in text.splitlines() if "test-show-suite" in line)
    assert "60.0%" in suite_line and "$0.0200" in suite_line, text
    assert "/ $0.0500" in text and "subject:agent:x" in text


def test_budget_show_without_budgets(prefect_api: str, store_dir: Path) -> None:
    code, text = invoke("budget", "show")
    assert code == 0 and "No budgets saved" in text
    code, text = invoke("budget", "show", "--json")
    assert code == 0 and json.loads(text) == []


def test_budget_set_rejects_a_scope_the_preflight_cannot_read(
    prefect_api: str, store_dir: Path
) -> None:
    code, text = invoke("budget", "set", "test-bad-scope", "--limit-usd", "1", "--scope", "all")
    assert code == 2 and "scope 'all' is not" in " ".join(text.split())
    code, text = invoke("budget", "show", "--json")
    assert code == 0 and "test-bad-scope" not in text


def test_budget_show_with_a_malformed_saved_budget_is_unreadable(
    prefect_api: str, store_dir: Path
) -> None:
    FinOpsBudget(limit_usd=1.0, scope="everything").save("test-show-malformed", overwrite=True)
    try:
        code, text = invoke("budget", "show")
    finally:
        FinOpsBudget.delete("test-show-malformed")  # type: ignore[attr-defined]

    assert code == 2
    assert "budgets unreadable" in text and "No budgets" not in text


def test_budget_show_with_the_prefect_api_unreachable_is_unreadable(
    prefect_api: str, store_dir: Path
) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = f"http://127.0.0.1:{port}/api"
    with temporary_settings(updates={PREFECT_API_URL: api}):
        code, text = invoke("budget", "show", "--json")

    assert code == 2
    flat = " ".join(text.split())
    # refused before any block is read: the command's start-up check names the API
    assert f"cannot reach the Prefect API at {api}" in flat
