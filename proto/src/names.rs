//! Basin and stream name rules (S2's).

/// A basin name: 8 to 48 bytes of lowercase letters, digits and hyphens, not starting
/// or ending with a hyphen.
pub fn validate_basin(name: &str) -> Result<(), String> {
    if !(8..=48).contains(&name.len()) {
        return Err(format!("basin name must be 8 to 48 bytes long, got {}", name.len()));
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Err(format!("basin name `{name}` may contain only lowercase letters, digits and hyphens"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(format!("basin name `{name}` must not start or end with a hyphen"));
    }
    Ok(())
}

/// A stream name: 1 to 512 bytes of UTF-8.
pub fn validate_stream(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 512 {
        return Err(format!("stream name must be 1 to 512 bytes long, got {}", name.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basin_rules() {
        assert!(validate_basin("my-basin-1").is_ok());
        assert!(validate_basin("short").is_err());
        assert!(validate_basin("Upper-case").is_err());
        assert!(validate_basin("-leading-hyphen").is_err());
        assert!(validate_basin("trailing-hyphen-").is_err());
        assert!(validate_basin(&"a".repeat(49)).is_err());
    }

    #[test]
    fn stream_rules() {
        assert!(validate_stream("a/b c").is_ok());
        assert!(validate_stream("").is_err());
        assert!(validate_stream(&"x".repeat(513)).is_err());
    }
}
