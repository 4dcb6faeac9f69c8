"""Governed overrides: tokens and tiers, admin-only audited overrides, the gate check."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from assay.cli import app
from assay.errors import InputError, NotFoundError
from assay.gate.access import AccessDeniedError, Tier, add_principal, identify, principals
from assay.gate.decision import GateDecision, GateReason, RuleResult, load_decision, record_decision
from assay.gate.overrides import audit_records, check_gate, request_override
from assay.schemes import open_store
from assay.store import EvidenceStore

REASON = "judge endpoint was down; a rerun with it up passed 48/50"
RECORD_KEYS = {
    "run_id",
    "principal",
    "tier",
    "reason",
    "at",
    "recorded_verdict",
    "effective_verdict",
    "outcome",
    "refusal",
}
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(store_dir: Path) -> EvidenceStore:
    return open_store(f"file://{store_dir}")


def _verdicts(store: EvidenceStore, run_id: str) -> tuple[str, str]:
    check = check_gate(store, run_id)
    return check.recorded, check.effective


def gate(store: EvidenceStore, run_id: str, verdict: str = "fail") -> GateDecision:
    """Record a gate decision as `assay gate` does (write-once)."""
    failed = verdict == "fail"
    return record_decision(
        store,
        GateDecision(
            run_id=run_id,
            suite="support-bot",
            suite_version=1,
            subject="agent:support-bot",
            verdict="fail" if failed else "pass",
            reasons=[GateReason(rule="regressed", message="regressed vs r0")] if failed else [],
            warnings=["2 case(s) not judged (no judge or no credentials): c1, c2"],
            rules=[RuleResult(rule="regressed", passed=not failed, detail="vs r0")],
            unjudged_cases=["c1", "c2"],
            judge=None,
            calibrated=None,
            decided_at=T0,
        ),
    )


def team(store: EvidenceStore) -> dict[Tier, str]:
    """An admin (bootstrap), an operator and a viewer; their tokens by tier."""
    admin = add_principal(store, "alice", Tier.ADMIN)
    return {
        Tier.ADMIN: admin,
        Tier.OPERATOR: add_principal(store, "bob", Tier.OPERATOR, by_token=admin),
        Tier.VIEWER: add_principal(store, "carol", Tier.VIEWER, by_token=admin),
    }


def invoke(*args: str, token: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={"ASSAY_TOKEN": token})


# --- access ---------------------------------------------------------------------------------


def test_tokens_identify_their_principal_and_only_admins_change_access(
    store: EvidenceStore,
) -> None:
    with pytest.raises(InputError, match="first principal of a store must be an admin"):
        add_principal(store, "bob", Tier.OPERATOR)
    tokens = team(store)
    assert all(token.startswith("assay_") for token in tokens.values())
    assert len(set(tokens.values())) == 3
    for tier, token in tokens.items():
        found = identify(store, token)
        assert found is not None and found.tier is tier
    assert identify(store, tokens[Tier.ADMIN] + "x") is None
    assert identify(store, None) is None
    assert [(p.name, p.tier, p.added_by) for p in principals(store)] == [
        ("alice", Tier.ADMIN, "bootstrap"),
        ("bob", Tier.OPERATOR, "alice"),
        ("carol", Tier.VIEWER, "alice"),
    ]

    with pytest.raises(AccessDeniedError, match="admin's token"):
        add_principal(store, "mallory", Tier.ADMIN)
    with pytest.raises(AccessDeniedError, match="bob is operator"):
        add_principal(store, "mallory", Tier.ADMIN, by_token=tokens[Tier.OPERATOR])
    with pytest.raises(InputError, match="--rotate"):
        add_principal(store, "bob", Tier.ADMIN, by_token=tokens[Tier.ADMIN])
    with pytest.raises(InputError, match="no such principal"):
        add_principal(store, "dave", Tier.ADMIN, by_token=tokens[Tier.ADMIN], rotate=True)
    with pytest.raises(InputError, match="last admin"):
        add_principal(store, "alice", Tier.VIEWER, by_token=tokens[Tier.ADMIN], rotate=True)
    with pytest.raises(InputError, match="principal name"):
        add_principal(store, "../x", Tier.VIEWER, by_token=tokens[Tier.ADMIN])

    # Rotation: the old token stops working at once; the new record's tier holds.
    rotated = add_principal(store, "bob", Tier.ADMIN, by_token=tokens[Tier.ADMIN], rotate=True)
    assert identify(store, tokens[Tier.OPERATOR]) is None
    bob = identify(store, rotated)
    assert bob is not None and (bob.name, bob.tier) == ("bob", Tier.ADMIN)
    # With two admins, one may be demoted.
    add_principal(store, "alice", Tier.OPERATOR, by_token=rotated, rotate=True)
    alice = identify(store, tokens[Tier.ADMIN])
    assert alice is None


def test_only_token_hashes_reach_the_store(store: EvidenceStore, store_dir: Path) -> None:
    tokens = team(store)
    gate(store, "r1")
    stranger = "assay_" + "s" * 43
    request_override(store, "r1", stranger, REASON)
    request_override(store, "r1", tokens[Tier.ADMIN], REASON)

    stored = b"".join(path.read_bytes() for path in store_dir.rglob("*") if path.is_file())
    assert b"token_sha256" in stored and b'"principal":"unknown"' not in stored
    for token in (*tokens.values(), stranger):
        assert token.removeprefix("assay_").encode() not in stored


# --- overrides ------------------------------------------------------------------------------


def test_admin_override_changes_only_the_effective_verdict(
    store: EvidenceStore, store_dir: Path
) -> None:
    tokens = team(store)
    gate(store, "r1")
    decision_file = store_dir / "gates" / "r1.json"
    before = decision_file.read_bytes()
    check = check_gate(store, "r1")
    assert (check.recorded, check.effective, check.overrides, check.override) == (
        "fail",
        "fail",
        0,
        None,
    )
    assert [reason.rule for reason in check.reasons] == ["regressed"]

    record = request_override(store, "r1", tokens[Tier.ADMIN], f"  {REASON}\n", now=T0)
    assert (record.outcome, record.refusal, record.principal, record.tier) == (
        "granted",
        None,
        "alice",
        Tier.ADMIN,
    )
    assert (record.recorded_verdict, record.effective_verdict) == ("fail", "pass")
    assert record.reason == REASON
    assert _verdicts(store, "r1") == ("fail", "pass")
    assert load_decision(store, "r1").verdict == "fail"
    assert decision_file.read_bytes() == before

    check = check_gate(store, "r1")
    assert (check.recorded, check.effective, check.overrides) == ("fail", "pass", 1)
    assert check.override == record
    assert [reason.rule for reason in check.reasons] == ["regressed"]
    assert check.warnings == load_decision(store, "r1").warnings

    with pytest.raises(NotFoundError, match="no gate decision"):
        check_gate(store, "never-gated")


def test_refused_attempts_are_audited_and_change_nothing(store: EvidenceStore) -> None:
    tokens = team(store)
    gate(store, "r1")
    gate(store, "green", verdict="pass")
    admin = tokens[Tier.ADMIN]
    attempts = [
        ("r1", tokens[Tier.OPERATOR], REASON, "overrides need the admin tier; bob is operator"),
        ("r1", tokens[Tier.VIEWER], REASON, "overrides need the admin tier; carol is viewer"),
        ("r1", "assay_not-a-token", REASON, "unknown or rotated-out token"),
        ("r1", None, REASON, "no token: set ASSAY_TOKEN"),
        ("r1", admin, "   " + "x" * 19 + "   ", "the reason has 19 characters"),
        ("no-such-run", admin, REASON, "the run has no recorded gate decision"),
        ("green", admin, REASON, "the recorded verdict is already pass"),
    ]
    for i, (run_id, token, reason, refusal) in enumerate(attempts):
        record = request_override(store, run_id, token, reason, now=T0 + timedelta(seconds=i))
        assert record.outcome == "refused"
        assert record.refusal is not None and record.refusal.startswith(refusal)
    assert _verdicts(store, "r1") == ("fail", "fail")
    assert _verdicts(store, "green") == ("pass", "pass")

    audited = audit_records(store)
    by_principals = [a for a in attempts if a[1] in tokens.values()]
    assert [(r.run_id, r.outcome) for r in audited] == [(a[0], "refused") for a in by_principals]
    assert all(record.principal != "unknown" for record in audited)
    assert audited[3].recorded_verdict is None and audited[3].effective_verdict is None

    # Exactly 20 characters is enough; a second override of the same run is refused.
    granted = request_override(store, "r1", admin, "x" * 20, now=T0 + timedelta(minutes=1))
    assert granted.outcome == "granted"
    again = request_override(store, "r1", admin, REASON, now=T0 + timedelta(minutes=2))
    assert again.refusal is not None and again.refusal.startswith("already overridden by alice")
    assert again.effective_verdict == "pass"
    assert check_gate(store, "r1").overrides == 1
    run_records = audit_records(store, "r1")
    assert len(run_records) == 5 and run_records[-1] == again
    assert len(audit_records(store)) == 7

    with pytest.raises(InputError, match="run id"):
        request_override(store, "a/b", admin, REASON)
    with pytest.raises(InputError, match="run id"):
        request_override(store, "..", admin, REASON)
    with pytest.raises(InputError, match="at most 2000"):
        request_override(store, "r1", admin, "x" * 2001)
    assert len(audit_records(store)) == 7


# --- command line ---------------------------------------------------------------------------


def test_cli_access_override_and_audit(store: EvidenceStore, store_dir: Path) -> None:
    gate(store, "r1")
    added = invoke("access", "add", "alice", "--tier", "admin")
    assert added.exit_code == 0, added.output
    admin = added.stdout.strip()
    assert admin.startswith("assay_") and "\n" not in admin
    assert "cannot be shown again" in added.stderr

    refused = invoke("access", "add", "bob", "--tier", "admin")
    assert refused.exit_code == 1 and "admin's token" in refused.stderr
    assert invoke("access", "add", "bob", "--tier", "boss", token=admin).exit_code == 2
    added = invoke(
        "access", "add", "bob", "--tier", "operator", "--store", f"file://{store_dir}", token=admin
    )
    assert added.exit_code == 0, added.output
    operator = added.stdout.strip()
    listed = invoke("access", "list", "--json")
    assert listed.exit_code == 0
    assert [(p["name"], p["tier"]) for p in json.loads(listed.stdout)] == [
        ("alice", "admin"),
        ("bob", "operator"),
    ]
    assert "token" not in listed.stdout and admin not in listed.stdout

    denied = invoke("override", "r1", "--reason", REASON, token=operator)
    assert denied.exit_code == 1
    assert "admin tier" in denied.stderr and "audited" in denied.stderr
    short = invoke("override", "r1", "--reason", "looks fine to me", token=admin)
    assert short.exit_code == 1 and "at least 20" in short.stderr
    unknown = invoke("override", "r1", "--reason", REASON, token="assay_guess")
    assert unknown.exit_code == 1 and "unknown" in unknown.stderr
    assert "nothing recorded" in unknown.stderr
    too_long = invoke("override", "r1", "--reason", "x" * 2001, token=admin)
    assert too_long.exit_code == 2 and "at most 2000" in too_long.stderr
    assert invoke("override", "r1", token=admin).exit_code == 2  # --reason is required
    assert invoke("override", "a/b", "--reason", REASON, token=admin).exit_code == 2
    granted = invoke("override", "r1", "--reason", REASON, "--json", token=admin)
    assert granted.exit_code == 0, granted.output
    assert json.loads(granted.stdout)["outcome"] == "granted"
    assert _verdicts(store, "r1") == ("fail", "pass")

    listing = invoke("audit", "--run", "r1", "--json")
    assert listing.exit_code == 0
    records = json.loads(listing.stdout)
    assert all(set(record) == RECORD_KEYS for record in records)
    assert [(r["principal"], r["outcome"]) for r in records] == [
        ("bob", "refused"),
        ("alice", "refused"),
        ("alice", "granted"),
    ]
    assert (records[-1]["recorded_verdict"], records[-1]["effective_verdict"]) == ("fail", "pass")
    assert admin not in listing.stdout and operator not in listing.stdout

    table = invoke("audit")
    assert table.exit_code == 0
    assert "granted" in table.stdout and "refused" in table.stdout and "fail → pass" in table.stdout
    empty = invoke("audit", "--run", "r2")
    assert empty.exit_code == 0 and "No audit records for run r2" in empty.stdout
