//! shale-bench
