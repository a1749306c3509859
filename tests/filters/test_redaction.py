"""Redaction on planted secrets of every kind; kept ranges; placeholders; the stage's accounting."""

from __future__ import annotations

import random
import string

import pytest
from filter_docs import doc_table

from codecorpus import schema
from codecorpus.config import FiltersConfig, RedactConfig
from codecorpus.filters import redact
from codecorpus.filters import stage as filters
from codecorpus.filters.columns import REDACTED

RNG = random.Random(4)


def rand(chars: str, n: int) -> str:
    return "".join(RNG.choice(chars) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"

PLANTED = {
    "email": ("author = 'jane.doe@acme-corp.io'", "jane.doe@acme-corp.io"),
    "ipv4": ("HOST = '93.184.216.34'", "93.184.216.34"),
    "ipv6": ("dns = '2606:4700:4700::1111'", "2606:4700:4700::1111"),
    "aws_access_key": (f"key_id = '{(k := 'AKIA' + rand(UPPER, 16))}'", k),
    "aws_secret_key": (f"aws_secret_access_key = '{(k := rand(B64, 40))}'", k),
    "gcp_api_key": (f"MAPS = 'AIza{(k := rand(ALNUM + '_-', 35))}'", "AIza" + k),
    "gcp_oauth_secret": (f"cs = 'GOCSPX-{(k := rand(ALNUM, 28))}'", "GOCSPX-" + k),
    "gcp_service_account": (f'"private_key_id": "{(k := rand("0123456789abcdef", 40))}",', k),
    "azure_storage_key": (f"conn = 'DefaultEndpointsProtocol=https;AccountName=x;AccountKey={(k := rand(B64, 86) + '==')};'", k),
    "azure_sas": (f"url = 'https://x.blob.core.windows.net/c?sv=2020&sig={(k := rand(ALNUM, 44))}'", k),
    "azure_client_secret": (f"cred = '{(k := rand(ALNUM, 3) + '8Q~' + rand(ALNUM, 34))}'", k),
    "github_token": (f"GH = 'ghp_{(k := rand(ALNUM, 36))}'", "ghp_" + k),
    "gitlab_token": (f"GL = 'glpat-{(k := rand(ALNUM, 20))}'", "glpat-" + k),
    "slack_token": (f"SLACK = 'xoxb-{(k := rand(string.digits, 12) + '-' + rand(ALNUM, 24))}'", "xoxb-" + k),
    "slack_webhook": (f"HOOK = 'https://hooks.slack.com/services/T{(k := rand(UPPER, 8) + '/B' + rand(UPPER, 8) + '/' + rand(ALNUM, 24))}'", k),
    "stripe_key": (f"stripe.api_key = 'sk_live_{(k := rand(ALNUM, 24))}'", "sk_live_" + k),
    "jwt": (f"AUTH = 'eyJhbGciOiJIUzI1NiJ9.eyJ{(k := rand(ALNUM, 30))}.{rand(ALNUM, 43)}'", k),
    "private_key": (
        "PEM = '''-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(rand(B64, 64) for _ in range(5))
        + "\n-----END RSA PRIVATE KEY-----'''", "BEGIN RSA PRIVATE KEY",
    ),
    "password": ("DATABASES = {'PASSWORD': 'Tr0ub4dor&3x'}", "Tr0ub4dor&3x"),
    "secret": (f"client_secret = '{(k := rand(ALNUM, 32))}'", k),
}


def test_the_plants_cover_every_kind() -> None:
    assert set(PLANTED) == set(redact.KINDS)


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_each_kind_is_redacted_in_context(kind: str) -> None:
    line, secret = PLANTED[kind]
    text = f"import os\n\n\ndef connect():\n    {line}\n    return None\n"
    out, counts = redact.redact_text(text, RedactConfig())
    assert secret not in out
    assert counts == {kind: 1}
    assert redact.DEFAULT_PLACEHOLDERS[kind] in out
    assert out.startswith("import os\n\n\ndef connect():\n    ") and out.endswith("\n    return None\n")


KEPT = [
    "server = '10.0.0.1'; gw = '192.168.1.254'; lo = '127.0.0.1'; doc = '203.0.113.7'",
    "v6 = ['::1', 'fe80::1', '2001:db8::1', 'fd00::5']",
    "__version__ = '1.2.3.4'; dotted = '1.2.3.4.5'",
    "std::vector<int> v; a::b::c(); t = '12:30:45'",
    "mail = 'someone@example.com'; remote = 'git@github.com:org/repo.git'; img = 'logo@2x.png'",
    "password = get_password()\nif password == '':\n    pass\nfield = 'password_confirm'\n",
    "PASSWORD_ENV = 'DB_PASSWORD'; password = '${DB_PASSWORD}'; password: str = '<your password>'",
    "token = 'my_token_name_here'; secret_key = settings.SECRET_KEY",
    "sha = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",
    "if line.startswith('-----BEGIN RSA PRIVATE KEY-----'):\n    return True\n",
]


@pytest.mark.parametrize("text", KEPT)
def test_non_secrets_and_kept_ranges_stay(text: str) -> None:
    assert redact.redact_text(text, RedactConfig()) == (text, {})


def test_placeholders_are_configurable_and_kinds_selectable() -> None:
    cfg = RedactConfig(placeholders={"email": "[mail]"}, kinds=("email",))
    text = "a = 'jane@acme.io'; ip = '8.8.8.8'"
    assert redact.redact_text(text, cfg)[0] == "a = '[mail]'; ip = '8.8.8.8'"


def test_ip_pseudonyms_are_consistent_within_a_document() -> None:
    cfg = RedactConfig(ip_replacement="pseudonym")
    text = "a = '8.8.8.8'\nb = '8.8.8.8'\nc = '1.1.1.1'\n"
    out, counts = redact.redact_text(text, cfg, salt="doc-1")
    a, b, c = (line.split("'")[1] for line in out.splitlines())
    assert a == b != c and counts == {"ipv4": 3}
    import ipaddress

    assert all(ipaddress.ip_address(x).is_private for x in (a, c))  # documentation ranges
    assert redact.redact_text(text, cfg, salt="doc-1")[0] == out


def test_stage_updates_text_bytes_hash_and_counts_per_kind() -> None:
    secret_line, secret = PLANTED["github_token"]
    docs = [
        {"text": f"{secret_line}\nowner = 'jane.doe@acme-corp.io'\n"},
        {"text": "value = compute(1)\n"},
    ]
    result = filters.run(doc_table(*docs), FiltersConfig(decontam=None))
    out = result.table.to_pylist()
    assert secret not in out[0][schema.TEXT] and "<EMAIL>" in out[0][schema.TEXT]
    assert out[0][schema.BYTES] == len(out[0][schema.TEXT].encode())
    assert out[0][schema.CONTENT_HASH] == schema.content_hash(out[0][schema.TEXT].encode())
    assert [r[REDACTED] for r in out] == [2, 0]
    assert out[1][schema.TEXT] == docs[1]["text"]
    assert result.counters == {"redact.github_token": 1, "redact.email": 1, "redact.docs": 1}
    assert result.dropped.num_rows == 0


def test_redaction_off() -> None:
    line, secret = PLANTED["github_token"]
    result = filters.run(doc_table({"text": line + "\n"}), FiltersConfig(decontam=None, redact=None))
    assert secret in result.table.column(schema.TEXT)[0].as_py() and not result.counters
