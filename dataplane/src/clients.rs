//! The mover's two librdkafka clients: made from Python's settings with the settings
//! the mover forces (`make`), and the contexts their callbacks report to (librdkafka's
//! log lines, client errors, delivery reports) through the state they share with the
//! mover (`Shared`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, DeliveryResult, ProducerContext};
use rdkafka::Message;

use crate::error::Error;
use crate::ledger::{Ledger, Sent};
use crate::plan;
use crate::source::Source;

/// librdkafka log lines kept for Python (`Mover.logs`), the newest ones.
const LOG_LINES: usize = 1000;

impl rdkafka::util::IntoOpaque for Sent {
    fn into_ptr(self) -> *mut std::ffi::c_void {
        self.word() as *mut std::ffi::c_void
    }

    unsafe fn from_ptr(ptr: *mut std::ffi::c_void) -> Self {
        Sent::from_word(ptr as usize)
    }
}

/// What the clients' callbacks tell the mover.
#[derive(Default)]
pub struct Shared {
    pub ledgers: Mutex<Vec<Ledger>>,
    /// Deliveries the target refused: (slot, source offset, why).
    pub failures: Mutex<Vec<(usize, i64, Error)>>,
    /// Client-level errors and librdkafka's log lines: (client, level, text).
    pub events: Mutex<Vec<(&'static str, String, String)>>,
    /// A fatal error of either client, raised by the next call.
    pub fatal: Mutex<Option<Error>>,
    /// Delivery reports served so far (`Inner::serve_deliveries` counts on it).
    pub served: AtomicU64,
}

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock was held cannot leave these in a state worth refusing.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn event(&self, client: &'static str, level: &str, text: String) {
        let mut events = lock(&self.events);
        if events.len() >= LOG_LINES {
            events.remove(0);
        }
        events.push((client, level.to_string(), text));
    }

    fn error(&self, client: &'static str, error: KafkaError, reason: &str) {
        let fatal = matches!(error.rdkafka_error_code(), Some(RDKafkaErrorCode::Fatal));
        let text = format!("{error}: {reason}");
        if fatal {
            lock(&self.fatal).get_or_insert_with(|| Error::ClientFailed {
                client,
                error,
                reason: reason.to_string(),
            });
        }
        self.event(client, if fatal { "fatal" } else { "error" }, text);
    }

    fn log(&self, client: &'static str, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            self.event(
                client,
                &format!("{level:?}").to_lowercase(),
                format!("{fac} {message}"),
            );
        }
    }
}

pub struct SourceContext(Arc<Shared>);
pub struct TargetContext(pub Arc<Shared>);

impl ClientContext for SourceContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.0.log("source", level, fac, message);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error("source", error, reason);
    }
}

impl ClientContext for TargetContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.0.log("target", level, fac, message);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error("target", error, reason);
    }
}

impl ProducerContext for TargetContext {
    type DeliveryOpaque = Sent;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Sent) {
        let (slot, offset) = (sent.slot(), sent.offset());
        let outcome = match result {
            Ok(message) => {
                let bytes =
                    message.key().map_or(0, <[u8]>::len) + message.payload().map_or(0, <[u8]>::len);
                let timestamp = message.timestamp().to_millis().unwrap_or(-1);
                lock(&self.0.ledgers)[slot]
                    .delivered(offset, message.offset(), bytes as u64, timestamp)
                    .map_err(Error::from)
            }
            Err((error, _)) => {
                let _ = lock(&self.0.ledgers)[slot].failed(offset);
                Err(Error::Kafka(error.clone()))
            }
        };
        if let Err(problem) = outcome {
            lock(&self.0.failures).push((slot, offset, problem));
        }
        self.0.served.fetch_add(1, Ordering::Relaxed);
    }
}

/// A client's settings: Python's, then those the mover forces (`forced`: key, value,
/// why), refusing one Python gave another value.
fn config(
    side: &'static str,
    settings: &HashMap<String, String>,
    forced: &[(&str, &'static str, &'static str)],
) -> Result<ClientConfig, Error> {
    let mut config = ClientConfig::new();
    for (key, value) in settings {
        if let Some(&(_, wanted, why)) = forced.iter().find(|(k, _, _)| k == key) {
            if value != wanted {
                return Err(Error::ForcedSetting {
                    side,
                    key: key.clone(),
                    value: value.clone(),
                    wanted,
                    why,
                });
            }
        }
        config.set(key, value);
    }
    for (key, value, _) in forced {
        config.set(*key, *value);
    }
    Ok(config)
}

/// `message` with the values of the secret keys of either settings dict replaced
/// (`plan::redact`): only secrets, so a short ordinary value ("error") leaves the
/// message's words alone.
fn redacted(settings: &[&HashMap<String, String>], message: String) -> String {
    let secrets = plan::secret_values(
        settings
            .iter()
            .flat_map(|s| s.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    plan::redact(&message, &secrets)
}

/// The source consumer and the target producer of one flow, from Python's settings
/// (`transactional_id`: the producer's, for a transactional mover). librdkafka's
/// refusal of either is a settings error, secret values replaced.
pub fn make(
    source_config: &HashMap<String, String>,
    target_config: &HashMap<String, String>,
    transactional_id: Option<&str>,
) -> Result<(Source<SourceContext>, BaseProducer<TargetContext>), Error> {
    let mut source_settings = source_config.clone();
    source_settings
        .entry("group.id".into())
        .or_insert_with(|| "replicator-dataplane".into());
    let source = config(
        "source",
        &source_settings,
        &[
            (
                "enable.auto.commit",
                "false",
                "Python commits what was delivered",
            ),
            (
                "enable.auto.offset.store",
                "false",
                "Python commits what was delivered",
            ),
            (
                "isolation.level",
                "read_committed",
                "aborted records are not replicated",
            ),
            (
                "enable.partition.eof",
                "false",
                "the mover does not report ends",
            ),
        ],
    )?;
    let mut target = config(
        "target",
        target_config,
        &[(
            "enable.idempotence",
            "true",
            "no duplicates and no reordering on retries",
        )],
    )?;
    if let Some(id) = transactional_id {
        target.set("transactional.id", id);
    }
    let all = [source_config, target_config];
    let shared = Arc::new(Shared::default());
    let source =
        Source::new(&source, SourceContext(shared.clone())).map_err(|e| Error::Settings {
            side: "source",
            refusal: redacted(&all, e.to_string()),
        })?;
    let producer: BaseProducer<TargetContext> = target
        .create_with_context(TargetContext(shared))
        .map_err(|e: KafkaError| Error::Settings {
        side: "target",
        refusal: redacted(&all, e.to_string()),
    })?;
    Ok((source, producer))
}
