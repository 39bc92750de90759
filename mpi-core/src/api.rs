//! The safe Rust API (to be written).
