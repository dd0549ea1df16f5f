//! shale-metadata
