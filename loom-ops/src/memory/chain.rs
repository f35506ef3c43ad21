//! SQLite's version history, read along each memory's chain (migration
//! 0018): a memory's row names its newest version (`history`), and each
//! version the one before it (`prev`), so history is read newest first,
//! a version at a time by row id, and no index keyed by memory is written
//! with each version (the migration says why). PostgreSQL keeps its
//! versions under their primary key and reads them by it.

/// `WITH RECURSIVE chain(vid, taken)`: from the newest version of each
/// memory `seed` selects (a condition on `memories m`), back one version
/// (`v`) at a time, counting in `taken` the versions `keep` holds for; a
/// chain stops once `most` of them are reached (an SQL expression), or at
/// its first version when `most` is `None`. The statement that follows
/// reads `chain JOIN memory_versions v ON v.rowid = chain.vid WHERE
/// {keep}`.
///
/// A version is always inserted after the one it names, so a chain only
/// ever goes down in row ids; a walk follows no link that does not (one
/// another program wrote wrong), so it ends whatever the table holds.
pub(super) fn chain(seed: &str, keep: &str, most: Option<&str>) -> String {
    let more = most.map_or(String::new(), |most| {
        format!(" AND chain.taken + ({keep}) < {most}")
    });
    format!(
        "WITH RECURSIVE chain(vid, taken) AS (\
           SELECT m.history, 0 FROM memories m WHERE {seed} AND m.history IS NOT NULL \
           UNION ALL \
           SELECT v.prev, chain.taken + ({keep}) FROM chain \
           JOIN memory_versions v ON v.rowid = chain.vid \
           WHERE v.prev IS NOT NULL AND v.prev < v.rowid{more}) "
    )
}

/// [`chain`]'s seed for one memory: the row of `$1` org, `$2` namespace,
/// `$3` agent, `$4` key.
pub(super) const ONE_MEMORY: &str =
    "m.org = $1 AND m.namespace = $2 AND m.agent = $3 AND m.memory_key = $4";
