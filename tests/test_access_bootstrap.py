"""The first admin of a store is written once, whoever races for it; refused access changes are
audited. Against moto (which enforces `If-None-Match`) and the local file store."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.gate.access import (
    UNKNOWN_CALLER,
    AccessDeniedError,
    Tier,
    access_attempts,
    add_principal,
    principals,
)
from assay.store import EvidenceStore, FileStore
from tests.servers import S3Server

RACERS = 8


@pytest.fixture(params=["moto", "file"])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> EvidenceStore:
    if request.param == "moto":
        server: S3Server = request.getfixturevalue("moto_s3")
        return server.store()
    return FileStore(tmp_path / "evidence")


def test_concurrent_first_admins_exactly_one_wins(fresh_store: EvidenceStore) -> None:
    start = threading.Barrier(RACERS)
    tokens: dict[str, str] = {}
    refused: list[str] = []

    def race(name: str) -> None:
        start.wait()
        try:
            tokens[name] = add_principal(fresh_store, name, Tier.ADMIN)
        except AccessDeniedError:
            refused.append(name)

    threads = [threading.Thread(target=race, args=(f"admin-{n}",)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(tokens) == 1 and len(refused) == RACERS - 1
    (winner,) = tokens
    assert [(p.name, p.tier, p.added_by) for p in principals(fresh_store)] == [
        (winner, Tier.ADMIN, "bootstrap")
    ]
    audited = access_attempts(fresh_store)
    assert sorted(a.name for a in audited) == sorted(refused)
    assert {a.caller for a in audited} == {UNKNOWN_CALLER}
    # the winner works as an admin afterwards: it can add, and rotate itself
    add_principal(fresh_store, "ci", Tier.OPERATOR, by_token=tokens[winner])
    add_principal(fresh_store, winner, Tier.ADMIN, by_token=tokens[winner], rotate=True)
    assert {p.name for p in principals(fresh_store)} == {winner, "ci"}


def test_refused_access_adds_are_audited_and_listed(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    admin = runner.invoke(app, ["access", "add", "alice", "--tier", "admin"]).stdout.strip()
    monkeypatch.setenv("ASSAY_TOKEN", admin)
    viewer = runner.invoke(app, ["access", "add", "vic", "--tier", "viewer"]).stdout.strip()

    monkeypatch.setenv("ASSAY_TOKEN", viewer)
    by_viewer = runner.invoke(app, ["access", "add", "mallory", "--tier", "admin"])
    monkeypatch.setenv("ASSAY_TOKEN", "assay_not-a-token")
    by_stranger = runner.invoke(app, ["access", "add", "eve", "--tier", "admin"])
    monkeypatch.setenv("ASSAY_TOKEN", admin)
    demotion = runner.invoke(app, ["access", "add", "alice", "--tier", "viewer", "--rotate"])
    listed = runner.invoke(app, ["access", "audit", "--json"])

    assert (by_viewer.exit_code, by_stranger.exit_code, demotion.exit_code) == (1, 1, 2)
    attempts = json.loads(listed.stdout)
    assert [(a["caller"], a["name"], a["action"]) for a in attempts] == [
        ("vic", "mallory", "add"),
        (UNKNOWN_CALLER, "eve", "add"),
        ("alice", "alice", "rotate"),
    ]
    assert "admin tier" in attempts[0]["refusal"]
    assert "last admin" in attempts[2]["refusal"]
    for path in store_dir.rglob("*"):
        if path.is_file():
            assert admin.encode() not in path.read_bytes()
            assert viewer.encode() not in path.read_bytes()


def test_admins_demoting_themselves_at_once_leave_one_admin(fresh_store: EvidenceStore) -> None:
    tokens = {"admin-0": add_principal(fresh_store, "admin-0", Tier.ADMIN)}
    for n in range(1, RACERS):
        name = f"admin-{n}"
        tokens[name] = add_principal(fresh_store, name, Tier.ADMIN, by_token=tokens["admin-0"])
    start = threading.Barrier(RACERS)
    demoted: list[str] = []
    refused: list[str] = []

    def demote(name: str) -> None:
        start.wait()
        try:
            add_principal(fresh_store, name, Tier.VIEWER, by_token=tokens[name], rotate=True)
        except InputError as exc:
            assert "last admin" in str(exc)
            refused.append(name)
        else:
            demoted.append(name)

    threads = [threading.Thread(target=demote, args=(name,)) for name in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    admins = [p.name for p in principals(fresh_store) if p.tier is Tier.ADMIN]
    assert admins == refused and len(demoted) == RACERS - 1
