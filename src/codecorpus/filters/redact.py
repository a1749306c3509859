"""PII and secrets redaction: a transform that replaces matched spans with placeholders.

One :class:`Detector` per kind: a compiled regex, the literal *anchors* one of which
must be in the text for the regex to run at all (``str.__contains__`` is memchr-fast,
so a document without ``@`` never runs the e-mail regex), and a validator that looks
at the match in context. Spans of all kinds are resolved left to right (the earlier
start wins; on a tie the longer span), then the text is rebuilt once.

Kinds and what is kept:

- ``email``: addresses, except ``keep_email_domains`` (example.com, no-reply ...),
  ``git@host`` remotes and image names like ``icon@2x.png``;
- ``ipv4`` / ``ipv6``: only *global* addresses (``ipaddress``'s ``is_global``; IPv6
  also inside 2000::/3). Private, loopback, link-local, multicast and documentation
  ranges stay as they are. Dotted quads inside longer dotted runs or after
  ``version`` are version numbers, not addresses. ``ip_replacement: pseudonym``
  replaces a public address with a documentation-range one chosen by a hash of the
  document id and the address: the same address maps to the same pseudonym
  throughout a document, so code that compares addresses still reads sensibly;
- cloud and service keys with fixed shapes: ``aws_access_key``, ``aws_secret_key``,
  ``gcp_api_key``, ``gcp_oauth_secret``, ``gcp_service_account`` (``private_key_id``),
  ``azure_storage_key``, ``azure_sas``, ``azure_client_secret``, ``github_token``,
  ``gitlab_token``, ``slack_token``, ``slack_webhook``, ``stripe_key``, ``jwt``,
  ``private_key`` (PEM/PGP/OpenSSH blocks, also inside string literals with ``\\n``);
- ``password``: a literal assigned to a password-like name (``password``, ``passwd``,
  ``pwd``, ``passphrase``), unless it is a placeholder (``changeme``, ``***``,
  ``${VAR}``, ``<...>``), an identifier-shaped word (``"password_confirm"``,
  ``"DB_PASSWORD"``), or unquoted and identifier-shaped (a variable, not a value);
- ``secret``: a literal of at least ``min_secret_len`` characters, with a digit and
  a letter and at least ``min_secret_entropy`` bits per character, assigned to a
  secret-like name (``secret``, ``token``, ``api_key``, ``access_key``, ``credential`` ...).

Only the secret value is replaced (``password = "<PASSWORD>"``): the assignment
stays, so the code still parses and reads. Placeholders are per kind and
configurable (``RedactConfig.placeholders``). detect-secrets was measured against
this on the same files (``bench/redaction_bench.py``): it scans line by line through
~25 plugins in Python and is far slower; its keyword plugin is also the main source
of false positives on real code, so the rules here are hand-written and anchored.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus.filters.config import REDACT_KINDS, RedactConfig

EMAIL_PLACEHOLDER, IP_PLACEHOLDER, KEY_PLACEHOLDER, PASSWORD_PLACEHOLDER = (
    "<EMAIL>", "<IP_ADDRESS>", "<KEY>", "<PASSWORD>",
)


@dataclass(frozen=True)
class Detector:
    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    """One of these must occur in the text (``lower=True``: in its lowercased form)."""
    group: str | int = 0
    """The part of a match that is replaced (the value of an assignment, not its name)."""
    lower: bool = False
    valid: Callable[[re.Match[str], str, RedactConfig], bool] | None = None
    names: re.Pattern[str] | None = None
    """Assignment detectors: a secret-like name (searched in the lowercased identifier
    around an anchor); ``pattern`` then matches the assignment right after the name."""
    expand: Callable[[re.Match[str], str], int] | None = None
    """Where the replaced span really starts, for patterns anchored on an inner literal
    (``@`` of an address): a pattern that must scan a 64-character local part at every
    position would cost far more."""


# --- validators -------------------------------------------------------------------------

_IMAGE_TLDS = frozenset(["png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "js", "css", "py", "ts", "json", "html", "md", "txt"])


_LOCAL_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}$")
_LOCAL_BEFORE = frozenset(string.ascii_letters + string.digits + "._%+-")


def _email_start(m: re.Match[str], text: str) -> int:
    """Start of the local part before the ``@`` the pattern matched at (-1: none)."""
    local = _LOCAL_PART.search(text, max(0, m.start() - 64), m.start())
    if local is None:
        return -1
    start = local.start()
    while start < m.start() and text[start] in "._%+-":
        start += 1
    if start > 0 and text[start - 1] in _LOCAL_BEFORE:
        return -1  # a local part longer than 64 characters: not an address
    return start if start < m.start() else -1


def _email_ok(m: re.Match[str], text: str, cfg: RedactConfig) -> bool:
    start = _email_start(m, text)
    if start < 0:
        return False
    local, domain = text[start : m.start()], m.group("domain").lower()
    if local == "git" or domain.rsplit(".", 1)[-1] in _IMAGE_TLDS:
        return False
    return not any(domain == d or domain.endswith("." + d) for d in cfg.keep_email_domains)


def _ipv4_ok(m: re.Match[str], text: str, cfg: RedactConfig) -> bool:
    before = text[m.start() - 1] if m.start() else " "
    if before.isalnum() or before in "._" or "version" in text[max(0, m.start() - 24) : m.start()].lower():
        return False
    try:
        return ipaddress.IPv4Address(m.group(0)).is_global
    except ValueError:
        return False


def _ipv6_ok(m: re.Match[str], text: str, cfg: RedactConfig) -> bool:
    before = text[m.start() - 1] if m.start() else " "
    if before.isalnum() or before in "_:.":
        return False
    try:
        addr = ipaddress.IPv6Address(m.group(0))
    except ValueError:
        return False
    return addr.is_global and addr in _GLOBAL_UNICAST


_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_PLACEHOLDER_VALUE = re.compile(
    r"(?i)^(?:\*+|x+|\.+|-+|changeme|change_me|password\d*|passw0rd|secret|example\w*|dummy\w*|"
    r"test\w*|none|null|nil|true|false|undefined|your\w*|my\w*|xxx\w*|redacted|todo|fixme|"
    r"<[^>]*>|\$\{?[\w.:-]+\}?|%\(?\w*\)?[sd]|\{\{?[\w.\s]*\}\}?|\[[\w.\s]*\])$"
)
_IDENTIFIER = re.compile(r"^(?:[a-z][a-z0-9]*(?:[_.\-][a-z0-9]+)*|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)$")
_BARE_IDENTIFIER = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*$")


def _value(m: re.Match[str]) -> tuple[str, bool]:
    return m.group("value"), bool(m.group("q"))


def _password_ok(m: re.Match[str], text: str, cfg: RedactConfig) -> bool:
    value, quoted = _value(m)
    if _PLACEHOLDER_VALUE.match(value) or _IDENTIFIER.match(value):
        return False
    if quoted or not _BARE_IDENTIFIER.match(value):
        return True
    # an unquoted identifier is usually a variable; one with digits and mixed case is a value
    return any(c.isdigit() for c in value) and not value.islower() and not value.isupper()


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s character distribution.

    >>> round(shannon_entropy("aaaa"), 3), round(shannon_entropy("abcd"), 3)
    (0.0, 2.0)
    """
    n = len(value)
    return abs(sum(c / n * math.log2(c / n) for c in Counter(value).values())) if n else 0.0


def _secret_ok(m: re.Match[str], text: str, cfg: RedactConfig) -> bool:
    value, _ = _value(m)
    if len(value) < cfg.min_secret_len or _PLACEHOLDER_VALUE.match(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and shannon_entropy(value) >= cfg.min_secret_entropy


# --- the detectors ------------------------------------------------------------------------

_ASSIGN = r"""["']?\s*(?:=|:=|:|=>|->)\s*(?:[rbuRBU]?(?P<q>["'`]))?"""
_VALUE_END = r"""(?(q)(?P=q)|(?=[\s,;)\]}]|$))"""
_PASSWORD_NAME = re.compile(r"passw(?:or)?d|passphrase|(?<![a-z])pwd")
_SECRET_NAME = re.compile(
    r"secret|token|api[_\-]?key|access[_\-]?key|auth[_\-]?key|private[_\-]?key|credential|"
    r"signing[_\-]?key|encryption[_\-]?key|client[_\-]?key"
)
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


def _d(kind: str, pattern: str, anchors: str, **kw) -> Detector:
    return Detector(kind, re.compile(pattern), tuple(anchors.split()), **kw)


DETECTORS: tuple[Detector, ...] = (
    _d("private_key",
       r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----(?:[A-Za-z0-9+/=\s\\:,.\-\"']*?"
       r"-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[A-Za-z0-9+/=\s\\]{64,})",
       "PRIVATE"),
    _d("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ"),
    _d("aws_access_key", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", "A3T AKIA ASIA ABIA ACCA"),
    _d("aws_secret_key",
       r"(?i:aws|amazon)[\w.\-]{0,30}?(?i:secret|private)[\w.\-]{0,30}?" + _ASSIGN
       + r"(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])", "aws amazon", group="value", lower=True),
    _d("gcp_api_key", r"\bAIza[0-9A-Za-z_\-]{35}(?![\w-])", "AIza"),
    _d("gcp_oauth_secret", r"\bGOCSPX-[0-9A-Za-z_\-]{28}(?![\w-])", "GOCSPX-"),
    _d("gcp_service_account", r"\"private_key_id\"\s*:\s*\"(?P<value>[0-9a-f]{40})\"", "private_key_id",
       group="value"),
    _d("azure_storage_key", r"(?i:AccountKey)=(?P<value>[A-Za-z0-9+/]{86}==)", "accountkey",
       group="value", lower=True),
    _d("azure_sas", r"[?&]sig=(?P<value>[A-Za-z0-9%/+]{40,}={0,2}(?:%3D){0,2})", "sig=", group="value"),
    _d("azure_client_secret", r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])", "Q~"),
    _d("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b",
       "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_"),
    _d("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}(?![\w-])",
       "glpat- gldt- glrt- glptt- glcbt-"),
    _d("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_]{20,}", "hooks.slack.com"),
    _d("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,250}", "xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- xoxe-"),
    _d("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,99}\b", "sk_live_ sk_test_ rk_live_ rk_test_"),
    _d("password", _ASSIGN + r"(?P<value>(?(q)[^\s\"'`]{4,128}|[^\s\"'`()\[\]{},;<>]{4,128}))" + _VALUE_END,
       "pass pwd", group="value", lower=True, valid=_password_ok, names=_PASSWORD_NAME),
    _d("secret", _ASSIGN + r"(?P<value>[A-Za-z0-9+/=_\-.~:]{8,512})" + _VALUE_END,
       "secret token key credential", group="value", lower=True, valid=_secret_ok, names=_SECRET_NAME),
    _d("email", r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24})(?![\w(-])",
       "@", valid=_email_ok, expand=_email_start),
    _d("ipv4",
       r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\w|\.\d)",
       ".", valid=_ipv4_ok),
    _d("ipv6", r"[23][0-9A-Fa-f]{3}:(?:[0-9A-Fa-f]{0,4}:){1,6}[0-9A-Fa-f]{0,4}(?![\w:])",
       ":", valid=_ipv6_ok),
)
KINDS: tuple[str, ...] = tuple(d.kind for d in DETECTORS)
if KINDS != REDACT_KINDS:  # the config's vocabulary and the detectors must name the same kinds
    raise ImportError(f"filters/config.py REDACT_KINDS {REDACT_KINDS} != the detectors' kinds {KINDS}")
DEFAULT_PLACEHOLDERS: dict[str, str] = {
    kind: EMAIL_PLACEHOLDER if kind == "email"
    else IP_PLACEHOLDER if kind in ("ipv4", "ipv6")
    else PASSWORD_PLACEHOLDER if kind == "password"
    else KEY_PLACEHOLDER
    for kind in KINDS
}


# --- redaction -----------------------------------------------------------------------------


def placeholder(kind: str, cfg: RedactConfig) -> str:
    return cfg.placeholders.get(kind, DEFAULT_PLACEHOLDERS[kind])


def _pseudonym(address: str, salt: str) -> str:
    """A documentation-range address for ``address``, the same for the same (salt, address)."""
    h = hashlib.sha256(f"{salt}\x00{address}".encode()).digest()
    if ":" in address:
        return f"2001:db8::{h[0]:x}{h[1]:02x}:{h[2]:x}{h[3]:02x}"
    net = ("192.0.2", "198.51.100", "203.0.113")[h[0] % 3]
    return f"{net}.{1 + h[1] % 254}"


def _assignments(det: Detector, text: str, lowered: str) -> list[re.Match[str]]:
    """Assignments to a name holding one of ``det.anchors`` (found with ``str.find``, which
    is a memchr scan, instead of a case-insensitive regex scan, which costs far more)."""
    ends: set[int] = set()
    for anchor in det.anchors:
        pos = lowered.find(anchor)
        while pos >= 0:
            start, end = pos, pos + len(anchor)
            while start > 0 and text[start - 1] in _NAME_CHARS:
                start -= 1
            while end < len(text) and text[end] in _NAME_CHARS:
                end += 1
            if det.names is not None and det.names.search(lowered, start, end):
                ends.add(end)
            pos = lowered.find(anchor, end)
    found = [det.pattern.match(text, end) for end in sorted(ends)]
    return [m for m in found if m is not None]


def find_spans(text: str, cfg: RedactConfig, kinds: frozenset[str] | None = None) -> list[tuple[int, int, str]]:
    """Non-overlapping ``(start, end, kind)`` spans to replace, left to right."""
    lowered: str | None = None
    found: list[tuple[int, int, str]] = []
    for det in DETECTORS:
        if kinds is not None and det.kind not in kinds:
            continue
        if det.lower:
            lowered = text.lower() if lowered is None else lowered
            haystack = lowered
        else:
            haystack = text
        if not any(a in haystack for a in det.anchors):
            continue
        matches = _assignments(det, text, haystack) if det.names is not None else det.pattern.finditer(text)
        for m in matches:
            if det.valid is None or det.valid(m, text, cfg):
                start, end = m.span(det.group)
                start = det.expand(m, text) if det.expand is not None else start
                if end > start:
                    found.append((start, end, det.kind))
    found.sort(key=lambda s: (s[0], -s[1]))
    spans: list[tuple[int, int, str]] = []
    for span in found:
        if not spans or span[0] >= spans[-1][1]:
            spans.append(span)
    return spans


def redact_text(
    text: str, cfg: RedactConfig, salt: str = "", skip: frozenset[str] = frozenset()
) -> tuple[str, Counter[str]]:
    """``text`` with every detected span replaced, and the number of spans per kind.

    ``salt`` (the document id in the stage) keys IP pseudonyms; ``skip`` names kinds a
    caller already knows are absent (:func:`redact_column`'s RE2 pre-check).

    >>> redact_text("mail bob@corp.io from 8.8.8.8, not 10.0.0.1", RedactConfig())
    ('mail <EMAIL> from <IP_ADDRESS>, not 10.0.0.1', Counter({'email': 1, 'ipv4': 1}))
    """
    kinds = (frozenset(cfg.kinds) if cfg.kinds is not None else frozenset(KINDS)) - skip
    spans = find_spans(text, cfg, kinds)
    if not spans:
        return text, Counter()
    out, counts, pos = [], Counter(), 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        if kind in ("ipv4", "ipv6") and cfg.ip_replacement == "pseudonym":
            out.append(_pseudonym(text[start:end], salt))
        else:
            out.append(placeholder(kind, cfg))
        counts[kind] += 1
        pos = end
    out.append(text[pos:])
    return "".join(out), counts


# Python's ``re`` scans digit classes slowly; RE2 over the whole column costs far less,
# so rows without even the shape of an address skip those detectors.
_PRECHECKS = {
    "ipv4": r"\d\.\d{1,3}\.\d{1,3}\.\d",
    "ipv6": r"[23][0-9A-Fa-f]{3}:[0-9A-Fa-f]{0,4}:",
}


def redact_column(
    texts: pa.Array | pa.ChunkedArray, salts: list[str], cfg: RedactConfig
) -> tuple[list[str], list[Counter[str]]]:
    """Redact every text of a column: the new texts and each row's counts per kind."""
    absent = {
        kind: ~np.asarray(pc.match_substring_regex(texts, pattern).to_numpy(zero_copy_only=False), bool)
        for kind, pattern in _PRECHECKS.items()
    }
    out_texts, out_counts = [], []
    for i, (text, salt) in enumerate(zip(texts.to_pylist(), salts, strict=True)):
        skip = frozenset(kind for kind, rows in absent.items() if rows[i])
        new, counts = redact_text(text, cfg, salt, skip)
        out_texts.append(new)
        out_counts.append(counts)
    return out_texts, out_counts
