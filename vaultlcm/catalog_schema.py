"""The catalog's tables: what :class:`vaultlcm.catalog.Catalog` keeps about the vault's files.

The catalog is derived state (``.vaultlcm/catalog.sqlite``): every row can be
rebuilt from the Markdown. A catalog whose ``schema`` in ``meta`` is not
:data:`SCHEMA_VERSION` is dropped and read again from the files, so a change
here needs no migration, only a new version.
"""

from __future__ import annotations

SCHEMA_VERSION = "7"  # 7: the links table folded into messages; 6: summaries.sources holds resolved links
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS logs(
    path TEXT PRIMARY KEY, conv TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    parsed INTEGER NOT NULL, head_hash TEXT NOT NULL, torn INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS logs_conv ON logs(conv, path);
CREATE INDEX IF NOT EXISTS logs_torn ON logs(conv) WHERE torn=1;
CREATE TABLE IF NOT EXISTS messages(
    id TEXT PRIMARY KEY, conv TEXT NOT NULL, seq INTEGER NOT NULL, at TEXT NOT NULL, role TEXT NOT NULL,
    tokens INTEGER NOT NULL, path TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, hash TEXT NOT NULL,
    covered TEXT, lane INTEGER NOT NULL DEFAULT 0, key TEXT,
    wseq INTEGER NOT NULL DEFAULT 0, prev TEXT, slane TEXT, thread TEXT);
CREATE INDEX IF NOT EXISTS messages_conv_seq ON messages(conv, seq);
CREATE INDEX IF NOT EXISTS messages_uncovered ON messages(conv, seq) WHERE covered IS NULL AND lane = 0;
CREATE INDEX IF NOT EXISTS messages_path ON messages(path, start);
CREATE INDEX IF NOT EXISTS messages_key ON messages(conv, key) WHERE key IS NOT NULL;
-- What the writer recorded of each message's place (wseq, prev) and thread (slane, thread) sits in its row: a
-- table of its own cost each append a second index on random ids (schema 6 and before).
-- The thread links by uuid and by parent uuid (vaultlcm.lanes_append): an append's lanes are index lookups
-- around the new rows, not a read of the whole conversation. Only threads SQLite reads as JSON are indexed
-- (json_extract would fail an insert on one it cannot read); messages_thread_bad finds the others.
CREATE INDEX IF NOT EXISTS messages_thread_u ON messages(conv, json_extract(thread, '$.u')) WHERE json_valid(thread);
CREATE INDEX IF NOT EXISTS messages_thread_p ON messages(conv, json_extract(thread, '$.p')) WHERE json_valid(thread);
CREATE INDEX IF NOT EXISTS messages_thread_bad ON messages(conv) WHERE thread IS NOT NULL AND NOT json_valid(thread);
CREATE TABLE IF NOT EXISTS pending(id TEXT PRIMARY KEY, conv TEXT NOT NULL, path TEXT NOT NULL, start INTEGER NOT NULL,
    end INTEGER NOT NULL, batch TEXT NOT NULL, last INTEGER NOT NULL, wseq INTEGER NOT NULL, entry TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS pending_conv ON pending(conv, path, start);
CREATE TABLE IF NOT EXISTS duplicates(id TEXT NOT NULL, path TEXT NOT NULL, start INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS payload_refs(name TEXT NOT NULL, conv TEXT NOT NULL, path TEXT NOT NULL, msg_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS payload_refs_conv ON payload_refs(conv, name);
CREATE INDEX IF NOT EXISTS payload_refs_path ON payload_refs(path);
CREATE TABLE IF NOT EXISTS summaries(
    id TEXT PRIMARY KEY, conv TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    kind TEXT NOT NULL, depth INTEGER NOT NULL, earliest_at TEXT NOT NULL, latest_at TEXT NOT NULL,
    first_seq INTEGER, last_seq INTEGER, descendant_count INTEGER NOT NULL, source_tokens INTEGER NOT NULL,
    token_count INTEGER NOT NULL, summarizer TEXT NOT NULL, prompt TEXT NOT NULL, level TEXT NOT NULL,
    gen_hash TEXT NOT NULL, body_hash TEXT NOT NULL, sources_hash TEXT NOT NULL, sources TEXT NOT NULL,
    body TEXT NOT NULL, parent TEXT, stale INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS summaries_roots ON summaries(conv, first_seq) WHERE parent IS NULL;
-- A conversation's summaries a page at a time, by id (the index's documents, the recompute's leaves). Without
-- it SQLite read every summary of the conversation and sorted them for each page: 43 s at 1M messages
-- (97k summaries) for what takes 0.5 s. A catalog made before it gets it at its next open.
CREATE INDEX IF NOT EXISTS summaries_conv_id ON summaries(conv, id);
CREATE INDEX IF NOT EXISTS summaries_parent ON summaries(parent);
CREATE INDEX IF NOT EXISTS summaries_time ON summaries(conv, latest_at, id);
-- Counting a conversation's summaries and its deepest depth (the home and index notes, status) reads
-- this index alone, not every row with its body: 250 ms to 11-20 ms at 1M messages. A catalog made
-- before it gets it at its next open (about 1 s at 1M, once).
CREATE INDEX IF NOT EXISTS summaries_depth ON summaries(conv, depth, parent);
-- The stale nodes compaction looks for first (Dag.stale): only those rows, not every summary of the
-- conversation (0.22-0.30 s at 1M messages without it, each compaction).
CREATE INDEX IF NOT EXISTS summaries_stale ON summaries(conv, depth, first_seq, id) WHERE stale<>0;
CREATE TABLE IF NOT EXISTS coverage(msg_id TEXT PRIMARY KEY, conv TEXT NOT NULL, summary_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS coverage_summary ON coverage(summary_id);
CREATE TABLE IF NOT EXISTS note_files(path TEXT PRIMARY KEY, conv TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, summary_id TEXT);
CREATE TABLE IF NOT EXISTS problems(path TEXT NOT NULL, conv TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reindex_queue(id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS summary_costs(id TEXT PRIMARY KEY, key TEXT NOT NULL, tokens INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS token_counts(key TEXT PRIMARY KEY, tokens INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS log_stats(path TEXT PRIMARY KEY, conv TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, messages INTEGER NOT NULL, tokens INTEGER NOT NULL, first_at TEXT, last_at TEXT);
CREATE TABLE IF NOT EXISTS failures(conv TEXT NOT NULL, at TEXT NOT NULL, summarizer TEXT NOT NULL, detail TEXT NOT NULL);
"""
