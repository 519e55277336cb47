"""What people and the agent say around the tool calls: several phrasings per moment.

Placeholders: ``{path}`` (source file), ``{test}`` (test file), ``{fn}`` (a
function), ``{svc}`` (a service), ``{mate}`` (a teammate), ``{n}`` (a number),
``{pr}`` (a pull request number), ``{other}`` (another function).
"""

from __future__ import annotations

REQUEST = {
    "bugfix": [
        "Morning! {test} started failing on main after yesterday's merge. Can you figure out what broke and fix it?",
        "CI is red on {test}, looks like something in {fn}. Could you take a look? I'm in meetings until eleven.",
        "{mate} says {fn} returns the wrong thing when the stop list is empty. Can you reproduce it with a test and fix it?",
        "There's a failure in {test} that I can't reproduce locally, maybe order dependent. Dig in when you get a chance.",
        "Can you fix the bug in {path}? {fn} blows up on routes with a single leg. Add a regression test please.",
        "Something's off with {fn}: support says totals are wrong for some accounts. Start from {test}.",
    ],
    "feature": [
        "Next thing: {fn} needs an optional limit argument, default unchanged. Tests in {test} please.",
        "Could you add a dry-run mode to {fn}? It should log what it would do and return early.",
        "I'd like {path} to emit a metric every time {fn} skips a row. Keep it cheap, it runs per stop.",
        "Let's add input validation to {fn}: reject negative weights with a clear error. Cover it in {test}.",
        "Can you split {fn} into two functions? It's doing parsing and scheduling at once and it's hard to test.",
        "We need {svc} to accept the new carrier code format. Start in {path} and tell me what else has to change.",
    ],
    "investigate": [
        "{svc} latency went up this morning around ten. Can you look at the logs and tell me what you see?",
        "Getting reports of timeouts from {svc}. Can you check the logs before I page anyone?",
        "Can you figure out why {svc} is retrying so much? The upstream looks healthy from the dashboards.",
        "{mate} thinks {fn} is slow on large accounts. Can you confirm from the logs before we optimize anything?",
        "Quick one: is {svc} still logging at debug level in staging? The log volume doubled.",
    ],
    "review": [
        "Can you review PR #{pr}? It touches {path}, mostly {fn}. Be picky about error handling.",
        "{mate} opened #{pr} for {svc}. Give it a read and leave comments, I'll merge after.",
        "Please look over #{pr} before standup, especially the changes around {fn}.",
        "Review #{pr} when you can. I'm not sure the retry logic in {path} is right.",
    ],
    "ops": [
        "Can you check whether the {svc} deploy from this morning went through?",
        "Is {svc} healthy after the rollout? I saw a blip on the dashboard.",
        "Before I go into the planning meeting: what's the state of {svc} in staging?",
        "Can you check the last deploy of {svc} and the logs right after it?",
    ],
    "chat": [
        "Thanks, that's great. Grabbing lunch, back in forty minutes.",
        "{mate} asked whether the {svc} change is safe to deploy before the weekend. What do you think?",
        "Can you remind me later to look at #{pr}? I keep forgetting.",
        "I'm pairing with {mate} for a bit. Carry on with {path} and leave me a summary.",
        "Nice work on that. How are you getting on with the rest?",
        "I'm in the planning meeting for the next hour, keep going on the list.",
        "Quick sanity check: are we still on track to finish the {svc} work today?",
        "Ugh, long standup. Where were we?",
        "Coffee first. Then let's pick up where we left off.",
    ],
}
CHAT_REPLY = [
    "Sounds good. I'll keep going and leave notes here as I go.",
    "Will do. Next on my list is `{fn}` in {path}; I'll ping you if it turns into something bigger.",
    "Got it. I'm halfway through {svc}; the failing case is reproduced and I'm writing the test now.",
    "Sure. Meanwhile I'll look at the review comments {mate} left on #{pr}.",
    "All good on my side. Nothing is blocked right now; I'll flag it if that changes.",
    "Yes, still on track. The remaining part is mostly tests.",
    "We were in the middle of the {svc} work; the tests are green so far and I'm cleaning up.",
    "Enjoy! I'll carry on with the next item and post a summary when you're back.",
]
STEP = {
    "pytest_fail": ["Let me run the failing test first.", "Reproducing before touching anything:",
                    "First, the test on its own:", "Running {test} to see the failure."],
    "read_test": ["Now the test itself:", "Let me read the test to see what it expects.", "Looking at {test}:"],
    "read_src": ["And the code under test:", "Reading {path} around {fn}:", "Let me look at how {fn} is implemented.",
                 "Checking {path}."],
    "grep": ["Where else is {fn} called?", "Let me find the other callers of {fn}.", "Searching for uses of {fn}:"],
    "edit": ["Making the change:", "Applying the fix in {path}:", "Editing {fn}:", "Here's the edit:"],
    "pytest_pass": ["Re-running the tests:", "Running the package tests again:", "Checking that everything passes now:"],
    "lint": ["And the linter:", "Running ruff over the change:"],
    "commit": ["Committing:", "Tests are green, committing on the branch.", "Committing the change:"],
    "diff": ["Here's the diff so far:", "Let me show you the full diff before committing:"],
    "logs": ["Pulling the recent logs for {svc}:", "Let me look at the {svc} logs from this morning.", "Logs first:"],
    "deploy": ["Checking the deploy status:", "Let me look at the rollout:"],
    "pr": ["Fetching the PR diff:", "Let me read the diff of #{pr}:"],
    "docs": ["Let me check the runbook for {svc}.", "The runbook should say:", "Looking it up in the docs:"],
    "history": ["What changed there recently?", "Recent commits touching that package:", "Let me see what landed lately:"],
    "check": ["Let me check.", "Checking the current state:", "One more look before I continue:", "Checking:"],
}
ANALYSIS = [
    "So `{fn}` is called with `limit=None` on the retry path and falls through to the default of {n}. That explains the flakiness: it depends on which path runs first.",
    "The failing assertion compares totals after `{other}` has already filtered the inactive rows, so the expected value in the test is stale rather than the code being wrong. I'll fix the code path anyway, because the filtering happens twice.",
    "Reading this more closely, `{fn}` mutates its input list. The caller in {path} reuses that list afterwards, which is why the second call sees {n} rows instead of the full set.",
    "Nothing in the logs points at the database. The slow requests all go through `{other}`, which does one query per stop; with {n} stops per route that adds up.",
    "The retries come from the upstream answering 429 with no Retry-After header, and our client backs off for a fixed {n} ms. That's a tight loop under load.",
    "I think the cleanest fix is to move the validation into `{fn}` itself instead of every caller doing it, since there are already {n} call sites.",
    "This is the same pattern as the bug we fixed in `{other}` last week: an exception swallowed in a broad `except`, then a default returned as if nothing happened.",
    "The diff is small but the behaviour change isn't: `{fn}` now raises where it used to return an empty list, and `{other}` doesn't catch that.",
    "I'd go with a partial index rather than a new table, because the hot query only ever touches open rows and the table has about {n} thousand of them.",
    "Decided to keep the old function as a thin wrapper for one release instead of deleting it, since the export worker still imports it.",
    "Two options here: cache the result of `{other}` per request, or batch the lookups. Batching is more work but the cache would go stale when {mate}'s importer runs, so I'll batch.",
    "The test was passing by accident: the fixture creates {n} stops but the assertion only looks at the first page. I tightened the assertion before touching `{fn}`.",
    "I checked git blame: this branch of `{fn}` came in with the carrier refactor and nobody has exercised it since. I'll add a test first so we see it fail.",
    "There are two code paths that build the same key, one in `{fn}` and one in `{other}`, and they disagree on case. I'm making `{other}` call `{fn}` so there's one rule.",
    "I'm not going to touch the migration; it's unrelated and {mate} has a branch open on it. The fix stays inside `{fn}`.",
]
FRAME = {
    "user": ["By the way, {f}.", "Unrelated, but {f}.", "FYI {f}.", "Oh, and {f}, just so you know.",
             "Quick note before I forget: {f}.", "Also, {f}."],
    "assistant": ["While I was in there I noticed that {f}.", "Side note: {f}.", "Also worth knowing: {f}.",
                  "For the record, {f}.", "One more thing from the docs: {f}."],
}
REVIEW_NOTE = [
    "Two comments on #{pr}: `{fn}` swallows the error from `{other}`, and the new test only covers the happy path. Otherwise it looks fine to merge.",
    "#{pr} looks good. One nit: the log line in `{fn}` includes the whole payload, which can carry customer addresses; I'd log the id instead.",
    "I left three comments on #{pr}. The main one: the retry in `{fn}` has no upper bound, so a dead upstream keeps the worker busy forever.",
]
FINAL = {
    "change": [
        "Done. `{fn}` is fixed and covered by a regression test; the package suite passes. Nothing left open on this one.",
        "Fixed and committed. The root cause was in `{fn}`; I also tidied the caller in {path}. Let me know if you want a PR opened now or later.",
        "That's in. Tests pass locally and ruff is clean. Open question: should `{other}` get the same treatment? It has the same shape.",
        "Summary: the change is in {path}, with tests in {test}. I didn't touch the public API. Next I'd look at the slow path in `{other}`.",
        "All green. I kept the change small on purpose; the bigger refactor of `{other}` can wait for its own PR.",
        "Committed on the branch. I haven't pushed; say the word and I'll open the PR and ask {mate} to review.",
    ],
    "look": [
        "Looks healthy now. I didn't change anything; if it happens again I'd start with `{other}`.",
        "Nothing alarming in {svc}: the errors are retries that succeeded on the second attempt. I'd leave it and watch the dashboard this afternoon.",
        "My read: the spike lines up with the batch job in `{other}`, not with the deploy. I'd raise it with {mate} rather than roll back.",
        "Summary: {svc} is fine, one noisy log line from `{fn}` aside. I didn't touch anything.",
        "Comments are posted on #{pr}. Nothing blocking from my side once those are addressed.",
        "I don't see a regression. The slow requests are all large accounts hitting `{fn}`, about {n} of them this morning, same as last week.",
        "{svc} looks fine after the rollout. If {mate} sees the blip again, the first thing to check is the connection pool, not the code.",
        "Nothing to fix right now. I wrote down the request ids of the slowest calls in case we want to trace `{other}` later.",
    ],
}
RUNBOOK = [
    "- Restarts are safe; the consumer resumes from the last committed offset.",
    "- Dashboards: latency, error rate and queue depth, all in the shared folder.",
    "- Escalate to the owning team after two failed restarts.",
    "- Never run the backfill during business hours.",
    "- Config lives in config/{svc}.toml; secrets are injected at deploy time.",
    "- Health check: GET /healthz returns 200 with the build id.",
]
EVENT_REMARK = [
    "Noted. Same symptom as the earlier ones; I'll keep going and come back to it if it blocks us.",
    "Logged it in our notes. Not touching it right now since it isn't related to the current change.",
    "It recovered on its own, so I'm moving on.",
    "I'll add it to the list for the incident review and carry on.",
]
