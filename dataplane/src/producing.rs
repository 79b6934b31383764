//! One record to the target (`Inner::produce`): its headers (the record's own, our
//! provenance, a verdict's), the producer's refusals (`Refused`), the target's
//! partitions learnt on demand (`know`), and the delivery failures and fatal client
//! errors the next call raises (`failures`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer, PurgeConfig};

use crate::clients::lock;
use crate::error::Error;
use crate::ledger::Sent;
use crate::state::Inner;
use crate::target::Headers;

/// How long the producer may take to learn a target topic's partitions when a record
/// is refused for a partition it does not know (`Inner::produce`).
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the producer did not take a record (`Inner::produce`).
pub enum Refused {
    /// With the record's headers, given back.
    TooLarge(Headers),
    QueueFull,
    Other(Error),
}

impl Inner {
    /// A record's headers: its own as they came (`own`, taken from the record), then
    /// our provenance.
    pub fn headers(
        &self,
        own: Option<Headers>,
        topic: &str,
        offset: i64,
    ) -> Result<Headers, Error> {
        let mut headers = own.unwrap_or_else(|| Headers::with_capacity(self.provenance.len() + 2));
        for (key, value) in &self.provenance {
            headers.add(key.as_bytes(), value.as_deref())?;
        }
        if let Some(key) = &self.offset_header {
            headers.add(key.as_bytes(), Some(&offset.to_be_bytes()))?;
        }
        if let Some(key) = &self.topic_header {
            headers.add(key.as_bytes(), Some(topic.as_bytes()))?;
        }
        Ok(headers)
    }

    /// The headers of a record that carries reserved names, copied on Python's
    /// verdict: its own (`own`, taken from it) less the reserved ones (Python's
    /// rewrite drops them too), ours, then the verdict's (`extra`).
    pub fn rewritten(
        &self,
        mut own: Headers,
        extra: &[(Vec<u8>, Option<Vec<u8>>)],
        topic: &str,
        offset: i64,
    ) -> Result<Headers, Error> {
        for name in &self.reserved_names {
            own.remove(name)?;
        }
        let mut headers = self.headers(Some(own), topic, offset)?;
        for (name, value) in extra {
            headers.add(name, value.as_deref())?;
        }
        Ok(headers)
    }

    /// Produce one record to `slot`'s target partition. While the producer's queue
    /// is full it serves delivery reports, until `room_until` (then `Refused::QueueFull`)
    /// or, without one, until it takes the record.
    #[allow(clippy::too_many_arguments)] // the record's parts, as the producer takes them
    pub fn produce(
        &self,
        slot: usize,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: (i32, i64),
        mut headers: Headers,
        room_until: Option<Instant>,
    ) -> Result<(), Refused> {
        let part = &self.parts[slot];
        let Some(mut sent) = Sent::new(slot, offset) else {
            return Err(Refused::Other(Error::BeyondDeliveryReport { slot, offset }));
        };
        // The record's own timestamp; 0 (none: the producer's clock) when it has none.
        let timestamp_ms = if timestamp.0 != 0 && timestamp.1 >= 0 {
            timestamp.1
        } else {
            0
        };
        let mut refreshed = false;
        loop {
            let refused = match part.handle.produce(
                &self.producer,
                part.partition,
                key,
                value,
                timestamp_ms,
                headers,
                sent,
            ) {
                Ok(()) => break,
                Err((code, back, opaque)) => {
                    (headers, sent) = (back, opaque);
                    code
                }
            };
            match refused {
                RDKafkaErrorCode::QueueFull => {
                    if room_until.is_some_and(|until| Instant::now() >= until) {
                        return Err(Refused::QueueFull);
                    }
                    self.producer.poll(Duration::from_millis(100));
                }
                RDKafkaErrorCode::MessageSizeTooLarge => return Err(Refused::TooLarge(headers)),
                RDKafkaErrorCode::UnknownPartition if !refreshed => {
                    // The producer's metadata may predate partitions added to the
                    // target topic (librdkafka refreshes it only every
                    // topic.metadata.refresh.interval.ms): ask the target once.
                    refreshed = true;
                    let target = std::slice::from_ref(&part.target);
                    let count = self
                        .know(target, METADATA_TIMEOUT)
                        .map_err(Refused::Other)?[&part.target];
                    if count <= part.partition as usize {
                        return Err(Refused::Other(Error::NoSuchTargetPartition {
                            target: part.target.clone(),
                            count,
                            partition: part.partition,
                        }));
                    }
                }
                RDKafkaErrorCode::Fatal => {
                    let fatal = self.producer_fatal();
                    return Err(Refused::Other(fatal.unwrap_or(Error::FatalWithoutCause)));
                }
                code => {
                    return Err(Refused::Other(Error::Kafka(KafkaError::MessageProduction(
                        code,
                    ))))
                }
            }
        }
        lock(&self.shared().ledgers)[slot]
            .sent(offset)
            .map_err(|e| Refused::Other(e.into()))
    }

    /// Ask the target for the `targets` topics' metadata through the producer's own
    /// handle (`rd_kafka_metadata`: librdkafka updates the partitions the producer
    /// knows from the answer) and return their partition counts. One topic is asked
    /// alone; several in one request for every topic of the cluster: a worker given
    /// thousands of partitions asks once, not once per topic.
    pub fn know(
        &self,
        targets: &[String],
        timeout: Duration,
    ) -> Result<HashMap<String, usize>, Error> {
        let asking = |topics: String, cause: Error| Error::LearningPartitions {
            topics,
            cause: Box::new(cause),
        };
        let single = match targets {
            [one] => Some(one.as_str()),
            _ => None,
        };
        let metadata = self
            .producer
            .client()
            .fetch_metadata(single, timeout)
            .map_err(|e| asking(targets.join(", "), e.into()))?;
        let answered: HashMap<&str, _> = metadata.topics().iter().map(|t| (t.name(), t)).collect();
        let mut counts = HashMap::with_capacity(targets.len());
        for target in targets {
            let topic = answered
                .get(target.as_str())
                .ok_or_else(|| asking(target.clone(), Error::NotInAnswer))?;
            if let Some(code) = topic.error() {
                return Err(asking(target.clone(), Error::Code(code)));
            }
            counts.insert(target.clone(), topic.partitions().len());
        }
        Ok(counts)
    }

    /// The producer's fatal error with its cause (librdkafka's `rd_kafka_fatal_error`:
    /// the error callback reports the cause's code, e.g. a batch the target refused
    /// tripping the gapless guarantee, and later calls only say "Fatal").
    pub fn producer_fatal(&self) -> Option<Error> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(Error::TargetFatal { code, reason })
    }

    /// Raise the first delivery failure or fatal client error.
    pub fn failures(&self) -> Result<(), Error> {
        let shared = self.shared();
        if let Some(fatal) = lock(&shared.fatal).clone() {
            return Err(fatal);
        }
        if let Some(fatal) = self.producer_fatal() {
            return Err(fatal);
        }
        let failures = lock(&shared.failures);
        if let Some((slot, offset, problem)) = failures.first() {
            return Err(Error::Delivering {
                record: self.record_at(*slot, *offset),
                cause: Box::new(problem.clone()),
            });
        }
        Ok(())
    }

    /// Drop what the producer has not sent yet, keeping what is in flight; how many
    /// records are in flight (`Mover.purge_queue`).
    pub fn purge_queue(&self) -> i32 {
        self.producer.purge(PurgeConfig::default().queue());
        self.serve_deliveries();
        self.producer.in_flight_count()
    }

    /// Records in flight, delivery reports served first (`Mover.outstanding`).
    pub fn outstanding(&self) -> i32 {
        self.serve_deliveries();
        self.producer.in_flight_count()
    }

    /// Wait up to `timeout` seconds for the records in flight; how many still are,
    /// or the first delivery failure (`Mover.flush`).
    pub fn flush(&self, timeout: f64) -> Result<i32, Error> {
        let _ = self
            .producer
            .flush(Duration::from_secs_f64(timeout.max(0.0)));
        self.serve_deliveries();
        self.failures()?;
        Ok(self.producer.in_flight_count())
    }
}
