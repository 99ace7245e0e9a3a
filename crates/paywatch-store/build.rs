//! Rebuilds the store when a migration is added: `sqlx::migrate!` embeds the files of
//! `migrations/` at compile time, and cargo does not watch that directory by itself.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
