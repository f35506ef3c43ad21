//! Where the direct writer's time goes, summed and logged at debug level
//! once per [`EVERY`] while it writes
//! (`LOOM_LOG=loom_ops::store::writer_phases=debug`): its phases' shares,
//! and from the calls' side how long a write waited at the writer and
//! what held it there.
//!
//! Why: under a write load the writer's thread is what bounds the writes
//! a second (bench/RESULTS.md), and which part of its cycle grew (the
//! calls' statements, the full-text hand-over, the commit and its sync,
//! or waiting for work) says where to look. A call's wait says how much
//! of its round trip the writer is: the rest is the serving threads, the
//! client and the network. The long commits and the hand-overs say how
//! much of that wait is the few commits that do the index's or the WAL's
//! upkeep rather than the calls' own work. These figures once needed a
//! patched build. Timing a group costs a few clock reads, and a call one
//! (when it is queued); a group takes hundreds of microseconds.

use std::time::{Duration, Instant};

/// How often the sums are logged, and reset.
const EVERY: Duration = Duration::from_secs(10);

/// A commit longer than this is counted apart: a sync took well under a
/// millisecond on the hosts measured (bench/RESULTS.md); FTS5's flush and
/// merges after a hand-over, or the WAL's backstop checkpoint, ten times
/// that.
const LONG_COMMIT: Duration = Duration::from_millis(3);

/// A part of the writer's cycle.
#[derive(Clone, Copy, Debug)]
pub(super) enum Phase {
    /// Waiting for a write and for the group's lock, after answering the
    /// last group.
    Waiting,
    /// Running the calls' writes.
    Running,
    /// The full-text hand-over: what a commit runs first, or what the
    /// writer runs alone once idle.
    HandingOver,
    /// `COMMIT`: the WAL's frames, their sync, and a checkpoint when due.
    Committing,
}

/// The sums since the last log, and where the phase under way began.
#[derive(Debug)]
pub(super) struct Phases {
    since: Instant,
    /// Where the last phase counted ended: each phase begins where the
    /// one before it ended.
    last: Instant,
    /// Where the group under way began: the end of the wait before it.
    group_began: Instant,
    groups: u64,
    calls: u64,
    spent: [Duration; 4],
    /// The calls' waits ([`Phases::committed`]).
    waits: Waits,
    /// Hand-overs of the full-text queue ([`Phases::handed_over`]).
    hand_overs: u64,
    /// Commits longer than [`LONG_COMMIT`], and their time.
    long_commits: u64,
    long_commit_time: Duration,
}

/// The calls' side of the sums.
#[derive(Debug, Default, PartialEq)]
struct Waits {
    /// Calls committed.
    calls: u64,
    /// Those already queued when their group began; the rest joined it
    /// while it ran.
    before_group: u64,
    /// From each call's queuing to its group's commit, summed.
    total: Duration,
}

/// What [`Phases::done`] hands over once [`EVERY`] has passed.
#[derive(Debug, PartialEq)]
pub(super) struct Summary {
    pub groups: u64,
    pub calls: u64,
    /// Each phase's share of the time, in percent, in [`Phase`]'s order.
    pub percent: [u64; 4],
    /// Mean microseconds a group spent committing.
    pub commit_us: u64,
    /// Mean microseconds from a call's queuing to its group's commit.
    pub wait_us: u64,
    /// Percent of the calls already queued when their group began.
    pub queued_before_pct: u64,
    /// Hand-overs of the full-text queue.
    pub hand_overs: u64,
    /// Commits longer than [`LONG_COMMIT`], and their milliseconds.
    pub long_commits: u64,
    pub long_commit_ms: u64,
}

impl Phases {
    pub(super) fn new() -> Phases {
        Phases::since(Instant::now())
    }

    fn since(since: Instant) -> Phases {
        let now = Instant::now();
        Phases {
            since,
            last: now,
            group_began: now,
            groups: 0,
            calls: 0,
            spent: [Duration::ZERO; 4],
            waits: Waits::default(),
            hand_overs: 0,
            long_commits: 0,
            long_commit_time: Duration::ZERO,
        }
    }

    /// Counts the time since the last phase ended as `phase`'s.
    pub(super) fn end(&mut self, phase: Phase) {
        self.end_at(phase, Instant::now());
    }

    /// [`Phases::end`] at `now`.
    fn end_at(&mut self, phase: Phase, now: Instant) {
        let spent = now.saturating_duration_since(self.last);
        self.spent[phase as usize] += spent;
        match phase {
            Phase::Waiting => self.group_began = now,
            Phase::Committing if spent > LONG_COMMIT => {
                self.long_commits += 1;
                self.long_commit_time += spent;
            }
            _ => {}
        }
        self.last = now;
    }

    /// The full-text queue was handed over, by a group or by the idle
    /// writer.
    pub(super) fn handed_over(&mut self) {
        self.hand_overs += 1;
    }

    /// The group under way, its commit phase just ended (or failed), had
    /// calls queued at `queued`: each waited from then to that end.
    pub(super) fn committed(&mut self, queued: impl Iterator<Item = Instant>) {
        for at in queued {
            self.waits.calls += 1;
            self.waits.before_group += u64::from(at <= self.group_began);
            self.waits.total += self.last.saturating_duration_since(at);
        }
    }

    /// A group of `calls` committed (or failed); logs and resets the sums
    /// once [`EVERY`] has passed since the last log.
    pub(super) fn done(&mut self, calls: usize) {
        if let Some(s) = self.summary(calls) {
            tracing::debug!(
                groups = s.groups,
                calls = s.calls,
                waiting_pct = s.percent[Phase::Waiting as usize],
                running_pct = s.percent[Phase::Running as usize],
                handing_over_pct = s.percent[Phase::HandingOver as usize],
                committing_pct = s.percent[Phase::Committing as usize],
                commit_us = s.commit_us,
                wait_us = s.wait_us,
                queued_before_pct = s.queued_before_pct,
                hand_overs = s.hand_overs,
                long_commits = s.long_commits,
                long_commit_ms = s.long_commit_ms,
                "the direct writer's last period"
            );
        }
    }

    fn summary(&mut self, calls: usize) -> Option<Summary> {
        self.groups += 1;
        self.calls += calls as u64;
        if self.since.elapsed() < EVERY {
            return None;
        }
        let total: Duration = self.spent.iter().sum();
        let share = |d: &Duration| {
            u64::try_from(d.as_micros() * 100 / total.as_micros().max(1)).unwrap_or(100)
        };
        let commit = self.spent[Phase::Committing as usize].as_micros() / u128::from(self.groups);
        let waited = self.waits.calls.max(1);
        let summary = Summary {
            groups: self.groups,
            calls: self.calls,
            percent: [0, 1, 2, 3].map(|i| share(&self.spent[i])),
            commit_us: u64::try_from(commit).unwrap_or(u64::MAX),
            wait_us: u64::try_from(self.waits.total.as_micros() / u128::from(waited))
                .unwrap_or(u64::MAX),
            queued_before_pct: self.waits.before_group * 100 / waited,
            hand_overs: self.hand_overs,
            long_commits: self.long_commits,
            long_commit_ms: u64::try_from(self.long_commit_time.as_millis()).unwrap_or(u64::MAX),
        };
        let last = self.last;
        *self = Phases::new();
        self.last = last;
        Some(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sums_are_handed_over_once_the_period_has_passed_then_reset() {
        let start = Instant::now();
        let mut phases = Phases::since(start);
        phases.spent = [
            Duration::from_millis(10),
            Duration::from_millis(30),
            Duration::from_millis(10),
            Duration::from_millis(50),
        ];
        assert_eq!(phases.summary(16), None, "not yet");
        phases.since = start.checked_sub(EVERY).expect("a clock past EVERY");
        let summary = phases.summary(14).expect("due");
        assert_eq!(
            summary,
            Summary {
                groups: 2,
                calls: 30,
                percent: [10, 30, 10, 50],
                commit_us: 25_000,
                wait_us: 0,
                queued_before_pct: 0,
                hand_overs: 0,
                long_commits: 0,
                long_commit_ms: 0,
            }
        );
        assert_eq!((phases.groups, phases.calls), (0, 0));
        assert_eq!(phases.spent, [Duration::ZERO; 4]);
    }

    #[test]
    fn a_calls_wait_runs_from_its_queuing_to_its_groups_commit() {
        let now = Instant::now();
        let ago = |ms| {
            now.checked_sub(Duration::from_millis(ms))
                .expect("a clock past 10 ms")
        };
        let mut phases = Phases::since(ago(10));
        // Two calls queued before the group began 6 ms ago, one while it
        // ran; its commit ended now.
        phases.group_began = ago(6);
        phases.last = now;
        phases.committed([ago(9), ago(6), ago(3)].into_iter());
        phases.handed_over();
        assert_eq!(phases.waits.calls, 3);
        assert_eq!(phases.waits.before_group, 2);
        assert!(phases.waits.total >= Duration::from_millis(18));
        phases.since = ago(10).checked_sub(EVERY).expect("a clock past EVERY");
        let summary = phases.summary(3).expect("due");
        assert!(summary.wait_us >= 6_000, "{summary:?}");
        assert_eq!((summary.queued_before_pct, summary.hand_overs), (66, 1));
        assert_eq!(phases.waits, Waits::default(), "reset");
    }

    #[test]
    fn only_a_long_commit_is_counted_apart() {
        let mut phases = Phases::new();
        let t = phases.last;
        phases.end_at(Phase::Committing, t + LONG_COMMIT);
        assert_eq!(phases.long_commits, 0, "a commit no longer than the bound");
        phases.end_at(Phase::Running, t + LONG_COMMIT * 4);
        assert_eq!(phases.long_commits, 0, "a long phase other than the commit");
        phases.end_at(Phase::Committing, t + LONG_COMMIT * 7);
        assert_eq!(phases.long_commits, 1);
        assert_eq!(phases.long_commit_time, LONG_COMMIT * 3);
        assert_eq!(phases.spent[Phase::Committing as usize], LONG_COMMIT * 4);
    }

    #[test]
    fn a_phase_counts_the_time_since_the_last_one_ended() {
        let mut phases = Phases::new();
        let from = Instant::now()
            .checked_sub(Duration::from_millis(5))
            .expect("a clock past 5 ms");
        phases.last = from;
        phases.end(Phase::Committing);
        assert!(phases.last >= from + Duration::from_millis(5));
        assert!(phases.spent[Phase::Committing as usize] >= Duration::from_millis(5));
        assert_eq!(phases.spent[Phase::Running as usize], Duration::ZERO);
    }
}
