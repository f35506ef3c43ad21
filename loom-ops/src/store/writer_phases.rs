//! Where the direct writer's time goes, summed and logged at debug level
//! once per [`EVERY`] while it writes
//! (`LOOM_LOG=loom_ops::store::writer_phases=debug`).
//!
//! Why: under a write load the writer's thread is what bounds the writes
//! a second (bench/RESULTS.md), and which part of its cycle grew (the
//! calls' statements, the full-text hand-over, the commit and its sync,
//! or waiting for work) says where to look. These figures once needed a
//! patched build. Timing a group costs a few clock reads; a group takes
//! hundreds of microseconds.

use std::time::{Duration, Instant};

/// How often the sums are logged, and reset.
const EVERY: Duration = Duration::from_secs(10);

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
    groups: u64,
    calls: u64,
    spent: [Duration; 4],
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
}

impl Phases {
    pub(super) fn new() -> Phases {
        Phases::since(Instant::now())
    }

    fn since(since: Instant) -> Phases {
        Phases {
            since,
            last: Instant::now(),
            groups: 0,
            calls: 0,
            spent: [Duration::ZERO; 4],
        }
    }

    /// Counts the time since the last phase ended as `phase`'s.
    pub(super) fn end(&mut self, phase: Phase) {
        let now = Instant::now();
        self.spent[phase as usize] += now.saturating_duration_since(self.last);
        self.last = now;
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
        let summary = Summary {
            groups: self.groups,
            calls: self.calls,
            percent: [0, 1, 2, 3].map(|i| share(&self.spent[i])),
            commit_us: u64::try_from(commit).unwrap_or(u64::MAX),
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
            }
        );
        assert_eq!((phases.groups, phases.calls), (0, 0));
        assert_eq!(phases.spent, [Duration::ZERO; 4]);
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
