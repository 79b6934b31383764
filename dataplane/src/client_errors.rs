//! Client-level error codes as librdkafka passes them to `error_cb`: a C int, which
//! may be a code this build's enum lacks (a newer librdkafka adds codes). Reading
//! such an int as the enum would be undefined behaviour, so each is checked first.

/// The code `err` as `known` reads it (None: not a code this build knows), else
/// `unknown`, with the number kept in the reason.
pub fn checked_code<T>(
    err: i32,
    reason: &str,
    known: impl FnOnce(i32) -> Option<T>,
    unknown: T,
) -> (T, String) {
    match known(err) {
        Some(code) => (code, reason.to_string()),
        None => (
            unknown,
            format!("{reason} (librdkafka error code {err}, unknown to this build)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(err: i32) -> Option<&'static str> {
        (err == -195).then_some("BrokerTransportFailure")
    }

    #[test]
    fn a_known_code_is_its_own_code() {
        let (code, reason) = checked_code(-195, "broker down", known, "Unknown");
        assert_eq!(code, "BrokerTransportFailure");
        assert_eq!(reason, "broker down");
    }

    #[test]
    fn an_unknown_code_is_unknown_and_said() {
        let (code, reason) = checked_code(4242, "something new", known, "Unknown");
        assert_eq!(code, "Unknown");
        assert_eq!(
            reason,
            "something new (librdkafka error code 4242, unknown to this build)"
        );
    }
}
