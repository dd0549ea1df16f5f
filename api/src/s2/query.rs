//! Strict query parsing: unknown parameters and unparsable values are errors. S2 ignores
//! a parameter it does not know; Shale refuses it, so that a read option it does not
//! serve is never answered as if it had been applied (docs/s2-compatibility.md).

use std::collections::HashMap;
use std::str::FromStr;

use crate::ApiError;
use shale_service::ListQuery;

pub struct Query {
    params: HashMap<String, String>,
}

impl Query {
    /// Parses `raw` and rejects parameters outside `allowed`.
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut params = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode(key, true)?;
            if !allowed.contains(&key.as_str()) {
                return Err(ApiError::bad_query(format!("unknown query parameter `{key}`")));
            }
            if params.insert(key.clone(), percent_decode(value, true)?).is_some() {
                return Err(ApiError::bad_query(format!("query parameter `{key}` given twice")));
            }
        }
        Ok(Self { params })
    }

    pub fn string(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    pub fn number<T: FromStr>(&self, key: &str) -> Result<Option<T>, ApiError> {
        self.params
            .get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| ApiError::bad_query(format!("query parameter `{key}`: `{v}` is not a valid number")))
            })
            .transpose()
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.params
            .get(key)
            .map(|v| match v.as_str() {
                "true" | "" => Ok(true),
                "false" => Ok(false),
                other => Err(ApiError::bad_query(format!("query parameter `{key}`: `{other}` is not true or false"))),
            })
            .transpose()
    }

    /// A listing's `prefix`, `start_after` and `limit` (S2's rules on them are the
    /// service's).
    pub fn list_query(&self) -> Result<ListQuery, ApiError> {
        Ok(ListQuery {
            prefix: self.string("prefix").unwrap_or_default().to_string(),
            start_after: self.string("start_after").unwrap_or_default().to_string(),
            limit: self.number("limit")?,
        })
    }
}

/// Percent-decodes a URI component; in query strings `+` also means a space.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, ApiError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(byte.ok_or_else(|| ApiError::bad(format!("malformed percent-encoding in `{s}`")))?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| ApiError::bad(format!("`{s}` does not decode to UTF-8")))
}
