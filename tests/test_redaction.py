"""Redaction before any judge call (`assay.judge.redaction`): every kind, settings, versions."""

from __future__ import annotations

import pytest

from assay.judge.port import JudgeRequest
from assay.judge.redaction import RedactionSettings, Redactor, placeholder

EMAIL = "jane.doe+orders@example.co.uk"
PHONE_US = "(415) 555-2671"
PHONE_INTL = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"  # passes Luhn
NOT_A_CARD = "4111 1111 1111 1112"  # fails Luhn
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_" + "a1B2" * 9
PASSWORD = "hunter2-very-secret"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7yq\nx1y2z3\n-----END RSA PRIVATE KEY-----"
)
PLANTED = [
    EMAIL,
    PHONE_US,
    PHONE_INTL,
    CARD,
    AWS_KEY,
    GITHUB_TOKEN,
    PASSWORD,
    "MIIEpAIBAAKCAQEA7yq",
]


def planted_text() -> str:
    """A text holding one of every kind (and a Luhn-failing number that must stay)."""
    return (
        f"Write to {EMAIL} or call {PHONE_US} / {PHONE_INTL}. Card {CARD}, "
        f'ref {NOT_A_CARD}. Keys {AWS_KEY} and {GITHUB_TOKEN}; password = "{PASSWORD}".\n'
        f"{PRIVATE_KEY}\nRefunds within 30 days."
    )


def test_every_default_kind_is_replaced_and_counted() -> None:
    redacted = Redactor(RedactionSettings()).redact(planted_text())
    for value in PLANTED:
        assert value not in redacted.text
    assert NOT_A_CARD in redacted.text  # not Luhn-valid: not a card
    assert "Refunds within 30 days." in redacted.text
    assert redacted.counts == {"email": 1, "phone": 2, "credit_card": 1, "secret": 4}
    assert placeholder("credit_card") in redacted.text


def test_only_configured_kinds_and_custom_patterns() -> None:
    settings = RedactionSettings.parse("email", patterns=[r"ORD-\d{6}"])
    redacted = Redactor(settings).redact(f"{EMAIL} placed ORD-123456; call {PHONE_US}")
    assert (
        redacted.text == f"{placeholder('email')} placed {placeholder('custom')}; call {PHONE_US}"
    )
    assert redacted.counts == {"email": 1, "custom": 1}


def test_none_turns_redaction_off_and_keeps_the_prompt_version() -> None:
    off = RedactionSettings.parse("none")
    assert not off.active
    assert Redactor(off).redact(planted_text()).text == planted_text()
    assert off.prompt_version("default@abc") == "default@abc"


def test_settings_are_part_of_the_prompt_version() -> None:
    versions = {
        RedactionSettings().prompt_version("default@abc"),
        RedactionSettings.parse("email,phone").prompt_version("default@abc"),
        RedactionSettings.parse(None, patterns=["x+"]).prompt_version("default@abc"),
    }
    assert len(versions) == 3
    assert all(v.startswith("default@abc+redact@") for v in versions)
    # order and case of the list do not matter
    assert (
        RedactionSettings.parse("PHONE, email").version
        == RedactionSettings.parse("email,phone").version
    )


def test_env_setting_and_bad_settings() -> None:
    assert RedactionSettings.configured(environ={}).kinds == (
        "email",
        "phone",
        "credit_card",
        "secret",
    )
    assert RedactionSettings.configured(environ={"ASSAY_JUDGE_REDACT": "none"}).active is False
    with pytest.raises(ValueError, match="unknown redaction kind ssn"):
        RedactionSettings.parse("email,ssn")
    with pytest.raises(ValueError, match="RE2"):
        RedactionSettings.parse(None, patterns=[r"(a)\1"])


def test_a_request_is_redacted_in_input_reference_and_output() -> None:
    request = JudgeRequest(
        case_id="c1",
        input=f"my email is {EMAIL}",
        expected=f"call {PHONE_US}",
        rubric="Answers politely.",
        output=f"card {CARD}",
    )
    redacted, counts = Redactor(RedactionSettings()).request(request)
    assert EMAIL not in redacted.input and PHONE_US not in (redacted.expected or "")
    assert CARD not in redacted.output
    assert redacted.rubric == request.rubric
    assert counts == {"email": 1, "phone": 1, "credit_card": 1}
