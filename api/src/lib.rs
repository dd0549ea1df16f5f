//! shale-api
