//! What the mover does with one record, decided from its own headers alone (pure,
//! tested without Kafka): copy it with the provenance added, or hand it back to
//! Python. A record carrying a reserved header name (the replicator's own `__dr_*`:
//! provenance from an earlier hop, which the loop checks judge) goes back, and so
//! does one whose header name is not UTF-8 (Kafka's header keys are strings).

/// Why a record is handed back to Python instead of moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Irregular {
    /// It carries a header whose name is reserved (the caller's list).
    ReservedHeader,
    /// One of its header names is not UTF-8.
    HeaderName,
    /// The producer refused it as too large (message.max.bytes).
    TooLarge,
}

impl Irregular {
    pub fn as_str(self) -> &'static str {
        match self {
            Irregular::ReservedHeader => "reserved_header",
            Irregular::HeaderName => "header_name",
            Irregular::TooLarge => "too_large",
        }
    }
}

/// Whether a record whose own header names are `names` is moved as it is (None)
/// or handed back (why).
pub fn check<'a, I>(names: I, reserved: &[Vec<u8>]) -> Option<Irregular>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    for name in names {
        if reserved.iter().any(|r| r.as_slice() == name) {
            return Some(Irregular::ReservedHeader);
        }
        if std::str::from_utf8(name).is_err() {
            return Some(Irregular::HeaderName);
        }
    }
    None
}

/// `message` with every non-empty value of `secrets` replaced by `***`: librdkafka's
/// configuration errors may quote the value they refused, and a value may be a
/// password.
pub fn redact(message: &str, secrets: &[&str]) -> String {
    let mut out = message.to_string();
    for secret in secrets {
        if !secret.is_empty() {
            out = out.replace(secret, "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved() -> Vec<Vec<u8>> {
        vec![b"__dr_src".to_vec(), b"__dr_off".to_vec()]
    }

    #[test]
    fn plain_and_own_headers_are_moved() {
        assert_eq!(check(Vec::<&[u8]>::new(), &reserved()), None);
        let names: Vec<&[u8]> = vec![b"trace", b"trace", b"__dr"];
        assert_eq!(check(names, &reserved()), None);
    }

    #[test]
    fn a_reserved_name_is_handed_back() {
        let names: Vec<&[u8]> = vec![b"app", b"__dr_off"];
        assert_eq!(check(names, &reserved()), Some(Irregular::ReservedHeader));
    }

    #[test]
    fn a_name_that_is_not_utf8_is_handed_back() {
        let names: Vec<&[u8]> = vec![b"\xff\xfe"];
        assert_eq!(check(names, &reserved()), Some(Irregular::HeaderName));
    }

    #[test]
    fn secrets_are_redacted() {
        let message = r#"Invalid value "hunter2" for configuration property "sasl.password""#;
        let out = redact(message, &["hunter2", ""]);
        assert!(!out.contains("hunter2"));
        assert!(out.contains("sasl.password"));
    }
}
