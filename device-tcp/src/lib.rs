//! TCP device (to be written).
