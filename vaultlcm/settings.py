"""Settings: declared once, read from ``vaultlcm.toml`` and ``VAULTLCM_*`` variables.

Precedence, lowest to highest: the defaults below, the vault's ``vaultlcm.toml``,
then environment variables named ``VAULTLCM_`` + the upper-cased field name
(``VAULTLCM_FRESH_TAIL_COUNT=16``). The resulting :class:`Settings` object is
passed down to whatever needs it; nothing deeper reads files or the environment.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import SettingsError

ENV_PREFIX = "VAULTLCM_"


class Settings(BaseModel):
    """Every tunable of vaultlcm, with its default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    # -- assembly and compaction -------------------------------------------------
    fresh_tail_count: int = Field(
        32, ge=0, description="Newest raw messages always kept verbatim in the assembled context."
    )
    context_threshold: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Fraction of the token budget at which compaction is scheduled in the background.",
    )
    context_budget_tokens: int = Field(
        100_000,
        ge=256,
        description="Token budget the engine compacts towards when no budget is given (the model's window for context).",
    )
    incremental_max_depth: int = Field(
        -1, ge=-1, description="Highest summary depth compaction builds; -1 = unlimited, 0 = leaf passes only."
    )
    leaf_target_tokens: int = Field(1200, ge=32, description="Target size of a leaf summary, in tokens.")
    condensed_target_tokens: int = Field(
        2000, ge=32, description="Target size of a condensed (depth >= 1) summary, in tokens."
    )
    leaf_min_messages: int = Field(8, ge=1, description="Fewest raw messages a leaf summary covers.")
    leaf_max_messages: int = Field(16, ge=1, description="Most raw messages a leaf summary covers.")
    leaf_chunk_max_tokens: int = Field(
        20_000, ge=256, description="Cap on the tokens of raw messages fed to one leaf summarization."
    )
    condensed_min_fanin: int = Field(4, ge=2, description="Fewest same-depth nodes one condensed node covers.")
    condensed_max_fanin: int = Field(8, ge=2, description="Most same-depth nodes one condensed node covers.")
    max_expand_tokens: int = Field(4000, ge=64, description="Default token cap of `expand` and `ask`.")
    background_compaction: bool = Field(
        True, description="Run compaction scheduled by after_turn on a background thread."
    )
    # -- storage -----------------------------------------------------------------
    large_payload_tokens: int = Field(
        25_000, ge=64, description="Text of at least this many tokens is externalized to the files/ folder."
    )
    lock_timeout_seconds: float = Field(
        30.0, gt=0, description="How long a writer waits for a conversation's lock before giving up."
    )
    # -- summarizers -------------------------------------------------------------
    summarizer: Literal["digest", "extractive", "anthropic", "openai"] = Field(
        "digest",
        description="Which summarizer compaction uses: digest (offline; extractive is its former name), anthropic or openai.",
    )
    anthropic_model: str = Field("claude-haiku-4-5", description="Anthropic model used for summaries.")
    anthropic_base_url: str | None = Field(None, description="Override of the Anthropic API address.")
    openai_model: str = Field("llama3.1", description="Model name sent to the OpenAI-compatible endpoint.")
    openai_base_url: str = Field(
        "http://127.0.0.1:11434/v1", description="Base URL of the OpenAI-compatible endpoint (Ollama, vLLM, ...)."
    )
    openai_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable holding the OpenAI-compatible endpoint's key."
    )
    llm_timeout_seconds: float = Field(60.0, gt=0, description="Timeout of one summarizer request.")
    llm_max_retries: int = Field(2, ge=0, description="Retries of a failed summarizer request.")
    summary_max_input_tokens: int = Field(
        60_000, ge=1024, description="Cap on the tokens sent to one summarization call."
    )
    # -- index and sync ----------------------------------------------------------
    index_backend: Literal["whoosh", "tantivy"] = Field(
        "whoosh", description="Full-text index backend: whoosh (default) or tantivy (extra `vaultlcm[tantivy]`)."
    )
    regex_timeout_seconds: float = Field(5.0, gt=0, description="Time limit of a `grep --regex` scan.")
    watch_debounce_ms: int = Field(200, ge=0, description="Quiet time per path before `watch` re-syncs it.")
    # -- privacy -----------------------------------------------------------------
    redact_secrets: bool = Field(
        True,
        description="Replace high-confidence secrets (API keys, tokens, private keys, passwords in URLs) by "
        "[redacted: kind] before anything is written to a log, a note, files/ or the index.",
    )
    redact_patterns: dict[str, str] = Field(
        default_factory=dict,
        description="Extra secrets to redact, as kind = regular expression (its group named 'secret', else its "
        "first group, else the whole match is replaced); e.g. { internal-token = \"itk_[A-Za-z0-9]{32}\" }.",
    )

    @field_validator("redact_patterns", mode="before")
    @classmethod
    def _patterns_from_env(cls, value: Any) -> Any:
        # VAULTLCM_REDACT_PATTERNS carries the table as JSON: {"kind": "regex"}
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"expected a JSON object of kind: regex ({exc.msg})") from None
        return value

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        from .secrets import check_pattern

        for kind, pattern in value.items():
            check_pattern(kind, pattern)
        return value
    # -- git -----------------------------------------------------------------------
    git_auto_commit: bool = Field(
        False,
        description="Commit to git after a transcript ingest and after compaction (only the files they wrote; "
        "nothing when the vault is not in a git repository). `--git-commit` does it for one command.",
    )

    @classmethod
    def field_names(cls) -> list[str]:
        return list(cls.model_fields)


def _env_values(environ: Mapping[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name in Settings.model_fields:
        key = ENV_PREFIX + name.upper()
        if key in environ:
            values[name] = environ[key]
    return values


def _raise_for(exc: ValidationError, origin_of: Mapping[str, str]) -> None:
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(settings)"
        origin = origin_of.get(key.split(".")[0], "defaults")
        if err["type"] == "extra_forbidden":
            problems.append(
                f"{origin}: unknown setting {key!r}; the known ones are listed by `vaultlcm init` in vaultlcm.toml"
            )
        else:
            problems.append(f"{origin}: setting {key!r}: {err['msg']} (got {err.get('input')!r})")
    raise SettingsError("; ".join(problems)) from exc


def load_settings(
    toml_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build :class:`Settings` from a ``vaultlcm.toml``, the environment and overrides."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    origin_of: dict[str, str] = {}
    if toml_path is not None and toml_path.exists():
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{toml_path}: not valid TOML ({exc}); fix the file or delete it to use defaults") from exc
        for key, value in data.items():
            values[key] = value
            origin_of[key] = str(toml_path)
    for key, value in _env_values(environ).items():
        values[key] = value
        origin_of[key] = f"environment variable {ENV_PREFIX}{key.upper()}"
    for key, value in (overrides or {}).items():
        values[key] = value
        origin_of[key] = "argument"
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        _raise_for(exc, origin_of)
        raise  # unreachable; keeps type checkers content
    if settings.leaf_min_messages > settings.leaf_max_messages:
        raise SettingsError(
            f"{origin_of.get('leaf_min_messages', 'defaults')}: leaf_min_messages "
            f"({settings.leaf_min_messages}) is larger than leaf_max_messages ({settings.leaf_max_messages})"
        )
    if settings.condensed_min_fanin > settings.condensed_max_fanin:
        raise SettingsError(
            f"{origin_of.get('condensed_min_fanin', 'defaults')}: condensed_min_fanin "
            f"({settings.condensed_min_fanin}) is larger than condensed_max_fanin ({settings.condensed_max_fanin})"
        )
    return settings


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dict):  # an inline table: { kind = "value" }
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def default_toml() -> str:
    """The text ``vaultlcm init`` writes: every setting with its description and default."""
    lines = [
        "# vaultlcm settings. Every key is optional; the value shown is the default.",
        "# Environment variables VAULTLCM_<KEY> (upper case) override this file.",
        "",
    ]
    defaults = Settings()
    for name, field in Settings.model_fields.items():
        lines.append(f"# {field.description}")
        value = getattr(defaults, name)
        if value is None:
            lines.append(f"# {name} = \"\"")
        else:
            lines.append(f"{name} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
