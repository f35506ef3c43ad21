//! `sqlx::migrate!` embeds the migrations when this crate is compiled, and
//! nothing else tells Cargo to compile it again when one is added or
//! changed: without this, a new migration file was left out of builds
//! until some Rust source of the crate changed too.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
