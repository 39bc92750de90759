//! C ABI (to be written).
