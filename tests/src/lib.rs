//! shale-tests
