"""Live-session monitoring (SPEC §13): rates, windows, no data, unknown fields, thresholds, the
flow and the CLI against a real Prefect API, and the canary: a text field is rejected and its
value reaches neither the store, Prefect's files and database, nor any output or log."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.findings import list_findings
from assay.monitor.figures import window_stats
from assay.monitor.options import MonitorOptions
from assay.monitor.render import markdown_report
from assay.monitor.report import (
    ABSENCE_NOTE,
    MonitorReport,
    assess,
    load_report,
    monitor_findings,
    report_key,
    save_report,
)
from assay.monitor.signals import SessionSignal, SignalCounts, read_signals
from assay.monitor.thresholds import MonitorThresholds
from assay.monitor.windows import parse_now, parse_window
from assay.stats import newcombe_diff, wilson
from assay.store import FileStore
from tests.conftest import EXAMPLES, PREFECT_HOME
from tests.servers import S3Server
from tests.test_minimal_data import (
    _files_containing,
    _flush_prefect_logs,
    _prefect_database_dir,
)

NOW = datetime(2026, 6, 2, tzinfo=UTC)
EXAMPLE = EXAMPLES / "monitor" / "signals.jsonl"
CANARY = "CANARY-5d1c-monitor-never-store"
SUBJECT_KEYS = {
    "subject",
    "status",
    "expected",
    "sessions",
    "unknown",
    "states",
    "completion",
    "failure",
    "high_severity",
    "cost_per_completed",
    "tokens",
    "previous",
    "change",
    "findings",
    "outside",
}

_serial = iter(range(1_000_000))


def signal(
    state: str | None = "completed",
    *,
    hours_ago: float = 1,
    subject: str | None = "agent:bot",
    severity: str | None = "none",
    cost: float | None = 0.01,
    tokens: tuple[int, int] | None = (800, 200),
    **fields: Any,
) -> dict[str, Any]:
    """A complete signal record ending (or, while live, starting) `hours_ago` before NOW."""
    moment = NOW - timedelta(hours=hours_ago)
    record: dict[str, Any] = {
        "session_id": f"s{next(_serial)}",
        "subject": subject,
        "state": state,
        "findings_count": None if severity is None else (0 if severity == "none" else 1),
        "max_severity": severity,
        "input_tokens": None if tokens is None else tokens[0],
        "output_tokens": None if tokens is None else tokens[1],
        "cost_usd": cost,
        "started_at": (moment - timedelta(minutes=5)).isoformat(),
    }
    if state in ("completed", "failed", "abandoned"):
        record["ended_at"] = moment.isoformat()
    record.update(fields)
    return {k: v for k, v in record.items() if v is not None}


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def report_for(
    tmp_path: Path, records: list[dict[str, Any]], window: str = "24h", **options: Any
) -> MonitorReport:
    found, counts = read_signals(str(write(tmp_path / "signals.jsonl", records)))
    return assess(
        found, counts, source="signals.jsonl", window=window, now=NOW, report_id="r1", **options
    )


def models(records: list[dict[str, Any]]) -> list[SessionSignal]:
    return [SessionSignal.model_validate_json(json.dumps(r)) for r in records]


# --- rates ------------------------------------------------------------------------------------


def test_rates_count_ended_sessions_with_wilson_intervals() -> None:
    stats = window_stats(
        models(
            [
                *[signal("completed") for _ in range(6)],
                signal("failed", severity="critical"),
                signal("failed", severity="high"),
                signal("abandoned", severity="low"),
                signal("running"),
                signal("waiting"),
            ]
        )
    )

    assert stats.sessions == 11
    assert stats.states == {
        "completed": 6,
        "failed": 2,
        "abandoned": 1,
        "running": 1,
        "waiting": 1,
    }
    interval = wilson(6, 9)
    assert interval is not None
    completion = stats.completion
    assert (completion.completed, completion.n) == (6, 9)  # live sessions are not ended
    assert completion.rate == pytest.approx(6 / 9)
    assert (completion.lo, completion.hi) == pytest.approx(interval)
    assert (stats.failure.failed, stats.failure.n) == (2, 9)
    # A live session's severity can still rise: ended sessions only, live ones flagged apart.
    assert (stats.high_severity.flagged, stats.high_severity.n) == (2, 9)
    assert stats.high_severity.not_ended_flagged == 0
    assert (stats.unknown.sessions, stats.unknown.fields) == (0, {})


def test_cost_per_completed_and_token_percentiles() -> None:
    stats = window_stats(
        models(
            [
                signal("completed", cost=0.10, tokens=(50, 50)),
                signal("completed", cost=0.20, tokens=(150, 50)),
                signal("failed", cost=0.30, tokens=(200, 100)),
                signal("abandoned", cost=0.40, tokens=(300, 100)),
                signal("running", cost=5.0, tokens=(900, 100)),
                signal("waiting", cost=None, tokens=(900, 100)),
                signal(None, cost=1.0),
            ]
        )
    )

    cost = stats.cost_per_completed
    # Failed and abandoned sessions' cost is part of the price of the completed ones; sessions
    # that have not ended (or whose state is unknown) are reported apart, in neither figure.
    assert (cost.total_usd, cost.completed, cost.costed, cost.uncosted) == pytest.approx(
        (1.0, 2, 4, 0)
    )
    assert (cost.not_ended, cost.not_ended_usd) == pytest.approx((3, 6.0))
    assert cost.value == pytest.approx(0.5)
    # Ended sessions' tokens 100, 200, 300, 400: linear interpolation between ranks.
    assert (stats.tokens.median, stats.tokens.p95, stats.tokens.n) == pytest.approx((250, 385, 4))


def test_a_burst_of_live_sessions_does_not_raise_cost_per_completed(tmp_path: Path) -> None:
    before = [signal(hours_ago=30, cost=0.01) for _ in range(20)]
    after = [signal(hours_ago=3, cost=0.01) for _ in range(20)]
    burst = [signal(state, hours_ago=1, cost=0.05) for state in ("running", "waiting") * 15]
    (bot,) = report_for(tmp_path, before + after + burst).subjects

    assert bot.cost_per_completed.value == pytest.approx(0.01)
    assert bot.cost_per_completed.not_ended_usd == pytest.approx(1.5)
    assert bot.change.cost_per_completed == pytest.approx(0)
    assert bot.status == "ok" and bot.findings == []


def test_a_window_without_completions_has_no_cost_per_completed_and_no_rates() -> None:
    stats = window_stats(models([signal("failed"), signal("running")]))
    assert stats.cost_per_completed.value is None  # never 0, never infinite
    assert stats.completion.rate == 0 and stats.completion.n == 1
    empty = window_stats([])
    assert (empty.completion.rate, empty.completion.lo, empty.completion.n) == (None, None, 0)
    assert (empty.tokens.median, empty.tokens.p95, empty.tokens.n) == (None, None, 0)


# --- windows ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("30m", timedelta(minutes=30)),
        ("6h", timedelta(hours=6)),
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
    ],
)
def test_window_lengths(text: str, length: timedelta) -> None:
    assert parse_window(text) == length


@pytest.mark.parametrize("text", ["", "24", "0h", "1w", "1.5h", "-2h", "h", "3651d", "999999d"])
def test_bad_windows_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="--window"):
        parse_window(text)


def test_windows_are_capped_at_ten_years_and_must_fit_the_calendar(tmp_path: Path) -> None:
    assert parse_window("3650d") == parse_window("87600h") == timedelta(days=3650)
    with pytest.raises(InputError, match="at most 3650d"):
        parse_window("87601h")
    early = datetime(10, 1, 1, tzinfo=UTC)  # twenty years earlier is before year 1
    found, counts = read_signals(str(write(tmp_path / "s.jsonl", [signal()])))
    with pytest.raises(InputError, match="--now"):
        assess(found, counts, source="s", window="3650d", now=early, report_id="r")


def test_now_is_iso_and_utc_without_an_offset() -> None:
    assert parse_now("2026-06-02T00:00:00Z") == NOW
    assert parse_now("2026-06-02T02:00:00+02:00") == NOW
    assert parse_now("2026-06-02T00:00:00") == NOW
    assert parse_now("2026-06-02T02:00:00+02:00").tzinfo == UTC
    with pytest.raises(InputError, match="--now"):
        parse_now("yesterday")


def test_sessions_fall_in_half_open_windows_by_end_else_start(tmp_path: Path) -> None:
    records = [
        signal(hours_ago=0),  # ends exactly at now: after the window
        signal(hours_ago=24),  # ends exactly at the window's start: inside
        signal(hours_ago=24.01),  # just before: previous window
        signal(hours_ago=48),  # the previous window's start: inside it
        signal(hours_ago=48.01),  # older than both
        signal("running", hours_ago=3),  # live: placed by its start
        signal(hours_ago=5, started_at=(NOW - timedelta(hours=30)).isoformat()),  # by its end
        signal("running", started_at=None),  # neither timestamp: undated
        signal(subject=None),  # no subject: in nobody's figures
    ]
    report = report_for(tmp_path, records)

    assert report.current.start == NOW - timedelta(hours=24) and report.current.end == NOW
    assert report.previous.start == NOW - timedelta(hours=48)
    assert report.previous.end == report.current.start
    counts = report.records
    assert (counts.current, counts.previous, counts.outside) == (3, 2, 2)
    assert (counts.undated, counts.unattributed, counts.sessions, counts.lines) == (1, 1, 9, 9)
    (bot,) = report.subjects
    assert (bot.sessions, bot.previous.sessions) == (3, 2)


def test_the_last_line_of_a_session_wins(tmp_path: Path) -> None:
    live = signal("running", hours_ago=2, session_id="s-1")
    done = signal("failed", hours_ago=1, session_id="s-1")
    other = signal("completed", hours_ago=1, session_id="s-1", subject="agent:other")
    report = report_for(tmp_path, [live, done, other])

    assert (report.records.lines, report.records.superseded, report.records.sessions) == (3, 1, 2)
    bot = next(h for h in report.subjects if h.subject == "agent:bot")
    assert bot.states["failed"] == 1 and bot.states["running"] == 0


def test_signals_are_read_from_an_s3_prefix_like_a_folder(s3_env: str, moto_s3: S3Server) -> None:
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    drop = moto_s3.create_bucket()
    client = moto_s3.client()
    client.put_object(Bucket=drop, Key="signals/b.jsonl", Body="".join(lines[90:]).encode())
    client.put_object(Bucket=drop, Key="signals/a.jsonl", Body="".join(lines[:90]).encode())
    client.put_object(Bucket=drop, Key="signals/notes.txt", Body=b"not signals")

    found, counts = read_signals(f"s3://{drop}/signals/")

    assert (found, counts) == read_signals(str(EXAMPLE))


# --- no data, unknown fields ------------------------------------------------------------------


def test_a_subject_without_signals_in_the_window_is_no_data_never_healthy(tmp_path: Path) -> None:
    records = [
        *[signal("failed", hours_ago=30, subject="agent:quiet") for _ in range(20)],
        signal("completed", hours_ago=2),
    ]
    report = report_for(tmp_path, records, expect=["agent:never-seen@v1"])

    status = {h.subject: h.status for h in report.subjects}
    assert status == {"agent:bot": "ok", "agent:quiet": "no_data", "agent:never-seen@v1": "no_data"}
    quiet = next(h for h in report.subjects if h.subject == "agent:quiet")
    assert quiet.sessions == 0 and quiet.previous.sessions == 20
    assert (quiet.completion.rate, quiet.failure.rate, quiet.high_severity.rate) == (None,) * 3
    assert quiet.findings == [] and quiet.change.failure is None
    assert report.note == ABSENCE_NOTE and "prove nothing" in report.note
    # Silence is news for an expected subject and for one that reported in the previous window.
    findings = monitor_findings(report)
    assert {(f.kind, f.subject) for f in findings} == {
        ("monitor_no_data", "agent:quiet"),
        ("monitor_no_data", "agent:never-seen@v1"),
    }
    by_subject = {f.subject: f for f in findings}
    assert "reporting in the previous window" in by_subject["agent:quiet"].summary
    assert by_subject["agent:quiet"].details["previous_sessions"] == 20
    assert by_subject["agent:never-seen@v1"].details["expected"] is True


def test_a_subject_seen_only_long_ago_and_not_expected_gives_no_finding(tmp_path: Path) -> None:
    report = report_for(tmp_path, [signal(hours_ago=100, subject="agent:retired")])
    (retired,) = report.subjects
    assert retired.status == "no_data" and not retired.expected
    assert monitor_findings(report) == []


@pytest.mark.parametrize(
    "records",
    [
        [signal("running", severity="critical"), signal("waiting")],
        [signal(None), signal(None, severity=None)],
    ],
    ids=["only-live-sessions", "no-states"],
)
def test_sessions_without_anything_measurable_are_insufficient_never_ok(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    earlier = [signal(hours_ago=30) for _ in range(5)]
    report = report_for(tmp_path, earlier + records, expect=["agent:bot"])

    (bot,) = report.subjects
    assert bot.status == "insufficient" and bot.sessions == 2 and bot.expected
    assert (bot.completion.n, bot.high_severity.n, bot.tokens.n) == (0, 0, 0)
    assert bot.high_severity.not_ended_flagged == (records[0].get("state") == "running")
    assert bot.findings == []
    (finding,) = monitor_findings(report)
    assert finding.kind == "monitor_no_data" and finding.details["status"] == "insufficient"
    assert "2 session(s), none known to have ended" in finding.summary
    assert "| agent:bot | insufficient | 2 |" in markdown_report(report)


def test_missing_fields_are_counted_as_unknown_and_left_out_of_denominators(
    tmp_path: Path,
) -> None:
    records = [
        signal("completed"),
        signal(None),  # no state
        signal("completed", cost=None, tokens=None),
        signal("failed", severity=None),
        signal("completed", ended_at=None),  # ended, but when is unknown: placed by its start
        signal("running"),  # no ended_at is expected while running
    ]
    (bot,) = report_for(tmp_path, records).subjects

    assert bot.sessions == 6
    assert bot.unknown.sessions == 4
    assert bot.unknown.fields == {
        "cost_usd": 1,
        "ended_at": 1,
        "findings_count": 1,
        "input_tokens": 1,
        "max_severity": 1,
        "output_tokens": 1,
        "state": 1,
    }
    assert (bot.completion.completed, bot.completion.n) == (3, 4)  # the stateless one is out
    assert (bot.high_severity.flagged, bot.high_severity.n) == (0, 3)  # ended, with a severity
    cost = bot.cost_per_completed
    assert (cost.costed, cost.uncosted, cost.not_ended) == (3, 1, 2)
    assert bot.tokens.n == 3  # ended sessions reporting both token counts


# --- rejected records -------------------------------------------------------------------------


def test_a_text_field_is_rejected_with_file_and_line_and_never_echoed(tmp_path: Path) -> None:
    path = write(
        tmp_path / "signals.jsonl",
        [signal(), signal(response=f"Sure! {CANARY}"), signal()],
    )
    with pytest.raises(InputError) as caught:
        read_signals(str(path))
    error = caught.value
    assert (error.source, error.line, error.field) == (str(path), 2, "response")
    assert "signals carry no text" in str(error)
    assert CANARY not in str(error) and "Sure" not in str(error)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"cost_usd": CANARY}, "cost_usd"),
        ({"state": CANARY}, "state"),
        ({"subject": f"agent:bot {CANARY}"}, "subject"),
        ({"session_id": f"a {CANARY}"}, "session_id"),
        ({"session_id": f"{CANARY}/a"}, "session_id"),
        ({"session_id": CANARY * 3}, "session_id"),  # more than 64 characters
        ({"subject": f"agent:{CANARY}!"}, "subject"),
        ({"subject": f"agent:bot@{CANARY},yes"}, "subject"),
        ({"subject": f"agent:{CANARY * 3}"}, "subject"),
        ({f"{CANARY} as a key": 1}, "(unexpected field)"),
        ({"started_at": "2026-06-01T10:00:00"}, "started_at"),  # no timezone
        ({"input_tokens": True}, "input_tokens"),
    ],
)
def test_malformed_values_name_the_field_but_not_the_value(
    tmp_path: Path, extra: dict[str, Any], field: str
) -> None:
    path = write(tmp_path / "s.jsonl", [signal(**extra)])
    with pytest.raises(InputError) as caught:
        read_signals(str(path))
    assert (caught.value.line, caught.value.field) == (1, field)
    assert CANARY not in str(caught.value)


def test_contradictory_records_are_rejected(tmp_path: Path) -> None:
    late_start = (NOW + timedelta(hours=1)).isoformat()
    for record, problem in [
        (signal(started_at=late_start), "ended_at is before started_at"),
        (signal(findings_count=0, max_severity="high"), "disagree"),
        (signal(findings_count=2, max_severity="none"), "disagree"),
    ]:
        with pytest.raises(InputError, match=problem):
            read_signals(str(write(tmp_path / "s.jsonl", [record])))
    with pytest.raises(InputError, match="no such signals file"):
        read_signals(str(tmp_path / "absent.jsonl"))


# --- thresholds -------------------------------------------------------------------------------


def test_a_credible_failure_rise_crosses_a_threshold_and_gives_one_finding(
    tmp_path: Path,
) -> None:
    before = [signal("completed", hours_ago=30) for _ in range(38)] + [
        signal("failed", hours_ago=30) for _ in range(2)
    ]
    after = [signal("completed", hours_ago=3) for _ in range(28)] + [
        signal("failed", hours_ago=3) for _ in range(12)
    ]
    report = report_for(tmp_path, before + after)

    (bot,) = report.subjects
    assert bot.status == "alert"
    crossed = {c.threshold for c in bot.findings}
    # 12/40 failed: Wilson lower bound 0.181, not credibly above the 0.20 failure-rate limit.
    assert crossed == {"failure_rate_rise", "completion_rate_drop", "cost_per_completed_rise"}
    rise = bot.change.failure
    expected = newcombe_diff(12, 40, 2, 40)
    assert rise is not None and expected is not None
    assert rise.diff == pytest.approx(0.25)
    assert (rise.lo, rise.hi) == pytest.approx(expected)
    assert bot.change.cost_per_completed == pytest.approx(38 / 28 - 1)  # same cost, fewer done

    (finding,) = monitor_findings(report)
    assert (finding.kind, finding.run_id, finding.suite, finding.subject) == (
        "monitor_threshold",
        "r1",
        None,
        "agent:bot",
    )
    assert "failure rate up +0.250" in finding.summary and "12/40" in finding.summary
    assert [c["threshold"] for c in finding.details["crossings"]] == [
        c.threshold for c in bot.findings
    ]


def test_a_small_sample_rise_is_not_an_alert(tmp_path: Path) -> None:
    before = [signal("completed", hours_ago=30) for _ in range(4)]
    after = [signal("completed", hours_ago=3) for _ in range(3)] + [signal("failed")]
    (bot,) = report_for(tmp_path, before + after).subjects

    rise = bot.change.failure
    assert rise is not None and rise.diff == pytest.approx(0.25) and rise.lo < 0  # noise
    assert bot.change.cost_per_completed == pytest.approx(4 / 3 - 1)  # too few to compare
    assert bot.status == "ok" and bot.findings == []


def test_high_severity_share_and_cost_thresholds(tmp_path: Path) -> None:
    before = [signal(hours_ago=30, cost=0.01) for _ in range(20)]
    after = [signal(hours_ago=3, cost=0.02) for _ in range(15)] + [
        signal(hours_ago=3, cost=0.02, severity="critical") for _ in range(5)
    ]
    (bot,) = report_for(tmp_path, before + after).subjects
    crossed = {c.threshold: c for c in bot.findings}
    assert set(crossed) == {"high_severity_share", "cost_per_completed_rise"}
    assert crossed["cost_per_completed_rise"].observed == pytest.approx(1.0)
    assert "5/20" in crossed["high_severity_share"].summary

    lenient = MonitorThresholds(high_severity_share=0.5, cost_per_completed_rise=2.0)
    (calm,) = report_for(tmp_path, before + after, thresholds=lenient).subjects
    assert calm.status == "ok"


def test_a_retried_save_returns_the_first_report(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    first = report_for(tmp_path, [signal()])
    retry = report_for(tmp_path, [signal(), signal("failed")])
    assert first.report_id == retry.report_id and first != retry

    assert save_report(store, first) == first
    assert save_report(store, retry) == first  # no EvidenceConflictError: first writer wins
    assert load_report(store, first.report_id) == first
    assert (tmp_path / "store" / report_key(first.report_id)).is_file()


def test_the_markdown_report_shows_state_counts_beside_the_denominators() -> None:
    markdown = markdown_report(_example_report())
    row = next(line for line in markdown.splitlines() if line.startswith("| agent:support-bot@v1"))
    v1 = next(h for h in _example_report().subjects if h.subject == "agent:support-bot@v1")
    states = ", ".join(f"{count} {state}" for state, count in v1.states.items())
    assert f"| {states} |" in row and v1.states["running"] > 0
    assert f"{v1.completion.completed}/{v1.completion.n}" in row


# --- the example, the flow, the CLI -----------------------------------------------------------


def _example_report() -> MonitorReport:
    found, counts = read_signals(str(EXAMPLE))
    return assess(found, counts, source="x", window="24h", now=NOW, report_id="example")


def test_the_example_has_an_ok_an_alerting_and_a_silent_subject() -> None:
    report = _example_report()
    status = {h.subject: h.status for h in report.subjects}
    assert status == {
        "agent:billing-bot": "no_data",
        "agent:support-bot@v1": "ok",
        "agent:support-bot@v2": "alert",
    }
    v2 = next(h for h in report.subjects if h.subject == "agent:support-bot@v2")
    assert {c.threshold for c in v2.findings} == {
        "failure_rate_rise",
        "completion_rate_drop",
        "high_severity_share",
        "cost_per_completed_rise",
    }
    assert report.records.superseded == 1 and report.records.unattributed == 1
    assert SignalCounts.model_validate(report.records.model_dump()) == report.records


@pytest.mark.usefixtures("prefect_api")
def test_the_flow_writes_the_report_once_and_records_a_finding_per_alerting_subject(
    store_dir: Path, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client

    from blocks.notification_target import NotificationTarget
    from flows.monitor import monitor

    v2 = [json.loads(line) for line in EXAMPLE.read_text().splitlines() if "bot@v2" in line]
    v3 = [{**record, "subject": "agent:support-bot@v3"} for record in v2]
    signals = tmp_path / "signals"
    signals.mkdir()
    (signals / "a.jsonl").write_bytes(EXAMPLE.read_bytes())
    write(signals / "b.jsonl", v3)

    report = monitor(MonitorOptions(signals=str(signals), window="24h", now=NOW))

    store = FileStore(store_dir)
    assert load_report(store, report.report_id) == report
    assert (store_dir / "monitor" / f"{report.report_id}.json").is_file()
    findings = list_findings(store, report.report_id)
    assert {(f.kind, f.subject, f.suite) for f in findings} == {
        ("monitor_threshold", "agent:support-bot@v2", None),
        ("monitor_threshold", "agent:support-bot@v3", None),
        ("monitor_no_data", "agent:billing-bot", None),  # reported the day before, silent now
    }
    notified = NotificationTarget.model_fields["finding_kinds"].get_default(
        call_default_factory=True
    )
    assert {f.kind for f in findings} <= set(notified)
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(report.report_id))
    assert run.name == "monitor · 24h · 2026-06-02 00:00 UTC"  # the window's end, not the clock
    example = {h.subject: h for h in _example_report().subjects}
    assert {h.subject: h for h in report.subjects if h.subject != "agent:support-bot@v3"} == (
        example
    )


@pytest.mark.usefixtures("prefect_api")
def test_cli_json_contract_and_exit_codes(store_dir: Path) -> None:
    result = CliRunner().invoke(
        app, ["monitor", str(EXAMPLE), "--window", "24h", "--now", NOW.isoformat(), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["window"] == "24h" and report["note"] == ABSENCE_NOTE
    assert {"report_id", "signals", "current", "previous", "thresholds", "records"} <= set(report)
    subjects = {s["subject"]: s for s in report["subjects"]}
    v2 = subjects["agent:support-bot@v2"]
    assert set(v2) == SUBJECT_KEYS
    assert set(v2["completion"]) == {"rate", "completed", "n", "lo", "hi"}
    assert set(v2["failure"]) == {"rate", "failed", "n", "lo", "hi"}
    assert set(v2["high_severity"]) == {"rate", "flagged", "n", "lo", "hi", "not_ended_flagged"}
    assert set(v2["tokens"]) == {"median", "p95", "n"}
    assert v2["status"] == "alert" and v2["findings"]
    assert subjects["agent:billing-bot"]["status"] == "no_data"
    assert (store_dir / "monitor" / f"{report['report_id']}.json").is_file()

    human = CliRunner().invoke(app, ["monitor", str(EXAMPLE), "--now", NOW.isoformat()])
    assert human.exit_code == 0
    assert "no data" in human.output and "prove nothing" in human.output
    assert "monitor_no_data: reported in the previous window" in human.output
    v1 = subjects["agent:support-bot@v1"]["states"]
    assert v1["running"] > 0
    assert "states: " + ", ".join(f"{n} {state}" for state, n in v1.items()) in human.output

    for window in ("1w", "999999d"):
        bad = CliRunner().invoke(app, ["monitor", str(EXAMPLE), "--window", window])
        assert bad.exit_code == 2 and "--window" in bad.output
        assert len(bad.output.strip().splitlines()) == 1


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.parametrize(
    ("records", "args", "where"),
    [
        ([signal(), signal(response="Sure!")], [], "line 2, field response"),
        ([signal(session_id="a/b")], [], "line 1, field session_id"),
        ([signal()], ["--expect", "agent:bot please"], "--expect"),
    ],
    ids=["text-field", "bad-session-id", "bad-expect"],
)
def test_cli_input_errors_exit_2_in_one_line_without_starting_a_run(
    store_dir: Path, tmp_path: Path, records: list[dict[str, Any]], args: list[str], where: str
) -> None:
    signals = write(tmp_path / "signals.jsonl", records)
    before = _monitor_runs()

    result = CliRunner().invoke(app, ["monitor", str(signals), "--now", NOW.isoformat(), *args])

    assert result.exit_code == 2 and result.stdout == ""
    assert where in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output and "please" not in result.output
    assert _monitor_runs() == before
    assert not list(store_dir.rglob("*.json"))


def _monitor_runs() -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["monitor"])))
    return len(runs)


@pytest.mark.usefixtures("prefect_api")
def test_canary_in_a_text_field_is_rejected_and_never_stored_or_logged(
    store_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    needle = CANARY.encode()
    good = write(tmp_path / "good.jsonl", [signal(), signal("failed")])
    ok = CliRunner().invoke(app, ["monitor", str(good), "--now", NOW.isoformat(), "--json"])
    assert ok.exit_code == 0, ok.output
    signals = write(
        tmp_path / "signals.jsonl",
        [signal(), signal("failed", transcript=f"user said {CANARY}"), signal()],
    )
    assert _files_containing(tmp_path, needle) == [signals]  # the search does find it

    result = CliRunner().invoke(app, ["monitor", str(signals), "--now", NOW.isoformat()])
    _flush_prefect_logs()

    assert result.exit_code == 2
    assert f"{signals} line 2, field transcript" in result.output
    assert CANARY not in result.output
    assert any(store_dir.rglob("*.json")), "the good run wrote its report"
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(PREFECT_HOME, needle) == []
    database = _prefect_database_dir()
    good_run = json.loads(ok.stdout)["report_id"].encode()
    assert _files_containing(database, good_run), "the search reads Prefect's database"
    assert _files_containing(database, needle) == []
    captured = capfd.readouterr()
    assert CANARY not in captured.out + captured.err
    assert CANARY not in caplog.text


def test_the_hourly_deployment_runs_the_monitor_flow_with_valid_parameters() -> None:
    import yaml
    from prefect.flows import load_flow_from_entrypoint

    repo = EXAMPLES.parent
    spec = yaml.safe_load((repo / "deployments" / "prefect.yaml").read_text())
    (hourly,) = [d for d in spec["deployments"] if d["name"] == "monitor-hourly"]
    assert hourly["schedules"] == [{"cron": "0 * * * *", "timezone": "UTC", "active": True}]
    flow = load_flow_from_entrypoint(str(repo / hourly["entrypoint"]))
    assert flow.name == "monitor"
    options = flow.validate_parameters(hourly["parameters"])["options"]
    assert (repo / options.signals).is_file()
    parse_window(options.window)


@pytest.mark.usefixtures("prefect_api")
def test_sessions_outside_the_window_are_counted_for_their_subject(
    store_dir: Path, tmp_path: Path
) -> None:
    # Every session ended days before the window: the subject is no data, and says why.
    signals = write(tmp_path / "old.jsonl", [signal(hours_ago=100 + i) for i in range(3)])

    human = CliRunner().invoke(app, ["monitor", str(signals), "--now", NOW.isoformat()])
    as_json = CliRunner().invoke(app, ["monitor", str(signals), "--now", NOW.isoformat(), "--json"])

    assert human.exit_code == 0, human.output
    assert "no signals in the window (3 session(s) outside it and the previous one)" in (
        " ".join(human.output.split())
    )
    (bot,) = json.loads(as_json.stdout)["subjects"]
    assert (bot["status"], bot["outside"]) == ("no_data", 3)
    report = report_for(tmp_path, [signal(hours_ago=100), signal(hours_ago=100, subject="agent:b")])
    assert "| agent:b | no data: no signals in the window (1 session(s) outside" in (
        markdown_report(report)
    )
    assert [h.outside for h in report.subjects] == [1, 1]
