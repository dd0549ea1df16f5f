//! shale-storage
