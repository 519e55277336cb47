"""Secrets never reach disk: each kind is redacted wherever it hides, and nothing else is touched."""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.cli import cli
from vaultlcm.errors import SettingsError
from vaultlcm.secrets import KINDS, MARKER, Redactor, make_redactor
from vaultlcm.settings import load_settings

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"


def secret_samples(seed: int = 7) -> dict[str, str]:
    """One realistic, random secret of every kind (random, so never a real credential)."""
    rnd = random.Random(seed)

    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    upper = string.ascii_uppercase + "234567"
    pem_body = "\n".join(r(64, ALNUM + "+/") for _ in range(6))
    return {
        "anthropic-api-key": "sk-ant-api03-" + r(93, URLSAFE) + "AA",
        "openai-api-key": "sk-proj-" + r(74, URLSAFE) + "T3BlbkFJ" + r(74, URLSAFE),
        "github-token": "ghp_" + r(36),
        "github-fine-grained-token": "github_pat_11" + r(20, string.ascii_uppercase + string.digits) + "_" + r(59),
        "gitlab-token": "glpat-" + r(20, URLSAFE),
        "slack-token": "xoxb-" + r(12, string.digits) + "-" + r(13, string.digits) + "-" + r(24),
        "slack-webhook-url": "T" + r(8, upper) + "/B" + r(10, upper) + "/" + r(24),
        "stripe-key": "sk_live_" + r(24),
        "google-api-key": "AIza" + r(35, URLSAFE),
        "aws-access-key-id": "AKIA" + r(16, upper),
        "aws-secret-access-key": r(40, ALNUM + "/+"),
        "private-key": f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
        "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI" + r(30, URLSAFE) + "." + r(43, URLSAFE),
        "bearer-token": r(40, ALNUM + "._-"),
        "basic-auth": r(32, ALNUM) + "==",
        "url-password": r(18, ALNUM),
    }


def in_context(kind: str, secret: str, samples: dict[str, str]) -> str:
    """How each secret shows up in real agent transcripts (a shell line, a config, a header)."""
    return {
        "slack-webhook-url": f"curl -X POST https://hooks.slack.com/services/{secret} -d '{{}}'",
        "aws-access-key-id": f"export AWS_ACCESS_KEY_ID={secret}",
        "aws-secret-access-key": f"[default]\naws_access_key_id = {samples['aws-access-key-id']}\n"
                                 f"aws_secret_access_key = {secret}\n",
        "bearer-token": f"curl -H 'Authorization: Bearer {secret}' https://api.example.com/v1/items",
        "basic-auth": f'{{"headers": {{"Authorization": "Basic {secret}"}}}}',
        "url-password": f"git remote add origin https://deploy-bot:{secret}@git.example.com/acme/app.git",
        "private-key": f"$ cat ~/.ssh/deploy_key\n{secret}\n$ ",
    }.get(kind, f"The key is {secret} (from .env)")


def fragments(secret: str) -> list[str]:
    """The secret and its random parts: what would betray it even if a tokenizer split it."""
    return [secret] + [p for p in re.split(r"[-_./:+=\s]", secret) if len(p) >= 12 and not p.startswith("BEGIN")]


SAMPLES = secret_samples()


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_is_replaced_by_a_marker_naming_it(kind: str) -> None:
    secret = SAMPLES[kind]
    text = in_context(kind, secret, SAMPLES)
    counts: Counter[str] = Counter()
    out = Redactor().redact_text(text, counts)
    assert MARKER.format(kind) in out
    assert all(f not in out for f in fragments(secret)), out
    assert counts[kind] >= 1
    assert Redactor().redact_text(out) == out  # idempotent: a marker is not a secret


def test_every_built_in_kind_has_a_sample() -> None:
    assert set(KINDS) == set(SAMPLES)


def test_what_stays_around_a_secret() -> None:
    r = Redactor()
    assert r.redact_text("https://deploy-bot:" + SAMPLES["url-password"] + "@git.example.com/x.git") == (
        "https://deploy-bot:[redacted: url-password]@git.example.com/x.git")
    assert r.redact_text("Authorization: Bearer " + SAMPLES["bearer-token"]) == (
        "Authorization: Bearer [redacted: bearer-token]")
    assert r.redact_text("https://hooks.slack.com/services/" + SAMPLES["slack-webhook-url"]).startswith(
        "https://hooks.slack.com/services/[redacted: slack-webhook-url]")


@pytest.mark.parametrize("text", [
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",  # a placeholder has no entropy
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",  # AWS's documentation example
    "commit 3f2a9c1b0d4e5f60aa3f2a9c1b0d4e5f60aa1234 fixes it",  # a git SHA-1 is not an AWS secret
    "see https://user:password@example.com and postgres://app:${DB_PASSWORD}@db:5432/app",
    "http://localhost:8080@proxy (a port, not a password)",
    "Bearer tokens are sent in the Authorization header.",
    "curl -H \"Authorization: Bearer $API_KEY\" https://api.example.com",
    "sk-ant-api03-short",
    "The eyJ prefix starts every JWT header.",
    "xoxo-gossip-girl and skip_live_updates",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "uuid 7f3b2c1e-9a4d-4e5f-8b6a-0c1d2e3f4a5b, msg_01AbCdEfGhIjKlMnOpQrStUv, toolu_01ReadDates0000000000001",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().redact_text(text) == text


def test_an_aws_secret_is_recognized_next_to_its_key_id_without_a_label() -> None:
    key_id, secret = SAMPLES["aws-access-key-id"], SAMPLES["aws-secret-access-key"]
    out = Redactor().redact_text(f"Created access key {key_id} with secret {secret}. Store it now.")
    assert secret not in out and key_id not in out
    assert "[redacted: aws-secret-access-key]" in out


def test_values_are_redacted_everywhere_keys_too_and_blobs_are_not_scanned() -> None:
    token = SAMPLES["github-token"]
    image = "iVBORw0KGgo" + "A" * 300 + "AIza" + "B" * 35 + "+" + "C" * 100
    value = {"args": {"cmd": ["gh", "auth", "login", "--with-token", token]}, token: 1,
             "image": {"type": "image", "media_type": "image/png", "data": image}}
    counts: Counter[str] = Counter()
    out = Redactor().redact_value(value, counts)
    assert token not in json.dumps(out)
    assert out["image"]["data"] == image  # base64 blobs are opaque: never scanned, never corrupted
    assert counts == Counter({"github-token": 2})
    same = {"plain": ["text", {"n": 1}]}
    assert Redactor().redact_value(same) is same  # nothing found: the very same object


_text = st.text(st.characters(codec="utf-8"), max_size=60)


@settings(max_examples=150, deadline=None)
@given(before=_text, after=_text, kind=st.sampled_from(sorted(SAMPLES)))
def test_a_planted_secret_is_gone_whatever_surrounds_it(before: str, after: str, kind: str) -> None:
    text = before + " " + in_context(kind, SAMPLES[kind], SAMPLES) + " " + after
    out = Redactor().redact_text(text)
    assert all(f not in out for f in fragments(SAMPLES[kind]))
    assert Redactor().redact_text(out) == out


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=400))
def test_redaction_is_idempotent_and_only_ever_inserts_markers(text: str) -> None:
    r = Redactor()
    out = r.redact_text(text)
    assert r.redact_text(out) == out
    for start, end, kind in r.find(text):
        assert MARKER.format(kind) in out
    if not r.find(text):
        assert out == text


def test_extra_patterns_and_switching_off(tmp_path: Path) -> None:
    settings_ = load_settings(None, {}, {"redact_patterns": {"internal-token": r"itk_(?P<secret>[a-z0-9]{12})"}})
    r = make_redactor(settings_.redact_secrets, settings_.redact_patterns)
    assert r is not None
    assert r.redact_text("use itk_abcdef123456 here") == "use itk_[redacted: internal-token] here"
    assert make_redactor(False, {}) is None
    with pytest.raises(SettingsError, match="matches the empty string"):
        load_settings(None, {}, {"redact_patterns": {"x": "a*"}})
    with pytest.raises(SettingsError, match="lower-case letters"):
        load_settings(None, {}, {"redact_patterns": {"Bad Kind": "abc"}})


# -- end to end: nothing under the vault holds a secret ------------------------------------------

LARGE_FILLER = "".join(f"line {i}: compiled module {i} in 0.{i % 97:02d}s, cache hit ratio {i % 13}\n"
                       for i in range(5000))


NEEDS_CONTEXT = ("aws-secret-access-key", "bearer-token", "basic-auth", "url-password", "slack-webhook-url")


def planted_transcript() -> list[dict[str, Any]]:
    """Each secret planted in a message, a tool call's arguments, a tool result, a large payload and an extra field."""
    records: list[dict[str, Any]] = []
    t = 0
    for n, (kind, secret) in enumerate(sorted(SAMPLES.items())):
        line = in_context(kind, secret, SAMPLES)
        # A bare value is recognizable only for kinds with their own shape; the others need their context.
        bare = secret if kind not in NEEDS_CONTEXT else line

        def at() -> str:
            nonlocal t
            t += 1
            return f"2026-03-0{1 + t // 40}T{9 + (t // 4) % 10:02d}:{t % 60:02d}:00Z"

        call = f"call_{n}"
        records += [
            {"role": "user", "timestamp": at(), "content": f"Please check this: {line}"},
            {"role": "assistant", "timestamp": at(), "content": [
                {"type": "text", "text": "Running it."},
                {"type": "tool_call", "id": call, "name": "Bash", "arguments": {"command": line, "env": {kind: bare}}}]},
            {"role": "tool", "timestamp": at(), "content": [
                {"type": "tool_result", "call_id": call, "content": f"$ {line}\nok, used {bare}"}]},
            {"role": "assistant", "timestamp": at(), "content": f"Done with {kind}.",
             "metadata": {"request": {"headers": {"x-secret": bare}, "note": line}}},
        ]
    big = LARGE_FILLER + "".join(in_context(k, s, SAMPLES) + "\n" for k, s in sorted(SAMPLES.items())) + LARGE_FILLER
    records += [
        {"role": "assistant", "timestamp": "2026-03-03T10:00:00Z", "content": [
            {"type": "tool_call", "id": "call_big", "name": "Bash", "arguments": {"command": "cat build.log"}}]},
        {"role": "tool", "timestamp": "2026-03-03T10:00:01Z", "content": [
            {"type": "tool_result", "call_id": "call_big", "content": big}]},
    ]
    return records


def vault_bytes(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]


def leaks(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    files = vault_bytes(root)
    for kind, secret in SAMPLES.items():
        for frag in fragments(secret):
            hits = [str(p.relative_to(root)) for p, data in files if frag.encode() in data]
            if hits:
                found.setdefault(kind, []).extend(hits)
    return found


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_no_file_under_the_vault_holds_a_secret(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()  # defaults: redaction on
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(json.dumps(r) + "\n" for r in planted_transcript()), encoding="utf-8")
    code, out, err = run("--vault", str(root), "ingest", str(transcript), "-c", "ops", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report["redacted"]) == set(SAMPLES), report["redacted"]
    assert (root / "conversations/ops/files").is_dir() and any((root / "conversations/ops/files").glob("*.txt"))
    code, out, _ = run("--vault", str(root), "ingest", str(transcript), "-c", "ops")
    assert code == 0 and "0 new" in out and "redacted" not in out  # re-import: same keys, nothing stored twice
    code, _, err = run("--vault", str(root), "compact", "-c", "ops", "--force")
    assert code == 0, err
    code, out, err = run("--vault", str(root), "grep", "redacted", "--json")
    assert code == 0 and json.loads(out)["hits"], err
    code, out, _ = run("--vault", str(root), "grep", SAMPLES["github-token"], "--json")
    assert json.loads(out)["hits"] == []  # not findable: it was never stored
    code, out, _ = run("--vault", str(root), "status", "--json")
    assert set(json.loads(out)["redacted"]) == set(SAMPLES)
    with Vault(root) as v:
        assert v.dag.all("ops"), "compaction wrote summaries"
        exported = json.dumps(v.export("ops"))
    assert "[redacted: github-token]" in exported  # export gives back the redacted text
    assert leaks(root) == {}


def test_with_redaction_off_the_same_check_finds_the_secrets(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    toml = root / "vaultlcm.toml"
    toml.write_text(toml.read_text().replace("redact_secrets = true", "redact_secrets = false"), encoding="utf-8")
    with Vault(root) as v:
        report = v.ingest_bytes("ops", "".join(json.dumps(r) + "\n" for r in planted_transcript()).encode())
        assert report.redacted == {}
    assert set(leaks(root)) == set(SAMPLES)


def test_status_counts_markers_from_the_files(tmp_path: Path) -> None:
    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest("a", [{"role": "user", "content": "token " + SAMPLES["github-token"]}])
        assert v.status()["conversations"][0]["redacted"] == {"github-token": 1}
        v.ingest("a", [{"role": "user", "content": "jwt " + SAMPLES["jwt"] + " and " + SAMPLES["stripe-key"]}])
        assert v.status()["redacted"] == {"github-token": 1, "jwt": 1, "stripe-key": 1}
    # the count comes from the files: a fresh state folder counts the same
    import shutil

    shutil.rmtree(root / ".vaultlcm")
    with Vault(root) as v:
        assert v.status()["redacted"] == {"github-token": 1, "jwt": 1, "stripe-key": 1}
    code, out, _ = run("--vault", str(root), "status")
    assert "3 secrets redacted (1 github-token, 1 jwt, 1 stripe-key)" in out


def test_a_secret_a_person_pastes_into_a_note_stays_out_of_the_index(tmp_path: Path) -> None:
    secret = SAMPLES["github-token"]
    with Vault.init(tmp_path) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about the deploy " * 6}
                       for i in range(80)])
        v.compact("c", force=True)
        leaf = next(s for s in v.dag.all("c") if s.kind == "leaf")
        note = tmp_path / leaf.path
        note.write_text(note.read_text().rstrip("\n") + f"\nThe deploy token was {secret}\n")  # the person's own text
        v.refresh("c")
        assert v.grep("deploy token")["hits"]
        v.indexer.close()
    index_bytes = b"".join(p.read_bytes() for p in (tmp_path / ".vaultlcm/index").rglob("*") if p.is_file())
    assert secret.encode() not in index_bytes and b"ghp_" not in index_bytes
