//! shale-gateway
