//! PMI-1 (to be written).
