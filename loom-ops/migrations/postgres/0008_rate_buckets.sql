-- Shared rate-limit buckets (LOOM_RATE_LIMIT_STORE=postgres): one row per
-- (org, subject, class); an org's shared bucket has subject ''. Each take
-- refills a row from updated_ms (the database's clock, so replicas agree).
-- A row idle for a minute is full again, so deleting it changes nothing.
CREATE TABLE rate_buckets (
    org TEXT NOT NULL,
    subject TEXT NOT NULL,
    class TEXT NOT NULL,
    tokens DOUBLE PRECISION NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (org, subject, class)
);
CREATE INDEX rate_buckets_idle ON rate_buckets (updated_ms);
