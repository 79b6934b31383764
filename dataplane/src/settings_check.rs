//! Client settings checked by this module's own librdkafka (`check_client`): the loader
//! builds each client of a flow once at load time (`replicator/config/client_check.py`)
//! with confluent-kafka's librdkafka; a flow whose records move through the compiled
//! data plane is checked by the librdkafka linked here too, so a setting or SASL
//! mechanism only one of the two accepts fails the load instead of every worker.

use std::collections::HashMap;

use pyo3::prelude::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::BaseProducer;

use crate::error::Error;
use crate::plan;

/// Build a `kind` client ("consumer" or "producer") of `settings` with this module's
/// librdkafka and drop it at once (no broker is contacted: leave `bootstrap.servers`
/// out). ValueError with librdkafka's refusal, secret values replaced.
#[pyfunction]
pub fn check_client(kind: &str, settings: HashMap<String, String>) -> PyResult<()> {
    let mut config = ClientConfig::new();
    for (key, value) in &settings {
        config.set(key, value);
    }
    let made: Result<(), KafkaError> = match kind {
        "consumer" => config.create::<BaseConsumer>().map(drop),
        "producer" => config.create::<BaseProducer>().map(drop),
        other => return Err(Error::ClientKind(other.to_string()).into()),
    };
    made.map_err(|error| {
        let secrets = plan::secret_values(settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Error::ClientRefused(plan::redact(&refusal(error), &secrets)).into()
    })
}

/// librdkafka's own words for a refused client.
fn refusal(error: KafkaError) -> String {
    match error {
        KafkaError::ClientCreation(text) => text,
        KafkaError::ClientConfig(_, text, key, _) => format!("{text} (`{key}`)"),
        other => other.to_string(),
    }
}
