//! Test helpers (to be written).
