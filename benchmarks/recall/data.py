"""The pools facts are drawn from: plain English, as people on a team say things.

Each sentence starts in lower case (the generator frames it: "By the way, …",
"While I was in there I noticed …"). No question contains its answer; the
session generator checks that, and that no answer occurs anywhere but where it
was planted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

# (answer, sentence, question)
NAME_ROLES = [
    ("Greta", "Greta took over on-call for billing-service from Kofi this week", "Who took over on-call for billing-service?"),
    ("Olumide", "Olumide is the release manager for the routing-api 4.x line", "Who is the release manager for the routing-api 4.x line?"),
    ("Ingrid", "Ingrid owns the carrier onboarding checklist now", "Who owns the carrier onboarding checklist?"),
    ("Mateus", "Mateus from the data team is our contact for the warehouse exports", "Who on the data team is our contact for the warehouse exports?"),
    ("Chiara", "Chiara has to sign off on any schema change to the ledger tables", "Who has to sign off on schema changes to the ledger tables?"),
    ("Dmitri", "Dmitri wrote the original rate-card parser, so he is the one to ask about its quirks", "Who wrote the original rate-card parser?"),
    ("Yusuf", "Yusuf is the security reviewer assigned to the auth-gateway token work", "Who is the security reviewer on the auth-gateway token work?"),
    ("Annika", "Annika runs the Thursday incident review", "Who runs the Thursday incident review?"),
    ("Hiroshi", "Hiroshi is pairing with us on the depot geofencing spike", "Who is pairing with us on the depot geofencing spike?"),
    ("Lucía", "Lucía manages the Stripe account and the payout schedules", "Who manages the Stripe account?"),
    ("Femi", "Femi is the product owner for notifier", "Who is the product owner for notifier?"),
    ("Zofia", "Zofia approved the budget for the second Redis cluster", "Who approved the budget for the second Redis cluster?"),
]
IDENTIFIERS = [
    ("NAV-731", "the websocket reconnect flakiness is tracked in NAV-731", "What's the ticket for the websocket reconnect flakiness?"),
    ("OPS-2291", "the change request for the Postgres minor upgrade is OPS-2291", "What's the change request number for the Postgres minor upgrade?"),
    ("routing.smart_batching_v2", "the flag that gates the new batching is routing.smart_batching_v2", "What is the feature flag that gates the new batching called?"),
    ("tw-exports-archive-eu", "the archived export CSVs land in the tw-exports-archive-eu bucket", "Which bucket do the archived export CSVs land in?"),
    ("INC-4417", "the postmortem for last month's outage is INC-4417", "What's the incident number of last month's outage postmortem?"),
    ("#depot-ops-escalations", "depot escalations go to #depot-ops-escalations, not the general channel", "Which Slack channel do depot escalations go to?"),
    ("SEC-118", "the pen-test finding about session fixation is filed as SEC-118", "Which ticket holds the pen-test finding about session fixation?"),
    ("tw-routing-latency-v3", "the dashboard everyone watches during rollouts is tw-routing-latency-v3", "Which dashboard does everyone watch during rollouts?"),
    ("kv/tidewater/prod/carrier-keys", "the carrier API keys live under kv/tidewater/prod/carrier-keys", "Where do the carrier API keys live?"),
    ("PLAT-905", "the epic for moving the cron jobs onto the scheduler is PLAT-905", "What's the epic for moving cron jobs onto the scheduler?"),
    ("pg-analytics-07", "the read replica the analysts query is pg-analytics-07", "Which host is the replica the analysts query?"),
    ("parcel-events-dlq", "failed parcel events end up in parcel-events-dlq", "Where do failed parcel events end up?"),
]
NUMBERS = [
    ("47 minutes", "the nightly export job takes about 47 minutes end to end", "How long does the nightly export job take?"),
    ("1536 MiB", "the worker pods have a memory limit of 1536 MiB", "What's the memory limit on the worker pods?"),
    ("240 requests per minute", "the partner API lets us make 240 requests per minute", "What's the rate limit on the partner API?"),
    ("93 days", "we keep raw GPS traces for 93 days", "How long do we keep raw GPS traces?"),
    ("3.7 seconds", "p99 for quote generation is sitting at 3.7 seconds", "What's the p99 for quote generation?"),
    ("18 shards", "the search index is split into 18 shards", "How many shards is the search index split into?"),
    ("3100 dollars", "the CDN bill came to 3100 dollars last month", "How much was last month's CDN bill?"),
    ("62 percent", "the cache hit rate on tariff lookups is 62 percent", "What's the cache hit rate on tariff lookups?"),
    ("11 carriers", "11 carriers are still on the legacy SOAP integration", "How many are still on the legacy SOAP integration?"),
    ("850 milliseconds", "the carrier webhook has to answer within 850 milliseconds or they retry", "How fast does the carrier webhook need to answer?"),
]
DATES = [
    ("November 18", "the SOC 2 audit fieldwork starts November 18", "When does the SOC 2 audit fieldwork start?"),
    ("October 27", "the old v1 routing endpoints get switched off on October 27", "When do the v1 routing endpoints get switched off?"),
    ("December 2", "the TLS certificate for the public API expires December 2", "When does the public API's TLS certificate expire?"),
    ("September 30", "the contract with Northwind Freight renews September 30", "When does the Northwind Freight contract renew?"),
    ("January 12", "the team offsite is on January 12", "When is the team offsite?"),
    ("October 21", "the pricing change for enterprise customers goes live October 21", "When does the enterprise pricing change go live?"),
    ("December 9", "the board demo is December 9", "When is the board demo?"),
    ("November 6", "the penetration test window opens November 6", "When does the penetration test window open?"),
]
PREFERENCES = [
    ("zoneinfo", "always use zoneinfo for time zones, never pytz", "Which library did I say to use for time zones?"),
    ("tabs", "I prefer tabs over spaces in this repo, I know, I know", "What indentation do I want in this repo?"),
    ("httpx", "use httpx for outbound HTTP, not requests", "Which HTTP client should new code use?"),
    ("squash", "I like PRs merged with squash, no merge commits on main", "How do I want pull requests merged?"),
    ("Decimal", "money is always Decimal here, never float", "What type should money amounts use?"),
    ("structlog", "I'd like new logging to go through structlog with key-value pairs", "Which logging library do I want for new code?"),
    ("British spelling", "docs are written in British spelling", "Which spelling convention should the docs follow?"),
    ("by hand", "write alembic migrations by hand, don't trust autogenerate", "How should alembic migrations be written?"),
    ("pathlib", "please use pathlib rather than os.path in new code", "Which path API do I prefer in new code?"),
    ("factory_boy", "test data comes from factory_boy factories, not raw SQL fixtures", "Where should test data come from?"),
    ("ruff format", "format with ruff format; we dropped black", "Which formatter do I want us to use?"),
    ("imperative mood", "commit subjects go in the imperative mood, under 72 characters", "How should commit subjects be written?"),
    ("keyword-only", "I prefer keyword-only arguments for anything with more than two parameters", "What do I prefer for functions with more than two parameters?"),
    ("early returns", "I prefer early returns over nested ifs", "What do I prefer over nested ifs?"),
]
# (old, new, first statement, update "from X to Y", update "now Y", question)
UPDATED = [
    ("October 3", "October 4", "the 4.2 release is planned for October 3", "we moved the 4.2 release from October 3 to October 4",
     "the 4.2 release is now on October 4", "When is the 4.2 release?"),
    ("November 10", "November 13", "code freeze is November 10", "code freeze slipped from November 10 to November 13",
     "code freeze is now November 13", "When is code freeze?"),
    ("5 attempts", "8 attempts", "the webhook retry limit is 5 attempts", "I bumped the webhook retry limit from 5 attempts to 8 attempts",
     "the webhook retry limit is 8 attempts now", "How many attempts does the webhook retry limit allow?"),
    ("7 percent", "15 percent", "the canary gets 7 percent of traffic", "we raised the canary from 7 percent to 15 percent of traffic",
     "the canary takes 15 percent of traffic as of today", "What share of traffic does the canary get?"),
    ("Sven", "Noor", "Sven is primary on-call for routing-api", "primary on-call for routing-api switched from Sven to Noor",
     "Noor is primary on-call for routing-api from today", "Who is primary on-call for routing-api?"),
    ("25 MB", "40 MB", "the maximum manifest upload is 25 MB", "the maximum manifest upload went from 25 MB to 40 MB",
     "the maximum manifest upload is 40 MB now", "What's the maximum manifest upload size?"),
    ("November 24", "December 1", "the Kestrel Logistics pilot starts November 24", "the Kestrel Logistics pilot moved from November 24 to December 1",
     "the Kestrel Logistics pilot now starts December 1", "When does the Kestrel Logistics pilot start?"),
    ("pg-stage-2", "pg-stage-5", "staging points at pg-stage-2", "staging moved from pg-stage-2 to pg-stage-5",
     "staging points at pg-stage-5 now", "Which database host does staging use?"),
    ("#routing-alerts", "#routing-pager", "routing pages go to #routing-alerts", "routing pages moved from #routing-alerts to #routing-pager",
     "routing pages go to #routing-pager now", "Which channel do routing pages go to?"),
    ("02:15 UTC", "03:40 UTC", "the reconciliation job runs at 02:15 UTC", "the reconciliation job moved from 02:15 UTC to 03:40 UTC",
     "the reconciliation job runs at 03:40 UTC now", "What time does the reconciliation job run?"),
    ("15 minutes", "40 minutes", "access tokens live for 15 minutes", "the access token lifetime went from 15 minutes to 40 minutes",
     "access tokens live for 40 minutes now", "How long do access tokens live?"),
    ("500 transfers", "750 transfers", "payout batches hold 500 transfers", "payout batches went from 500 transfers to 750 transfers",
     "payout batches hold 750 transfers now", "How many transfers go in a payout batch?"),
    ("eu-west-1", "eu-central-1", "the EU tenant runs in eu-west-1", "the EU tenant moved from eu-west-1 to eu-central-1",
     "the EU tenant runs in eu-central-1 now", "Which AWS region does the EU tenant run in?"),
    ("120 stops", "140 stops", "the planner caps a route at 120 stops", "the route cap went from 120 stops to 140 stops",
     "the planner caps a route at 140 stops now", "How many stops can one route have at most?"),
    ("0.42 EUR", "0.39 EUR", "we pay 0.42 EUR per shipping label", "the label price dropped from 0.42 EUR to 0.39 EUR",
     "we pay 0.39 EUR per shipping label now", "What do we pay per shipping label?"),
    ("November 5", "November 7", "the architecture review is on November 5", "the architecture review moved from November 5 to November 7",
     "the architecture review is on November 7 now", "When is the architecture review?"),
]
# (old, new, sentence, (tool name, arguments), question before, question after)
BEFORE_AFTER = [
    ("python:3.10-slim", "python:3.12-slim", "I switched the worker base image from python:3.10-slim to python:3.12-slim",
     ("edit_file", {"path": "docker/worker.Dockerfile", "old_str": "FROM python:3.10-slim", "new_str": "FROM python:3.12-slim"}),
     "What base image did the workers use before the upgrade?", "What base image do the workers use after the upgrade?"),
    ("750 ms", "2500 ms", "I raised the carrier client timeout from 750 ms to 2500 ms",
     ("edit_file", {"path": "config/carriers.toml", "old_str": "timeout = \"750 ms\"", "new_str": "timeout = \"2500 ms\""}),
     "What was the carrier client timeout before we raised it?", "What is the carrier client timeout after the change?"),
    ("md5", "blake2b", "cache keys are now hashed with blake2b instead of md5",
     ("edit_file", {"path": "src/tidewater/search/cache.py", "old_str": "hashlib.md5(key)", "new_str": "hashlib.blake2b(key, digest_size=16)"}),
     "Which hash did cache keys use before the change?", "Which hash do cache keys use after the change?"),
    ("18 connections", "44 connections", "the ledger pool went from 18 connections to 44 connections",
     ("edit_file", {"path": "config/ledger.toml", "old_str": "pool = \"18 connections\"", "new_str": "pool = \"44 connections\""}),
     "How big was the ledger connection pool before the change?", "How big is the ledger connection pool after the change?"),
    ("invoices-v1", "invoices-v2", "invoice jobs now go to the invoices-v2 queue instead of invoices-v1",
     ("edit_file", {"path": "src/tidewater/billing/tasks.py", "old_str": "QUEUE = \"invoices-v1\"", "new_str": "QUEUE = \"invoices-v2\""}),
     "Which queue did invoice jobs use before the migration?", "Which queue do invoice jobs use after the migration?"),
    ("Redis 6.2", "Redis 7.2", "the cache cluster is upgraded from Redis 6.2 to Redis 7.2",
     ("edit_file", {"path": "deploy/cache.yaml", "old_str": "image: Redis 6.2", "new_str": "image: Redis 7.2"}),
     "Which Redis version was the cache cluster on before the upgrade?", "Which Redis version is the cache cluster on after the upgrade?"),
    ("pickle", "msgpack", "job payloads are serialized with msgpack now; pickle is gone",
     ("edit_file", {"path": "src/tidewater/exports/tasks.py", "old_str": "codec = pickle", "new_str": "codec = msgpack"}),
     "How were job payloads serialized before the change?", "How are job payloads serialized after the change?"),
    ("50 results", "200 results", "the search API's default page went from 50 results to 200 results",
     ("edit_file", {"path": "src/tidewater/search/views.py", "old_str": "DEFAULT_PAGE = \"50 results\"", "new_str": "DEFAULT_PAGE = \"200 results\""}),
     "What was the search API's default page size before the change?", "What is the search API's default page size after the change?"),
]
# (ticket prefix, symptom, bridging identifier, cause, commit subject naming the identifier but not the ticket)
TWO_HOP = [
    ("LEDG", "refunds sometimes post twice", "apply_refund_credit", "it retries without an idempotency key", "Make apply_refund_credit idempotent on retry"),
    ("RTE", "ETAs jump by an hour after the DST switch", "shift_eta_window", "it adds a fixed offset instead of converting", "Convert instead of offsetting in shift_eta_window"),
    ("DEPOT", "depot manifests miss the last parcel", "close_manifest_batch", "the slice end is exclusive", "Include the final parcel in close_manifest_batch"),
    ("AUTH", "password reset links expire immediately", "ResetTokenClock", "it compares a naive and an aware datetime", "Use aware datetimes in ResetTokenClock"),
    ("EXP", "exports of more than 10k rows come out empty", "stream_export_rows", "the generator is consumed twice", "Stop consuming the cursor twice in stream_export_rows"),
    ("QUOTE", "the quote endpoint returns 500 for island postcodes", "resolve_zone_surcharge", "island zones have no surcharge row", "Default missing zones in resolve_zone_surcharge"),
    ("NTF", "customers get duplicate SMS for a single delivery", "NotifyDeduper", "its key ignores the delivery attempt", "Key NotifyDeduper on the delivery attempt"),
    ("SRCH", "search ignores accented street names", "fold_diacritics", "it only folds Latin-1", "Fold all combining marks in fold_diacritics"),
    ("PAY", "payout totals are off by one cent", "round_payout_fx", "it rounds each line instead of the total", "Round the total once in round_payout_fx"),
    ("CARR", "carrier webhooks are rejected with 401 after key rotation", "verify_carrier_hmac", "it only checks the newest key", "Accept the previous key in verify_carrier_hmac"),
    ("OPT", "the route optimizer hangs on a single-stop route", "prune_degenerate_legs", "it loops forever on a zero-length leg", "Break out on zero-length legs in prune_degenerate_legs"),
    ("LEDG", "ledger rows get written with the wrong currency", "LedgerCurrencyGuard", "it reads the account default before the override", "Check the override first in LedgerCurrencyGuard"),
    ("LBL", "label PDFs cut off the barcode", "render_label_pdf", "the page margin is applied twice", "Apply the margin once in render_label_pdf"),
    ("SESS", "session cookies are not cleared on logout", "revoke_session_family", "it revokes only the current token", "Revoke the whole family in revoke_session_family"),
]


@dataclass(frozen=True)
class CountingSubject:
    """Events to count: each one a message with its own detail (a build, run or case number)."""

    name: str
    question: str
    keywords: tuple[str, ...]
    detail_fmt: str
    lo: int
    hi: int
    tool: str | None
    """A command whose result reports the event, or None when a person tells it."""
    templates: tuple[str, ...]

    def details(self, rng: random.Random, n: int) -> list[str]:
        nums = rng.sample(range(self.lo, self.hi), n)
        return [self.detail_fmt.format(n=x) for x in nums]

    def render(self, rng: random.Random, detail: str, i: int) -> tuple[str, str, tuple[str, dict[str, Any]] | None]:
        text = self.templates[i % len(self.templates)].format(d=detail)
        if self.tool is None:
            return "report", text, None
        return "tool", text, ("run_command", {"command": self.tool})


COUNTING = [
    CountingSubject("deploy-failed", "How many times did the routing-api deploy fail?", ("routing-api", "deploy"),
                    "build {n}", 5100, 5999, "deployctl status routing-api", (
                        "deployctl status routing-api\n  {d}\n  state      FAILED\n  reason     readiness probe timed out on 3/6 pods\n  rolled back automatically",
                        "deployctl status routing-api\n  {d}\n  state      FAILED\n  reason     migration lock held by another job",
                        "deployctl status routing-api\n  {d}\n  state      FAILED\n  reason     image pull backoff (registry 503)")),
    CountingSubject("ci-timeout", "How many times did the integration suite time out on CI?", ("integration", "suite"),
                    "run {n}", 81000, 89999, None, (
                        "CI timed out again on the integration suite, {d}. Can you see if it's the same hang?",
                        "Integration suite hit the 30 minute timeout in {d}, third time this sprint it feels like.",
                        "Heads up, {d} died on the integration suite timeout, I re-queued it.")),
    CountingSubject("notifier-rollback", "How many times did we roll notifier back?", ("notifier", "rolled"),
                    "RB-{n}", 300, 699, "deployctl history notifier --last 1", (
                        "notifier  rolled back  {d}  by priya  reason: SMS provider errors above threshold",
                        "notifier  rolled back  {d}  by on-call  reason: template render crash on de-DE",
                        "notifier  rolled back  {d}  by priya  reason: queue lag over 10 minutes")),
    CountingSubject("disk-pressure", "How many times did db-replica-2 page for disk pressure?", ("db-replica-2", "disk"),
                    "alert {n}", 7000, 7999, "pd incidents list --service db-replica-2 --since 1d", (
                        "TRIGGERED  {d}  db-replica-2  disk pressure: /var/lib/postgresql at 91%",
                        "TRIGGERED  {d}  db-replica-2  disk pressure: WAL volume at 94%",
                        "TRIGGERED  {d}  db-replica-2  disk pressure: /var/lib/postgresql at 89%, autovacuum behind")),
    CountingSubject("flaky-test", "How many times did test_webhook_signature flake?", ("test_webhook_signature",),
                    "job {n}", 40000, 49999, "gh run view --log-failed", (
                        "FAILED tests/notify/test_webhooks.py::test_webhook_signature - AssertionError: signature mismatch ({d})",
                        "{d}: tests/notify/test_webhooks.py::test_webhook_signature FAILED (passed on retry)",
                        "FAILED tests/notify/test_webhooks.py::test_webhook_signature - TimeoutError in fixture clock ({d})")),
    CountingSubject("export-crash", "How many times did the nightly export crash?", ("nightly", "export"),
                    "export job {n}", 2000, 2999, "kubectl logs job/nightly-export --tail 3", (
                        "nightly export {d} crashed: MemoryError while building the parquet footer",
                        "nightly export {d} crashed: worker OOMKilled at 1.9 GiB",
                        "nightly export {d} crashed: connection to pg-replica dropped mid-stream")),
    CountingSubject("dup-invoice", "How many customer escalations about duplicate invoices came in?", ("duplicate", "invoices"),
                    "case {n}", 10000, 19999, None, (
                        "Another escalation about duplicate invoices, {d}. Same pattern as before?",
                        "Support forwarded {d}: a customer got duplicate invoices for one shipment.",
                        "One more for the pile: {d}, duplicate invoices again, this time an enterprise account.")),
    CountingSubject("bluefin-outage", "How many times did Bluefin Express's tracking API go down?", ("Bluefin", "tracking"),
                    "window {n}", 600, 999, "carrierctl health bluefin", (
                        "bluefin  tracking API  DOWN  {d}  HTTP 503 for 14 minutes",
                        "bluefin  tracking API  DOWN  {d}  connection refused, 22 minutes",
                        "bluefin  tracking API  DOWN  {d}  timeouts above 30s, 9 minutes")),
    CountingSubject("payout-hotfix", "How many hotfixes did we cut for payouts?", ("hotfix", "payouts"),
                    "payouts 3.4.{n}", 2, 40, "git tag --points-at HEAD", (
                        "{d}\n(hotfix: tag pushed, release notes drafted)",
                        "{d}\n(hotfix for the FX rounding regression)",
                        "{d}\n(hotfix: reverted the batch splitter)")),
    CountingSubject("indexer-restart", "How many times did search-indexer need a manual restart?", ("search-indexer", "restart"),
                    "pod search-indexer-{n}", 100, 999, "kubectl rollout restart deploy/search-indexer", (
                        "deployment.apps/search-indexer restarted manually ({d} was stuck in a GC loop)",
                        "deployment.apps/search-indexer restarted manually ({d} stopped consuming)",
                        "deployment.apps/search-indexer restarted manually ({d} leaked file handles)")),
]
