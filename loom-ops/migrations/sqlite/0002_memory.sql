-- The memory plane: memories, their version history, blacklist patterns,
-- exposures (who was served which row) and full-text search.
-- Flags are BIGINT 0/1: sqlx's Any driver cannot decode a SQLite BOOLEAN column.

CREATE TABLE memories (
    org             TEXT NOT NULL,
    id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- rowid of the FTS index
    namespace       TEXT NOT NULL,
    agent           TEXT NOT NULL,
    memory_key      TEXT NOT NULL,
    content         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    labels          TEXT NOT NULL DEFAULT '[]',         -- JSON array of strings, sorted
    source          TEXT NOT NULL DEFAULT '',
    content_hash    TEXT NOT NULL,
    version         BIGINT NOT NULL,
    pinned          BIGINT NOT NULL DEFAULT 0,
    locked          BIGINT NOT NULL DEFAULT 0,
    deleted         BIGINT NOT NULL DEFAULT 0,
    expires_ms      BIGINT,
    recall_count    BIGINT NOT NULL DEFAULT 0,
    last_recall_ms  BIGINT,
    created_ms      BIGINT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    UNIQUE (org, namespace, agent, memory_key)
);
CREATE INDEX memories_by_key ON memories (org, namespace, memory_key);
CREATE INDEX memories_by_update ON memories (org, namespace, updated_ms);

-- One row per change, a full snapshot of the memory after it.
CREATE TABLE memory_versions (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    agent           TEXT NOT NULL,
    memory_key      TEXT NOT NULL,
    version         BIGINT NOT NULL,
    change          TEXT NOT NULL,     -- create, set, update, delete, pin, unpin, lock, unlock, expire, label, demote
    content         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    labels          TEXT NOT NULL,
    source          TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    pinned          BIGINT NOT NULL,
    locked          BIGINT NOT NULL,
    deleted         BIGINT NOT NULL,
    expires_ms      BIGINT,
    run_id          TEXT,
    subject         TEXT NOT NULL,
    changed_by      TEXT NOT NULL,     -- the calling agent
    request_id      TEXT NOT NULL,
    at_ms           BIGINT NOT NULL,
    PRIMARY KEY (org, namespace, agent, memory_key, version)
);

CREATE TABLE blacklist (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    pattern         TEXT NOT NULL,
    subject         TEXT NOT NULL,
    created_ms      BIGINT NOT NULL,
    PRIMARY KEY (org, namespace, pattern)
);

CREATE TABLE memory_exposures (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    agent           TEXT NOT NULL,     -- the row's agent
    memory_key      TEXT NOT NULL,
    version         BIGINT NOT NULL,
    served_to       TEXT NOT NULL,     -- the calling agent
    subject         TEXT NOT NULL,
    op              TEXT NOT NULL,
    run_id          TEXT,
    request_id      TEXT NOT NULL,
    at_ms           BIGINT NOT NULL
);
CREATE INDEX memory_exposures_by_key ON memory_exposures (org, namespace, memory_key, at_ms);

-- Full-text index over key, content and labels, kept in sync by triggers.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    memory_key, content, labels,
    content = 'memories', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, memory_key, content, labels)
    VALUES (new.id, new.memory_key, new.content, new.labels);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels)
    VALUES ('delete', old.id, old.memory_key, old.content, old.labels);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF memory_key, content, labels ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels)
    VALUES ('delete', old.id, old.memory_key, old.content, old.labels);
    INSERT INTO memories_fts (rowid, memory_key, content, labels)
    VALUES (new.id, new.memory_key, new.content, new.labels);
END;
