"""Judge costs and the FinOps preflight: prices, estimates, the cost ledger, budgets, decisions.

Everything runs against a real FileStore on a temporary folder. The one stand-in is
`BrokenStore`, a FileStore wrapper whose reads raise OSError, playing a failing disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from assay import findings
from assay.finops.budget import BUDGET_BLOCK_FIELDS, Budget, Decision, preflight
from assay.finops.ledger import (
    CostRecord,
    cost_key,
    period_bounds,
    read_costs,
    record_cost,
    scope_matches,
    spent,
)
from assay.finops.pricing import Prices, estimate, estimate_tokens, price
from assay.store import EvidenceStore, FileStore

WEDNESDAY = datetime(2024, 5, 15, 12, 0, tzinfo=UTC)
"""A fixed `now`: Wednesday 15 May 2024, noon UTC (ISO week 20 runs Mon 13 to Sun 19 May)."""

MINI = Prices(input_per_million=0.15, output_per_million=0.60)


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "store")


class BrokenStore(EvidenceStore):
    """A FileStore whose reads fail like a broken disk; writes still work."""

    def __init__(self, inner: FileStore) -> None:
        self.inner = inner
        self.uri = inner.uri

    @property
    def write_guard(self) -> str:
        return self.inner.write_guard

    def put_once(self, key: str, data: bytes) -> bool:
        return self.inner.put_once(key, data)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        raise OSError(5, "Input/output error", key)

    def exists(self, key: str) -> bool:
        raise OSError(5, "Input/output error", key)

    def list(self, prefix: str) -> Iterator[str]:
        raise OSError(5, "Input/output error", prefix)


class CountingStore(FileStore):
    """A FileStore that remembers which prefixes were listed."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.listed: list[str] = []

    def list(self, prefix: str) -> Iterator[str]:
        self.listed.append(prefix)
        return super().list(prefix)


def cost(
    at: datetime,
    usd: float,
    *,
    run_id: str = "run-1",
    chunk: int = 0,
    suite: str = "refunds",
    subject: str = "agent:support-bot",
) -> CostRecord:
    return CostRecord(
        run_id=run_id,
        chunk=chunk,
        suite=suite,
        subject=subject,
        model="gpt-4o-mini-2024-07-18",
        prompt_version="default@sha256:abc",
        calls=10,
        input_tokens=12_000,
        output_tokens=1_500,
        cost_usd=usd,
        at=at,
    )


_chunks = iter(range(1_000_000))


def spend(store: EvidenceStore, at: datetime, usd: float, **kwargs: str) -> None:
    """Record `usd` of spend at `at` under a fresh chunk number."""
    assert record_cost(store, cost(at, usd, chunk=next(_chunks), **kwargs)) is True


# --- pricing and estimates --------------------------------------------------------------------


def test_price_of_a_million_input_and_half_a_million_output_tokens() -> None:
    assert price(MINI, 1_000_000, 500_000) == pytest.approx(0.45)


def test_price_of_single_calls_and_of_nothing() -> None:
    assert price(MINI, 1_000, 200) == pytest.approx(0.00015 + 0.00012)
    assert price(MINI, 0, 0) == 0
    assert price(Prices(input_per_million=0, output_per_million=0), 10**9, 10**9) == 0


def test_price_rejects_negative_tokens_and_prices() -> None:
    with pytest.raises(ValueError, match="negative"):
        price(MINI, -1, 0)
    with pytest.raises(ValidationError):
        Prices(input_per_million=-0.1, output_per_million=0.6)
    with pytest.raises(ValidationError):
        Prices(input_per_million=float("nan"), output_per_million=0.6)


def test_estimate_is_requests_times_average_usage() -> None:
    # 1,000 requests × (1,000 in, 200 out) = 1M in ($0.15) + 0.2M out ($0.12).
    assert estimate(1_000, 1_000, 200, MINI) == pytest.approx(0.27)
    assert estimate(0, 1_000, 200, MINI) == 0
    with pytest.raises(ValueError, match="negative"):
        estimate(-1, 1_000, 200, MINI)


def test_estimate_tokens_is_chars_over_four_rounded_up_plus_overheads() -> None:
    # 400 chars → 100 tokens, 401 → 101 (rounded up), 0 → 0; plus 250 overhead per call.
    assert estimate_tokens([400, 401, 0]) == (100 + 101 + 0 + 3 * 250, 3 * 150)
    assert estimate_tokens([8, 3], prompt_overhead_tokens=10, output_tokens=5) == (2 + 1 + 20, 10)
    assert estimate_tokens([]) == (0, 0)
    with pytest.raises(ValueError, match="negative"):
        estimate_tokens([-1])


def test_estimate_tokens_feeds_price_and_estimate() -> None:
    lengths = [4_000] * 100  # 1,000 text tokens + 250 overhead each
    input_total, output_total = estimate_tokens(lengths)
    assert (input_total, output_total) == (125_000, 15_000)
    assert price(MINI, input_total, output_total) == pytest.approx(estimate(100, 1_250, 150, MINI))
    assert price(MINI, input_total, output_total) == pytest.approx(0.01875 + 0.009)


# --- models -----------------------------------------------------------------------------------


def test_budget_converts_from_the_finops_block() -> None:
    from blocks import FinOpsBudget

    block = FinOpsBudget(limit_usd=50, period="week", mode="throttle", scope="suite:refunds")
    budget = Budget(name="refunds-weekly", **block.model_dump(include=BUDGET_BLOCK_FIELDS))
    assert budget == Budget(
        name="refunds-weekly", limit_usd=50, period="week", mode="throttle", scope="suite:refunds"
    )
    assert set(FinOpsBudget.model_fields) >= BUDGET_BLOCK_FIELDS
    assert set(Budget.model_fields) == BUDGET_BLOCK_FIELDS | {"name"}
    defaults = Budget(name="d", **FinOpsBudget(limit_usd=1).model_dump(include=BUDGET_BLOCK_FIELDS))
    assert (defaults.period, defaults.mode, defaults.scope) == ("month", "block", "*")


@pytest.mark.parametrize(
    "scope",
    ["", "everything", "suite:", "suite:a b", "subject:agent", "subject:Agent:x", "team:x", "* "],
)
def test_budget_rejects_unknown_scopes(scope: str) -> None:
    with pytest.raises(ValidationError, match="scope"):
        Budget(name="b", limit_usd=1, scope=scope)


def test_budget_rejects_non_positive_limits_and_unknown_modes() -> None:
    for limit in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            Budget(name="b", limit_usd=limit)
    with pytest.raises(ValidationError):
        Budget(name="b", limit_usd=1, mode="warn")
    with pytest.raises(ValidationError):
        Budget(name="", limit_usd=1)


def test_cost_record_needs_an_aware_time_and_a_key_safe_run_id() -> None:
    with pytest.raises(ValidationError):
        cost(datetime(2024, 5, 15, 12, 0), 1.0)
    with pytest.raises(ValidationError):
        cost(WEDNESDAY, 1.0, run_id="../escape")
    with pytest.raises(ValidationError):
        cost(WEDNESDAY, -0.01)


# --- the ledger -------------------------------------------------------------------------------


def test_record_cost_writes_the_documented_key(store: FileStore) -> None:
    record = cost(WEDNESDAY, 0.25, run_id="20240515-abc", chunk=7)
    assert cost_key(record) == "costs/2024/05/15/20240515-abc-000007.json"
    assert record_cost(store, record) is True
    assert CostRecord.model_validate_json(store.get(cost_key(record))) == record


def test_the_key_is_dated_in_utc(store: FileStore) -> None:
    # 23:30 in New York on 14 May (UTC-4) is 03:30 UTC on 15 May.
    new_york = timezone(timedelta(hours=-4))
    record = cost(datetime(2024, 5, 14, 23, 30, tzinfo=new_york), 0.25)
    assert record.at == datetime(2024, 5, 15, 3, 30, tzinfo=UTC)
    assert cost_key(record) == "costs/2024/05/15/run-1-000000.json"


def test_a_retried_chunk_is_counted_once(store: FileStore) -> None:
    first = cost(WEDNESDAY, 0.25)
    assert record_cost(store, first) is True
    assert record_cost(store, first) is False  # identical retry
    # A retry whose usage differs slightly (e.g. a re-sent call) still does not add up.
    retry = cost(WEDNESDAY + timedelta(minutes=5), 0.30)
    assert cost_key(retry) == cost_key(first)
    assert record_cost(store, retry) is False
    assert spent(store, "day", "*", WEDNESDAY) == pytest.approx(0.25)
    assert CostRecord.model_validate_json(store.get(cost_key(first))) == first  # first wins
    assert list(store.list("costs/")) == [cost_key(first)]


def test_other_chunks_and_runs_add_up(store: FileStore) -> None:
    record_cost(store, cost(WEDNESDAY, 0.25, chunk=0))
    record_cost(store, cost(WEDNESDAY, 0.50, chunk=1))
    record_cost(store, cost(WEDNESDAY, 1.00, run_id="run-2", chunk=0))
    assert spent(store, "day", "*", WEDNESDAY) == pytest.approx(1.75)
    assert len(read_costs(store, date(2024, 5, 15), date(2024, 5, 15))) == 3


# --- periods ----------------------------------------------------------------------------------


def test_period_bounds() -> None:
    day = datetime(2024, 5, 15, tzinfo=UTC)
    assert period_bounds("day", WEDNESDAY) == (day, day + timedelta(days=1))
    monday = datetime(2024, 5, 13, tzinfo=UTC)
    assert period_bounds("week", WEDNESDAY) == (monday, monday + timedelta(days=7))
    assert period_bounds("month", WEDNESDAY) == (
        datetime(2024, 5, 1, tzinfo=UTC),
        datetime(2024, 6, 1, tzinfo=UTC),
    )
    assert period_bounds("month", datetime(2024, 12, 31, 23, 59, tzinfo=UTC)) == (
        datetime(2024, 12, 1, tzinfo=UTC),
        datetime(2025, 1, 1, tzinfo=UTC),
    )
    assert period_bounds("month", datetime(2024, 2, 29, 12, tzinfo=UTC))[1] == datetime(
        2024, 3, 1, tzinfo=UTC
    )


def test_periods_are_utc_whatever_the_zone_of_now() -> None:
    # Tuesday 14 May 22:00 at UTC-4 is Wednesday 02:00 UTC.
    late_tuesday = datetime(2024, 5, 14, 22, 0, tzinfo=timezone(timedelta(hours=-4)))
    assert period_bounds("day", late_tuesday)[0] == datetime(2024, 5, 15, tzinfo=UTC)
    with pytest.raises(ValueError, match="timezone-aware"):
        period_bounds("day", datetime(2024, 5, 15, 12))


def test_day_week_and_month_sums_exclude_earlier_periods(store: FileStore) -> None:
    spend(store, WEDNESDAY, 1.0)  # today
    spend(store, datetime(2024, 5, 15, 0, 0, tzinfo=UTC), 2.0)  # today, first instant
    spend(store, datetime(2024, 5, 14, 23, 59, 59, tzinfo=UTC), 4.0)  # yesterday
    spend(store, datetime(2024, 5, 13, 0, 0, tzinfo=UTC), 8.0)  # Monday: this week
    spend(store, datetime(2024, 5, 12, 23, 59, tzinfo=UTC), 16.0)  # Sunday: last week
    spend(store, datetime(2024, 5, 1, 0, 0, tzinfo=UTC), 32.0)  # first of the month
    spend(store, datetime(2024, 4, 30, 23, 59, tzinfo=UTC), 64.0)  # last month
    spend(store, datetime(2023, 5, 15, 12, 0, tzinfo=UTC), 128.0)  # a year ago
    assert spent(store, "day", "*", WEDNESDAY) == pytest.approx(3.0)
    assert spent(store, "week", "*", WEDNESDAY) == pytest.approx(15.0)
    assert spent(store, "month", "*", WEDNESDAY) == pytest.approx(63.0)


def test_iso_week_spans_the_new_year(store: FileStore) -> None:
    new_year = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)  # a Wednesday; its week began Mon 30 Dec
    spend(store, datetime(2024, 12, 30, 0, 0, tzinfo=UTC), 1.0)  # Monday: this week
    spend(store, datetime(2024, 12, 29, 23, 59, tzinfo=UTC), 2.0)  # Sunday: last week
    spend(store, datetime(2025, 1, 1, 8, 0, tzinfo=UTC), 4.0)
    assert spent(store, "week", "*", new_year) == pytest.approx(5.0)
    assert spent(store, "month", "*", new_year) == pytest.approx(4.0)
    assert spent(store, "day", "*", new_year) == pytest.approx(4.0)


def test_month_rolls_over_at_midnight_utc(store: FileStore) -> None:
    spend(store, datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC), 1.0)  # leap day
    spend(store, datetime(2024, 3, 1, 0, 0, tzinfo=UTC), 2.0)
    assert spent(store, "month", "*", datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)) == 1.0
    assert spent(store, "month", "*", datetime(2024, 3, 1, 0, 0, tzinfo=UTC)) == 2.0
    # 1 March 2024 is a Friday: the week (from Mon 26 Feb) still holds the leap-day record.
    assert spent(store, "week", "*", datetime(2024, 3, 1, 0, 0, tzinfo=UTC)) == 3.0


def test_reading_lists_only_the_days_of_the_period(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "store")
    spend(store, datetime(2023, 1, 1, tzinfo=UTC), 100.0)  # far outside every period
    spend(store, WEDNESDAY, 1.0)
    assert spent(store, "day", "*", WEDNESDAY) == 1.0
    assert store.listed == ["costs/2024/05/15/"]
    store.listed.clear()
    assert spent(store, "week", "*", WEDNESDAY) == 1.0
    assert store.listed == ["costs/2024/05/13/", "costs/2024/05/14/", "costs/2024/05/15/"]
    store.listed.clear()
    assert spent(store, "month", "*", WEDNESDAY) == 1.0
    assert store.listed == [f"costs/2024/05/{day:02d}/" for day in range(1, 16)]


def test_spent_on_an_empty_ledger_is_zero(store: FileStore) -> None:
    assert spent(store, "month", "*", WEDNESDAY) == 0


# --- scopes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "suite", "subject", "covered"),
    [
        ("*", "refunds", "agent:support-bot", True),
        ("suite:refunds", "refunds", "agent:support-bot@v2", True),
        ("suite:refunds", "refunds-v2", "agent:support-bot", False),
        ("suite:refunds", "billing", "agent:support-bot", False),
        ("subject:agent:support-bot", "refunds", "agent:support-bot", True),
        ("subject:agent:support-bot", "billing", "agent:support-bot@v2", True),
        ("subject:agent:support-bot", "refunds", "agent:support-bot-2", False),
        ("subject:agent:support-bot", "refunds", "model:support-bot", False),
        ("subject:agent:support-bot@v2", "refunds", "agent:support-bot@v2", True),
        ("subject:agent:support-bot@v2", "refunds", "agent:support-bot@v3", False),
        ("subject:agent:support-bot@v2", "refunds", "agent:support-bot", False),
        ("bogus", "refunds", "agent:support-bot", False),
    ],
)
def test_scope_matches(scope: str, suite: str, subject: str, covered: bool) -> None:
    assert scope_matches(scope, suite, subject) is covered


def test_spent_sums_only_the_scope(store: FileStore) -> None:
    spend(store, WEDNESDAY, 1.0, suite="refunds", subject="agent:bot")
    spend(store, WEDNESDAY, 2.0, suite="refunds", subject="agent:bot@v2")
    spend(store, WEDNESDAY, 4.0, suite="billing", subject="agent:bot")
    spend(store, WEDNESDAY, 8.0, suite="billing", subject="agent:other")
    assert spent(store, "day", "*", WEDNESDAY) == 15.0
    assert spent(store, "day", "suite:refunds", WEDNESDAY) == 3.0
    assert spent(store, "day", "subject:agent:bot", WEDNESDAY) == 7.0
    assert spent(store, "day", "subject:agent:bot@v2", WEDNESDAY) == 2.0
    assert spent(store, "day", "suite:nothing", WEDNESDAY) == 0


# --- preflight --------------------------------------------------------------------------------


def check(store: EvidenceStore, budgets: list[Budget] | None, projected: float = 1.0) -> Decision:
    return preflight(store, budgets, projected, "refunds", "agent:bot@v2", WEDNESDAY)


def test_within_budget_is_allowed(store: FileStore) -> None:
    spend(store, WEDNESDAY, 3.0, suite="refunds", subject="agent:bot")
    decision = check(store, [Budget(name="monthly", limit_usd=10)], projected=2.0)
    assert decision == Decision(
        allowed=True,
        status="allowed",
        budget="monthly",
        limit_usd=10,
        spent_usd=3.0,
        projected_usd=2.0,
        reason="budget monthly (block, month, *): spent $3.0000 + projected $2.0000 ≤ limit "
        "$10.0000",
    )


def test_reaching_the_limit_exactly_is_allowed(store: FileStore) -> None:
    spend(store, WEDNESDAY, 0.1)
    spend(store, WEDNESDAY, 0.2)
    # 0.1 + 0.2 + 0.7 is 1.0000000000000002 in floating point: still within a $1 limit.
    assert check(store, [Budget(name="b", limit_usd=1.0)], projected=0.7).status == "allowed"
    assert check(store, [Budget(name="b", limit_usd=1.0)], projected=0.71).status == "blocked"


def test_no_applicable_budget_allows_spending(store: FileStore) -> None:
    budgets = [
        Budget(name="billing", limit_usd=0.01, scope="suite:billing"),
        Budget(name="other-agent", limit_usd=0.01, scope="subject:agent:other"),
        Budget(name="v1-only", limit_usd=0.01, scope="subject:agent:bot@v1"),
    ]
    for configured in (budgets, []):
        decision = check(store, configured, projected=5.0)
        assert decision.allowed is True
        assert decision.status == "no_budget"
        assert (decision.budget, decision.limit_usd, decision.spent_usd) == (None, None, None)
        assert decision.projected_usd == 5.0


def test_alert_budget_allows_and_reports(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0, suite="refunds", subject="agent:bot")
    decision = check(store, [Budget(name="watch", limit_usd=10, mode="alert")], projected=2.0)
    assert (decision.allowed, decision.status, decision.budget) == (True, "alert", "watch")
    assert (decision.limit_usd, decision.spent_usd, decision.projected_usd) == (10, 9.0, 2.0)
    assert "> limit $10.0000" in decision.reason


def test_block_budget_stops_spending(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0, subject="agent:bot@v1")  # another variant, same subject
    budget = Budget(name="bot", limit_usd=10, mode="block", period="day", scope="subject:agent:bot")
    decision = check(store, [budget], projected=2.0)
    assert (decision.allowed, decision.status, decision.budget) == (False, "blocked", "bot")
    assert decision.spent_usd == 9.0
    assert decision.reason == (
        "budget bot (block, day, subject:agent:bot): spent $9.0000 + projected $2.0000 > limit "
        "$10.0000"
    )


def test_a_projection_alone_can_exceed_the_limit(store: FileStore) -> None:
    decision = check(store, [Budget(name="small", limit_usd=1)], projected=1.5)
    assert (decision.status, decision.spent_usd) == ("blocked", 0)


def test_throttle_budget_stops_spending(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0)
    decision = check(store, [Budget(name="slow", limit_usd=10, mode="throttle")], projected=2.0)
    assert (decision.allowed, decision.status, decision.budget) == (False, "throttled", "slow")


def test_unreadable_budget_store_refuses(store: FileStore) -> None:
    decision = check(store, None, projected=0.01)
    assert (decision.allowed, decision.status, decision.budget) == (False, "refused", None)
    assert (decision.limit_usd, decision.spent_usd, decision.projected_usd) == (None, None, 0.01)
    assert "fail closed" in decision.reason


def test_unreadable_ledger_refuses(store: FileStore) -> None:
    spend(store, WEDNESDAY, 1.0)
    broken = BrokenStore(store)
    decision = check(broken, [Budget(name="monthly", limit_usd=1000, mode="alert")])
    assert (decision.allowed, decision.status, decision.budget) == (False, "refused", "monthly")
    assert (decision.limit_usd, decision.spent_usd) == (1000, None)
    assert "OSError" in decision.reason
    # Without an applicable budget the ledger is not read, so there is nothing to refuse.
    assert check(broken, [Budget(name="b", limit_usd=1, scope="suite:x")]).status == "no_budget"


def test_corrupt_ledger_record_refuses(store: FileStore) -> None:
    store.put_once("costs/2024/05/15/run-x-000000.json", b"{not json")
    decision = check(store, [Budget(name="monthly", limit_usd=1000)])
    assert (decision.allowed, decision.status) == (False, "refused")
    assert "ValidationError" in decision.reason


@pytest.mark.parametrize(
    ("modes", "expected", "decider"),
    [
        (["alert", "throttle", "block"], "blocked", "b2"),
        (["block", "alert"], "blocked", "b0"),
        (["alert", "throttle"], "throttled", "b1"),
        (["alert", "alert"], "alert", "b0"),
    ],
)
def test_the_most_restrictive_outcome_wins(
    store: FileStore, modes: list[str], expected: str, decider: str
) -> None:
    spend(store, WEDNESDAY, 5.0)
    budgets = [
        Budget.model_validate({"name": f"b{i}", "limit_usd": 5.5, "mode": mode})
        for i, mode in enumerate(modes)
    ]
    # A generous budget that is not exceeded never softens the outcome.
    budgets.append(Budget(name="roomy", limit_usd=1000))
    decision = check(store, budgets, projected=1.0)
    assert (decision.status, decision.budget) == (expected, decider)
    assert decision.allowed is (expected == "alert")


def test_refused_ledger_wins_over_everything(store: FileStore) -> None:
    broken = BrokenStore(store)
    budgets = [Budget(name="a", limit_usd=1, mode="alert"), Budget(name="b", limit_usd=1)]
    assert check(broken, budgets).status == "refused"


def test_among_equals_the_budget_with_least_headroom_decides(store: FileStore) -> None:
    spend(store, WEDNESDAY, 5.0, suite="refunds", subject="agent:bot")
    budgets = [
        Budget(name="all-monthly", limit_usd=100),
        Budget(name="suite-daily", limit_usd=8, period="day", scope="suite:refunds"),
        Budget(name="bot-weekly", limit_usd=50, period="week", scope="subject:agent:bot"),
    ]
    decision = check(store, budgets, projected=1.0)
    assert (decision.status, decision.budget, decision.limit_usd) == ("allowed", "suite-daily", 8)
    spend(store, WEDNESDAY, 10.0, suite="refunds", subject="agent:bot")
    over = check(store, budgets, projected=1.0)
    assert (over.status, over.budget, over.spent_usd) == ("blocked", "suite-daily", 15.0)


def test_each_budget_reads_its_own_period(store: FileStore) -> None:
    spend(store, datetime(2024, 5, 2, tzinfo=UTC), 9.0)  # earlier this month, not this week
    budgets = [
        Budget(name="weekly", limit_usd=5, period="week"),
        Budget(name="monthly", limit_usd=10, period="month", mode="alert"),
    ]
    decision = check(store, budgets, projected=2.0)
    assert (decision.status, decision.budget, decision.spent_usd) == ("alert", "monthly", 9.0)


def test_nothing_to_spend_never_exceeds_a_budget(store: FileStore) -> None:
    spend(store, WEDNESDAY, 50.0)
    decision = check(store, [Budget(name="used-up", limit_usd=10)], projected=0.0)
    assert (decision.allowed, decision.status, decision.spent_usd) == (True, "allowed", 50.0)


def test_preflight_rejects_bad_projections_and_naive_times(store: FileStore) -> None:
    budgets = [Budget(name="b", limit_usd=1)]
    for bad in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="projected"):
            check(store, budgets, projected=bad)
    with pytest.raises(ValueError, match="timezone-aware"):
        preflight(store, budgets, 1.0, "refunds", "agent:bot", datetime(2024, 5, 15))


# --- findings ---------------------------------------------------------------------------------


def finding_for(decision: Decision) -> findings.Finding | None:
    return findings.budget_finding(decision, "run-9", "refunds", 3, "agent:bot@v2", WEDNESDAY)


def test_blocked_decision_gives_a_budget_blocked_finding(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0)
    decision = check(store, [Budget(name="monthly", limit_usd=10)], projected=2.0)
    finding = finding_for(decision)
    assert finding is not None
    assert (finding.kind, finding.run_id, finding.suite, finding.suite_version) == (
        "budget_blocked",
        "run-9",
        "refunds",
        3,
    )
    assert (finding.subject, finding.occurred_at) == ("agent:bot@v2", WEDNESDAY)
    assert finding.details == {
        "status": "blocked",
        "budget": "monthly",
        "limit_usd": 10,
        "spent_usd": 9.0,
        "projected_usd": 2.0,
        "reason": decision.reason,
    }
    assert finding.summary.startswith("refunds@3 · agent:bot@v2: judge spending stopped: ")
    assert "$9.0000" in finding.summary and "$10.0000" in finding.summary
    # It is an ordinary, write-once finding.
    assert findings.record(store, finding) is True
    assert findings.record(store, finding) is False
    assert findings.list_findings(store, "run-9") == [finding]


def test_throttled_and_refused_decisions_give_budget_blocked_findings(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0)
    throttled = check(store, [Budget(name="t", limit_usd=10, mode="throttle")], projected=2.0)
    refused = check(store, None)
    for decision in (throttled, refused):
        finding = finding_for(decision)
        assert finding is not None
        assert finding.kind == "budget_blocked"
        assert finding.details["status"] == decision.status
    refused_finding = finding_for(refused)
    assert refused_finding is not None
    assert refused_finding.details["budget"] is None
    assert "judge spending refused" in refused_finding.summary


def test_alert_decision_gives_a_budget_alert_finding(store: FileStore) -> None:
    spend(store, WEDNESDAY, 9.0)
    decision = check(store, [Budget(name="watch", limit_usd=10, mode="alert")], projected=2.0)
    finding = finding_for(decision)
    assert finding is not None
    assert finding.kind == "budget_alert"
    assert finding.details["budget"] == "watch"
    assert (finding.details["limit_usd"], finding.details["spent_usd"]) == (10, 9.0)


def test_allowed_and_no_budget_give_no_finding(store: FileStore) -> None:
    assert finding_for(check(store, [Budget(name="roomy", limit_usd=100)])) is None
    assert finding_for(check(store, [])) is None
