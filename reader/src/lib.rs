//! shale-reader
