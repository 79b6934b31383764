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
/// or handed back (why: the first irregular name's), and whether every name is
/// UTF-8 (a record carrying reserved names may then be settled on a verdict learnt
/// for its provenance), in one pass.
pub fn survey<'a, I>(names: I, reserved: &[Vec<u8>]) -> (Option<Irregular>, bool)
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut first = None;
    let mut utf8 = true;
    for name in names {
        // Header names are nearly always ASCII: the full check only for the others.
        let is_utf8 = name.is_ascii() || std::str::from_utf8(name).is_ok();
        if !is_utf8 {
            utf8 = false;
            first.get_or_insert(Irregular::HeaderName);
        } else if first.is_none() && reserved.iter().any(|r| r.as_slice() == name) {
            first = Some(Irregular::ReservedHeader);
        }
    }
    (first, utf8)
}

/// The settings whose values are secrets: every key librdkafka itself flags
/// `_RK_SENSITIVE` (rdkafka_conf.c of 2.12.1, the version the crate vendors; checked
/// against CONFIGURATION.md), whose values its own redacted dumps hide.
pub const SECRET_KEYS: &[&str] = &[
    "sasl.password",
    "sasl.username",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl_key",
    "ssl.keystore.password",
    "ssl.ca.pem",
];

/// Whether `key`'s value is a secret: one of `SECRET_KEYS`, or a key of a newer
/// librdkafka whose name says so (`...password`, `...secret`, `...passphrase`).
pub fn is_secret(key: &str) -> bool {
    SECRET_KEYS.contains(&key)
        || ["password", "secret", "passphrase"]
            .iter()
            .any(|word| key.ends_with(word))
}

/// The non-empty values of the secret keys of `settings`.
pub fn secret_values<'a, I>(settings: I) -> Vec<&'a str>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    settings
        .into_iter()
        .filter(|(key, value)| is_secret(key) && !value.is_empty())
        .map(|(_, value)| value)
        .collect()
}

/// A secret this long is replaced wherever it occurs; a shorter one only where it
/// stands as a whole token, so that a short value ("err") does not mangle the words
/// of a message ("Client creation error").
pub const SUBSTRING_MIN_LEN: usize = 8;

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `message` with each of `secrets` replaced by `***` (see `SUBSTRING_MIN_LEN`):
/// librdkafka's configuration errors may quote the value they refused.
pub fn redact(message: &str, secrets: &[&str]) -> String {
    let mut secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    // Longest first: a secret that contains another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = message.to_string();
    for secret in secrets {
        if secret.chars().count() >= SUBSTRING_MIN_LEN {
            out = out.replace(secret, "***");
            continue;
        }
        let mut kept = String::with_capacity(out.len());
        let mut rest = out.as_str();
        let mut before: Option<char> = None;
        while let Some(at) = rest.find(secret) {
            let left = rest[..at].chars().next_back().or(before);
            let right = rest[at + secret.len()..].chars().next();
            let first = secret.chars().next().unwrap_or(' ');
            let last = secret.chars().next_back().unwrap_or(' ');
            // Whole: joined to no word character on either side.
            let joined_left = is_word(first) && left.is_some_and(is_word);
            let joined_right = is_word(last) && right.is_some_and(is_word);
            let whole = !(joined_left || joined_right);
            let (head, _) = rest.split_at(at);
            kept.push_str(head);
            if whole {
                kept.push_str("***");
                before = Some('*');
            } else {
                kept.push_str(secret);
                before = secret.chars().next_back();
            }
            rest = &rest[at + secret.len()..];
        }
        kept.push_str(rest);
        out = kept;
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
        assert_eq!(survey(Vec::<&[u8]>::new(), &reserved()), (None, true));
        let names: Vec<&[u8]> = vec![b"trace", b"trace", b"__dr"];
        assert_eq!(survey(names, &reserved()), (None, true));
    }

    #[test]
    fn a_reserved_name_is_handed_back() {
        let names: Vec<&[u8]> = vec![b"app", b"__dr_off"];
        assert_eq!(
            survey(names, &reserved()),
            (Some(Irregular::ReservedHeader), true)
        );
        // The first irregular name says why; any name not UTF-8 is told.
        let names: Vec<&[u8]> = vec![b"__dr_off", b"\xff", b"t\xc3\xa9"];
        assert_eq!(
            survey(names, &reserved()),
            (Some(Irregular::ReservedHeader), false)
        );
    }

    #[test]
    fn a_name_that_is_not_utf8_is_handed_back() {
        let names: Vec<&[u8]> = vec![b"t\xc3\xa9", b"\xff\xfe", b"__dr_off"];
        assert_eq!(
            survey(names, &reserved()),
            (Some(Irregular::HeaderName), false)
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let message = r#"Invalid value "hunter2" for configuration property "sasl.password""#;
        let out = redact(message, &["hunter2", ""]);
        assert_eq!(
            out,
            r#"Invalid value "***" for configuration property "sasl.password""#
        );
    }

    #[test]
    fn only_the_values_of_secret_keys_are_secrets() {
        let settings = [
            ("auto.offset.reset", "error"),
            ("bootstrap.servers", "localhost:9092"),
            ("sasl.password", "hunter2"),
            ("ssl.key.pem", "-----BEGIN PRIVATE KEY-----"),
            ("sasl.oauthbearer.client.secret", "s3"),
            ("some.future.token.secret", "t0"),
            ("ssl.key.password", ""),
        ];
        assert_eq!(
            secret_values(settings.iter().copied()),
            vec!["hunter2", "-----BEGIN PRIVATE KEY-----", "s3", "t0"]
        );
        assert!(is_secret("ssl.keystore.password") && is_secret("sasl.username"));
        assert!(!is_secret("auto.offset.reset") && !is_secret("ssl.certificate.location"));
    }

    #[test]
    fn a_short_value_is_replaced_only_as_a_whole_token() {
        // The message the engine once got as "Client creation ***".
        let message =
            "Client creation error: `max.poll.interval.ms`must be >= `session.timeout.ms`";
        assert_eq!(redact(message, &["err", "error_x", "s"]), message);
        assert_eq!(
            redact("password err (err) err:err errors", &["err"]),
            "password *** (***) ***:*** errors"
        );
        // Edges that are not word characters need no boundary.
        assert_eq!(redact("a=!p! b", &["!p!"]), "a=*** b");
    }

    #[test]
    fn a_long_secret_is_replaced_even_inside_a_word() {
        assert_eq!(
            redact("token=xhunter2-secretx end", &["hunter2-secret"]),
            "token=x***x end"
        );
        // The longer of two overlapping secrets is replaced whole.
        assert_eq!(redact("p=abcdefghij", &["abcdefgh", "abcdefghij"]), "p=***");
    }
}
