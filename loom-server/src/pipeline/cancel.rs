//! A call's cancellation: set once by whoever withdraws the call (MCP's
//! `notifications/cancelled`), watched by the call ([`super::call`]).
//!
//! Every MCP request gets one, so it is kept to a flag and one waker slot:
//! tokio-util's `CancellationToken` (a tree of nodes behind a mutex, made
//! for many watchers) cost an MCP get ~3% more instructions.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;

/// Set once; one task at a time waits for it ([`Cancel::cancelled`]).
#[derive(Debug, Default)]
pub struct Cancel {
    done: AtomicBool,
    waker: AtomicWaker,
}

impl Cancel {
    /// Cancels, and wakes the task waiting.
    pub fn cancel(&self) {
        self.done.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Ready once cancelled. The slot holds one waker: one task waits at a
    /// time, as one call does.
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled(self)
    }
}

/// [`Cancel::cancelled`]'s future.
#[derive(Debug)]
pub struct Cancelled<'a>(&'a Cancel);

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.is_cancelled() {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        // Cancelled between the check and the registration: its wake found
        // no waker, so look again.
        if self.0.is_cancelled() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_waiting_task_wakes_when_cancelled() {
        let cancel = Arc::new(Cancel::default());
        assert!(!cancel.is_cancelled());
        let waiting = tokio::spawn({
            let cancel = cancel.clone();
            async move { cancel.cancelled().await }
        });
        // The waiter is parked (or not yet polled): either way it ends.
        tokio::task::yield_now().await;
        cancel.cancel();
        waiting.await.unwrap();
        assert!(cancel.is_cancelled());
        // Cancelled already: ready at once.
        cancel.cancelled().await;
    }
}
