//! matcher (work in progress)
