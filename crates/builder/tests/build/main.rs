//! The builder library through its public API, one module per area.

mod dir;
mod symlink_walk;
