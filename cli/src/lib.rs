//! shale-cli
