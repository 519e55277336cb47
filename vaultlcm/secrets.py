"""Secrets never reach disk: high-confidence credentials are replaced by a marker naming their kind.

Every string of an incoming message (text, thinking, tool arguments at any depth,
tool results, extra fields, even keys and roles) is scanned before anything is
written, and each secret found is replaced by ``[redacted: <kind>]``, e.g.
``[redacted: anthropic-api-key]``. A URL keeps its user and loses only its
password (``https://deploy:[redacted: url-password]@git.example.com``); an
``Authorization`` header keeps its scheme (``Bearer [redacted: bearer-token]``).

The rules follow the published rule set of gitleaks (MIT licence, Copyright (c)
2019 Zachary Rice; https://github.com/gitleaks/gitleaks, ``cmd/generate/config/rules``):
its token prefixes, lengths, keywords and entropy floors, re-expressed here for
Python's ``re`` (no code was copied). Only high-confidence shapes are used (a
fixed prefix, a checksum-like marker, or an explicit ``Authorization`` header),
so prose, hashes and ids pass untouched. Each rule names *keywords*: a string
without one of them is never run through the rule's regular expression, which
keeps the cost on the agent's ingest path to a few substring searches.

:class:`Redactor` is built from the settings (``redact_secrets``,
``redact_patterns``) by :func:`make_redactor`; the vault applies it to every
message after the import key was computed from the original record, so
re-importing the same file stays idempotent.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MARKER = "[redacted: {}]"
#: A marker as written into notes (what ``status`` counts).
MARKER_RE = re.compile(r"\[redacted: ([a-z0-9][a-z0-9-]{0,63})\]")
KIND_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
#: Shorter strings cannot hold any secret the rules know (the shortest, a URL password, needs ``a://u:p@``).
_MIN_LENGTH = 8
#: Opaque blobs (image data, thinking signatures) are never scanned: a secret cannot be read out of them,
#: and a random match inside would corrupt them.
_BASE64_BLOB = re.compile(r"^[A-Za-z0-9+/=\r\n_-]+$")
_BLOB_KEYS = ("data", "signature")
_BLOB_MIN = 256


@dataclass(frozen=True)
class Rule:
    """One kind of secret: where it may be (keywords), what it looks like (regex), how random it must be."""

    kind: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    #: Shannon entropy (bits per character) the secret must reach: placeholders such as ``ghp_xxxx…`` do not.
    entropy: float = 0.0
    #: The group holding the secret (0: the whole match); the rest of the match is kept.
    group: int | str = 0
    #: Matches that are known non-secrets (templates, documentation examples).
    reject: Callable[[str], bool] | None = None

    def finds(self, text: str) -> Iterable[tuple[int, int]]:
        """Spans of this rule's secrets in ``text`` (the caller checked the keywords)."""
        for m in self.regex.finditer(text):
            start, end = m.span(self.group)
            if start < 0 or end <= start:
                continue
            secret = text[start:end]
            if self.entropy and shannon_entropy(secret) < self.entropy:
                continue
            if self.reject is not None and self.reject(secret):
                continue
            yield start, end


def shannon_entropy(text: str) -> float:
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


_PLACEHOLDERS = frozenset({
    "password", "passwd", "pass", "pwd", "secret", "changeme", "changeit", "test", "token", "example", "redacted",
    "mypassword", "yourpassword", "your_password", "your-password", "pa55word", "p@ssw0rd", "none", "null",
})


def _placeholder(secret: str) -> bool:
    """A URL password that is a template or an example, not a credential."""
    low = secret.lower()
    return (low in _PLACEHOLDERS or secret[0] in "$<{%*[" or set(low) <= {"x"} or set(secret) <= {"*"}
            or (secret.isdigit() and len(secret) <= 5))  # host:port@ ... is not user:password@


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# Token boundaries: a secret is not the middle of a longer token.
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"

#: The built-in rules, most specific first (on a tie, the earlier rule names the kind).
RULES: tuple[Rule, ...] = (
    Rule("private-key", _rx(
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{16,65536}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:[A-Za-z0-9+/=:,\s-]|\\[nr]){16,})"), ("PRIVATE KEY",)),
    Rule("anthropic-api-key", _rx(_B + r"sk-ant-[a-z]{3,6}\d\d-[A-Za-z0-9_-]{32,300}" + _E), ("sk-ant-",), 3.0),
    Rule("openai-api-key", _rx(_B + r"sk-(?:[a-z]{2,8}-)?[A-Za-z0-9_-]{16,200}T3BlbkFJ[A-Za-z0-9_-]{16,200}" + _E),
         ("T3BlbkFJ",), 3.0),
    Rule("github-fine-grained-token", _rx(r"github_pat_[A-Za-z0-9_]{82}" + _E), ("github_pat_",), 3.0),
    Rule("github-token", _rx(_B + r"gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), 3.0),
    Rule("gitlab-token", _rx(
        _B + r"(?:gl(?:pat|dt|ptt|rt|cbt|ft|imt|agent|oas|soat|ffct)-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?"
        r"|GR1348941[A-Za-z0-9_-]{20})" + _E),
         ("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-",
          "glffct-", "GR1348941"), 3.0),
    Rule("slack-webhook-url", _rx(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/]{43,200})"), ("hooks.slack.com",),
        group=1),
    Rule("slack-token", _rx(
        _B + r"(?:xoxb-[0-9]{8,14}-[A-Za-z0-9-]{10,}"
        r"|xox[pe](?:-[0-9]{10,13}){3}-[A-Za-z0-9-]{28,34}"
        r"|xox[os]-\d+-\d+-\d+-[A-Fa-f0-9]+"
        r"|xox[ar]-(?:\d-)?[0-9A-Za-z]{8,48}"
        r"|xoxe\.xox[bp]-\d-[A-Za-z0-9]{163,166}"
        r"|xoxe-\d-[A-Za-z0-9]{146}"
        r"|xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]+)" + _E),
         ("xoxb-", "xoxp-", "xoxe", "xoxo-", "xoxs-", "xoxa-", "xoxr-", "xapp-"), 2.0),
    Rule("stripe-key", _rx(_B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,247}" + _E),
         ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), 2.0),
    Rule("google-api-key", _rx(_B + r"AIza[A-Za-z0-9_-]{35}" + _E), ("AIza",), 3.5),
    Rule("aws-access-key-id", _rx(r"(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
         ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"), 3.0,
         reject=lambda s: s.endswith("EXAMPLE")),  # the key id AWS's own documentation uses
    Rule("aws-secret-access-key", _rx(
        r"(?i:aws_?secret(?:_?access)?(?:_?key)?|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
        r"((?-i:[A-Za-z0-9/+=]{40}))(?![A-Za-z0-9/+=])"), ("ecret", "ECRET"), 3.0, group=1),
    Rule("jwt", _rx(_B + r"eyJ[A-Za-z0-9_-]{15,}\.eyJ[A-Za-z0-9_-]{15,}\.[A-Za-z0-9_-]{10,}={0,2}" + _E),
         ("eyJ",)),
    Rule("bearer-token", _rx(
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?\s*(?i:bearer|token)\s+([A-Za-z0-9._~+/-]{12,}=*)"),
         ("uthorization", "UTHORIZATION"), 2.75, group=1),
    Rule("bearer-token", _rx(r"\b(?:Bearer|bearer|BEARER)\s+((?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{20,}=*)"),
         ("earer", "EARER"), 3.5, group=1),
    Rule("basic-auth", _rx(
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?\s*(?i:basic)\s+([A-Za-z0-9+/]{8,}={0,3})(?![A-Za-z0-9+/=])"),
         ("uthorization", "UTHORIZATION"), 2.75, group=1),
    Rule("url-password", _rx(
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@\"'<>\\\[\]]{1,256}:([^\s/?#@\"'<>\\]{1,256})@"), ("://",),
         group=1, reject=_placeholder),
)
KINDS = tuple(dict.fromkeys(r.kind for r in RULES))
#: How close (in characters) an AWS secret must sit to its access key id to be recognized without a label.
AWS_PAIR_WINDOW = 400
_AWS_SECRET_CANDIDATE = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])")


def _aws_pair(text: str, key_ids: list[tuple[int, int]]) -> Iterable[tuple[int, int]]:
    """40-character secrets next to an AWS access key id (``AKIA…`` with its secret, as AWS prints them)."""
    for ks, ke in key_ids:
        lo, hi = max(0, ks - AWS_PAIR_WINDOW), min(len(text), ke + AWS_PAIR_WINDOW)
        for m in _AWS_SECRET_CANDIDATE.finditer(text, lo, hi):
            s = m.group()
            # AWS secrets mix upper, lower case and digits; hex hashes (git SHA-1) do not.
            if (any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)
                    and shannon_entropy(s) >= 4.0):
                yield m.span()


class Redactor:
    """Replaces secrets in strings and in whole JSON values, counting what it replaced by kind."""

    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules
        self._keywords = tuple(sorted({k for r in rules for k in r.keywords}))
        self._always = [i for i, r in enumerate(rules) if not r.keywords]

    def keywords_in(self, text: str, among: Iterable[str] | None = None) -> frozenset[str]:
        """The rules' keywords ``text`` holds (substring search, the cheapest test there is)."""
        return frozenset(k for k in (self._keywords if among is None else among) if k in text)

    def find(self, text: str, among: Iterable[str] | None = None) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, kind)`` of every secret in ``text``, in order.

        ``among`` narrows the keywords to look for (those a whole message holds).
        """
        if len(text) < _MIN_LENGTH:
            return []
        present = self.keywords_in(text, among)
        candidates = self._always + [i for i, r in enumerate(self.rules)
                                     if r.keywords and not present.isdisjoint(r.keywords)] if present else self._always
        if not candidates:
            return []
        found: list[tuple[int, int, int, str]] = []
        aws_ids: list[tuple[int, int]] = []
        for priority in candidates:
            rule = self.rules[priority]
            for start, end in rule.finds(text):
                found.append((start, end, priority, rule.kind))
                if rule.kind == "aws-access-key-id":
                    aws_ids.append((start, end))
        if aws_ids:
            priority = len(self.rules)
            found.extend((s, e, priority, "aws-secret-access-key") for s, e in _aws_pair(text, aws_ids))
        if not found:
            return []
        # Earliest first, then the longest, then the more specific rule (listed first).
        found.sort(key=lambda f: (f[0], -(f[1] - f[0]), f[2]))
        out: list[tuple[int, int, str]] = []
        last_end = -1
        for start, end, _, kind in found:
            if start >= last_end:
                out.append((start, end, kind))
                last_end = end
        return out

    def redact_text(self, text: str, counts: Counter[str] | None = None, among: Iterable[str] | None = None) -> str:
        spans = self.find(text, among)
        if not spans:
            return text
        parts: list[str] = []
        pos = 0
        for start, end, kind in spans:
            parts.append(text[pos:start])
            parts.append(MARKER.format(kind))
            pos = end
            if counts is not None:
                counts[kind] += 1
        parts.append(text[pos:])
        return "".join(parts)

    def redact_value(self, value: Any, counts: Counter[str] | None = None,
                     among: frozenset[str] | None = None) -> Any:
        """A JSON value with every string (keys too) redacted; unchanged parts are the same objects.

        ``among``: the keywords the value can hold at most (known from a search over a whole batch).
        """
        if not self._always:
            # One search over the whole value first: most messages hold no keyword and are not walked at all.
            among = self.keywords_in(json.dumps(value, ensure_ascii=False, default=str), among)
            if not among:
                return value
        return _Walk(self, counts, among).value(value)

    def batch_keywords(self, values: Iterable[Any]) -> frozenset[str] | None:
        """The keywords any of ``values`` holds: one search for a whole batch (``None`` when rules without
        keywords make every string a candidate anyway)."""
        if self._always:
            return None
        return self.keywords_in("\0".join(json.dumps(v, ensure_ascii=False, default=str) for v in values))


class _Walk:
    def __init__(self, redactor: Redactor, counts: Counter[str] | None, among: frozenset[str] | None) -> None:
        self.redactor = redactor
        self.counts = counts
        self.among = among

    def value(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            if len(value) < _MIN_LENGTH or (
                    key in _BLOB_KEYS and len(value) >= _BLOB_MIN and _BASE64_BLOB.match(value)):
                return value
            return self.redactor.redact_text(value, self.counts, self.among)
        if isinstance(value, list):
            items = [self.value(v) for v in value]
            return value if all(a is b for a, b in zip(items, value)) else items
        if isinstance(value, dict):
            return self.mapping(value)
        return value

    def mapping(self, value: Mapping[str, Any]) -> Any:
        out: dict[str, Any] = {}
        changed = False
        for k, v in value.items():
            nk = self.value(k) if isinstance(k, str) else k
            while nk in out:  # two keys that differed only by their secrets: keep both entries
                nk = f"{nk} (2)"
            nv = self.value(v, k if isinstance(k, str) else None)
            changed = changed or nk is not k or nv is not v
            out[nk] = nv
        return out if changed else value


def make_redactor(enabled: bool, extra_patterns: Mapping[str, str] | None = None) -> Redactor | None:
    """The redactor the settings ask for (``None`` when ``redact_secrets`` is off).

    ``extra_patterns`` maps a kind (lower-case letters, digits, dashes) to a regular
    expression; its named group ``secret``, else its first group, else the whole
    match is replaced. They are checked on every string, after the built-in rules.
    """
    if not enabled:
        return None
    extra = tuple(Rule(kind, re.compile(pattern), (), 0.0, _secret_group(re.compile(pattern)))
                  for kind, pattern in (extra_patterns or {}).items())
    return Redactor(RULES + extra)


def _secret_group(regex: re.Pattern[str]) -> int | str:
    if "secret" in regex.groupindex:
        return "secret"
    return 1 if regex.groups else 0


def check_pattern(kind: str, pattern: str) -> None:
    """Raise ``ValueError`` (for the settings validator) when an extra pattern cannot be used."""
    if not KIND_RE.match(kind):
        raise ValueError(f"redact_patterns: kind {kind!r} must be lower-case letters, digits and dashes")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"redact_patterns: {kind!r} is not a valid regular expression ({exc})") from None
    if regex.search("") is not None:
        raise ValueError(f"redact_patterns: {kind!r} matches the empty string; it would mark every text")


def count_markers(text: str) -> Counter[str]:
    """``[redacted: kind]`` markers in a text, by kind."""
    return Counter(MARKER_RE.findall(text))


def describe_counts(counts: Mapping[str, int]) -> str:
    """``3 secrets redacted (2 aws-access-key-id, 1 jwt)`` (empty when nothing was)."""
    total = sum(counts.values())
    if not total:
        return ""
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{total} secret{'s' if total != 1 else ''} redacted ({kinds})"
