//! diff (work in progress)
