//! report (work in progress)
