-- Exposures counted per memory and calling agent, so the exposure log is
-- append-only: its key index put an entry on a random page per read, and
-- under a read load the batched writer spent most of its time there. The
-- usage log adds to these counts as it writes the exposure rows (summed
-- over a second); memory.inspect and the recall breakdown read them.
CREATE TABLE memory_exposure_counts (
    org             TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    agent           TEXT NOT NULL,     -- the row's agent
    memory_key      TEXT NOT NULL,
    served_to       TEXT NOT NULL,     -- the calling agent
    n               BIGINT NOT NULL,
    PRIMARY KEY (org, namespace, agent, memory_key, served_to)
) WITHOUT ROWID;

INSERT INTO memory_exposure_counts (org, namespace, agent, memory_key, served_to, n)
SELECT org, namespace, agent, memory_key, served_to, COUNT(*)
FROM memory_exposures GROUP BY org, namespace, agent, memory_key, served_to;

DROP INDEX memory_exposures_by_key;
