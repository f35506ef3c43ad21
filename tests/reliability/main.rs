//! Reliability (issue 9), the parts fast enough for every `cargo test`:
//! concurrent writers on hot keys, retries with idempotency keys after a
//! timeout the client caused itself, a corpus of hostile requests over a
//! real socket, slow and idle connections, tenant isolation, and property
//! tests over the JSON-RPC framing and the argument checker. Each runs on
//! SQLite and, when `LOOM_TEST_DATABASE_URL` is set, on PostgreSQL.
//!
//! The calls go through [`wire::Wire`]: HTTP with the `Idempotency-Key`
//! header, or MCP `tools/call` with `_idempotency_key`. Rate limits across
//! replicas (shared buckets in PostgreSQL or Redis) are in `shared_limits`,
//! readiness while PostgreSQL is unreachable in `store_outage`, a SQLite
//! file another program locks past a call's budget in `locked_store`,
//! live fuzzing of `/mcp` in `batch_fuzz`, the sweep of rows past their
//! retention in `retention`.

mod batch_fuzz;
mod fuzz;
mod hostile;
mod isolation;
mod locked_store;
mod replicas;
mod retention;
mod shared_limits;
mod store_outage;
mod wire;
mod writers;
