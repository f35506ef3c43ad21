-- The full-text index splits names into their parts, as SQLite's does.
-- PostgreSQL's parser reads `deploy.window`, `db/choice`, `ns:key` or
-- `bob@example.com` as one token (a host, a file path, an email), so a
-- search for `window` missed the memory keyed `deploy.window` that SQLite
-- finds: its tokenizer splits on every character that is no letter or
-- digit, and so do Loom's queries (`rank::terms`). The text is indexed
-- with those characters read as spaces. Rewrites the table once (the
-- column is stored), and the index with it.
ALTER TABLE memories DROP COLUMN fts;
ALTER TABLE memories ADD COLUMN fts tsvector GENERATED ALWAYS AS (
    to_tsvector('english',
        translate(memory_key || ' ' || content || ' ' || labels, './:@', '    '))) STORED;
CREATE INDEX memories_fts ON memories USING GIN (fts) WITH (gin_pending_list_limit = 256);
