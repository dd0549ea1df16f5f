//! Regular expressions as Kafka matches names with them (a consumer's topic subscription,
//! ListTransactions' id filter): against the whole name, in RE2's syntax (Rust's `regex`,
//! linear in the name's length), compiled within a size bound so a request cannot make
//! the broker build an unbounded automaton.

/// The largest compiled expression accepted.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// `source` compiled to match whole names only, or why it cannot be.
pub fn whole_name(source: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{source})$")).size_limit(MAX_COMPILED_BYTES).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_and_a_broken_one_is_refused() {
        let pattern = whole_name("orders-.*|audit").unwrap();
        assert!(pattern.is_match("orders-1") && pattern.is_match("audit"));
        assert!(!pattern.is_match("old-orders-1") && !pattern.is_match("audit-log"), "a part of a name is not a match");
        assert!(whole_name("tx-[").is_err());
        assert!(whole_name(&"a{1000}".repeat(100)).is_err(), "over the size bound");
    }
}
