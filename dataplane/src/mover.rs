//! `Mover`, the Python class: one flow's source consumer and target producer, moving
//! records from source topic T partition p to target topic rename(T) partition p with
//! key, value, timestamp and the record's own headers, plus the caller's provenance
//! headers. This module is its PyO3 surface: each method a thin call into `Inner`
//! (`state`) with the GIL released, its answer turned into Python values.
//!
//! Python keeps the decisions: it assigns partitions (with their target topic and
//! start offset), releases or skips the records handed back, reads `progress` for
//! offset syncs and checkpoints.
//!
//! Transactional (given a `transactional_id`): every record moves inside a
//! transaction Python opens and commits, with the source offsets of what it moved
//! committed in the same transaction (to `offsets_group` on the target); an abort
//! makes the mover read again what the transaction had taken (`transactions`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::clients::lock;
use crate::error::Error;
use crate::progress::Skipped;
use crate::state::{Arguments, Inner, OwnedHeader};

/// What a caught panic said, for `Error::Panicked`: Python's `except Exception` does
/// not catch pyo3's PanicException, so a panic must never reach it as one.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// A timeout in seconds, as Python gives it.
fn seconds(timeout: f64) -> Result<Duration, Error> {
    if timeout.is_finite() && timeout >= 0.0 {
        Ok(Duration::from_secs_f64(timeout))
    } else {
        Err(Error::Timeout(timeout))
    }
}

/// {(source topic, partition): value} of a per-slot answer.
fn by_partition<'py, T: IntoPyObject<'py> + Copy>(
    py: Python<'py>,
    mover: &Mover,
    slots: Vec<(usize, T)>,
) -> PyResult<Bound<'py, PyDict>> {
    let guard = lock(&mover.inner);
    let out = PyDict::new(py);
    if let Some(inner) = guard.as_ref() {
        for (slot, value) in slots {
            let part = &inner.parts[slot];
            out.set_item((part.topic.clone(), part.partition), value)?;
        }
    }
    Ok(out)
}

/// {key: value} of a list of pairs.
fn dict<'py, K: IntoPyObject<'py>, V: IntoPyObject<'py>>(
    py: Python<'py>,
    pairs: Vec<(K, V)>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (key, value) in pairs {
        out.set_item(key, value)?;
    }
    Ok(out)
}

/// Moves records of one flow from the source cluster to the target cluster.
///
/// Mover(source_config, target_config, provenance, offset_header=None,
///       topic_header=None, reserved_headers=(), transactional_id=None,
///       offsets_group=None)
#[pyclass(module = "replicator._dataplane")]
pub struct Mover {
    inner: Mutex<Option<Inner>>,
}

impl Mover {
    /// Run `f` on the open mover with the GIL released. A closed mover fails the
    /// call; a panic closes the mover and fails the call.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, Error> + Send,
    ) -> Result<T, Error> {
        py.allow_threads(|| {
            let mut guard = lock(&self.inner);
            let Some(inner) = guard.as_mut() else {
                return Err(Error::Closed);
            };
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(inner))) {
                Ok(out) => out,
                Err(panic) => {
                    // A bug: the mover's state is not to be trusted. It is closed (its
                    // queue dropped, nothing acknowledged counted), so the caller makes
                    // a new one that resumes from the target, as after any MoverError.
                    *guard = None;
                    Err(Error::Panicked(panic_text(&*panic)))
                }
            }
        })
    }

    /// `run`, its failure raised as MoverError.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        Ok(self.run(py, f)?)
    }

    /// `run`, for the transactional calls: a failure raises TransactionError with
    /// librdkafka's verdict on it as attributes.
    fn with_txn<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        self.run(py, f)
            .map_err(|e| e.in_transactional_call().into())
    }
}

#[pymethods]
impl Mover {
    #[new]
    #[pyo3(signature = (source_config, target_config, provenance, offset_header=None, topic_header=None, reserved_headers=Vec::new(), transactional_id=None, offsets_group=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn new(
        source_config: HashMap<String, String>,
        target_config: HashMap<String, String>,
        provenance: Vec<OwnedHeader>,
        offset_header: Option<String>,
        topic_header: Option<String>,
        reserved_headers: Vec<String>,
        transactional_id: Option<String>,
        offsets_group: Option<String>,
    ) -> PyResult<Self> {
        let inner = Inner::new(Arguments {
            source_config,
            target_config,
            provenance,
            offset_header,
            topic_header,
            reserved_headers,
            transactional_id,
            offsets_group,
        })?;
        Ok(Mover {
            inner: Mutex::new(Some(inner)),
        })
    }

    /// Read these partitions: [(source topic, partition, start offset, target topic)].
    /// The start offset may be logical (-2 beginning, -1 end).
    fn assign(&self, py: Python<'_>, partitions: Vec<(String, i32, i64, String)>) -> PyResult<()> {
        self.with(py, move |inner| inner.assign(partitions))
    }

    /// Stop reading these partitions: [(source topic, partition)]. Records in flight
    /// are still delivered; `progress` reports them.
    fn unassign(&self, py: Python<'_>, partitions: Vec<(String, i32)>) -> PyResult<()> {
        self.with(py, move |inner| inner.unassign(partitions))
    }

    /// Move records for up to `timeout` seconds (returning early once records stop
    /// arriving) or `max_records`. Returns (records moved, records handed back); each
    /// handed-back record is (topic, partition, offset, key, value, timestamp_type,
    /// timestamp, headers, reason) and its partition waits for `release`. Raises
    /// MoverError for a refused or failed record, naming topic, partition and offset;
    /// when records were handed back earlier in the call, they are returned and the
    /// next call raises.
    #[pyo3(signature = (max_records=10_000, timeout=0.1))]
    fn move_records<'py>(
        &self,
        py: Python<'py>,
        max_records: usize,
        timeout: f64,
    ) -> PyResult<(usize, Bound<'py, PyList>)> {
        let timeout = seconds(timeout)?;
        let (moved, handed) = self.with(py, move |inner| inner.run(max_records, timeout))?;
        let guard = lock(&self.inner);
        let inner = guard.as_ref().expect("open: run succeeded");
        let out = PyList::empty(py);
        for slot in handed {
            let part = &inner.parts[slot];
            let held = part.held.as_ref().expect("held: run handed it back");
            let bytes = |b: &Option<Vec<u8>>| b.as_ref().map(|b| PyBytes::new(py, b).into_any());
            let headers = PyList::empty(py);
            for (name, value) in &held.headers {
                let name = String::from_utf8_lossy(name).into_owned();
                headers.append((name, bytes(value)))?;
            }
            let item = PyTuple::new(
                py,
                [
                    part.topic.clone().into_pyobject(py)?.into_any(),
                    part.partition.into_pyobject(py)?.into_any(),
                    held.offset.into_pyobject(py)?.into_any(),
                    bytes(&held.key).into_pyobject(py)?.into_any(),
                    bytes(&held.value).into_pyobject(py)?.into_any(),
                    held.timestamp.0.into_pyobject(py)?.into_any(),
                    held.timestamp.1.into_pyobject(py)?.into_any(),
                    headers.into_any(),
                    held.reason.as_str().into_pyobject(py)?.into_any(),
                ],
            )?;
            out.append(item)?;
        }
        Ok((moved, out))
    }

    /// Python's verdict on records of `topic` that carry reserved headers with the
    /// provenance `headers` carry (the offset header's value aside): skip them for
    /// `skip` (a loop; with `in_order`, only while they stand in the order of our
    /// copies, `order`: one out of order is an application's re-drive, copied as its
    /// own), or, with None, copy them with their own headers less the reserved ones,
    /// ours, then `extra`. The next such records are settled without being handed
    /// back (`verdicts`).
    #[pyo3(signature = (topic, headers, skip, extra, in_order=false))]
    fn learn(
        &self,
        py: Python<'_>,
        topic: String,
        headers: Vec<OwnedHeader>,
        skip: Option<String>,
        extra: Vec<OwnedHeader>,
        in_order: bool,
    ) -> PyResult<()> {
        self.with(py, move |inner| {
            inner.learn(&topic, headers, skip, extra, in_order);
            Ok(())
        })
    }

    /// Take on what `old` (the Mover this one replaces) learnt of records carrying
    /// reserved headers: Python's verdicts and the order of our copies per partition.
    /// Without them, a Mover made anew (new size limits, a rewind) would hand back
    /// the first record of every provenance again, and Python, which did not see the
    /// copies the old Mover skipped, would order it by older ones.
    fn adopt(&self, py: Python<'_>, old: PyRef<'_, Mover>) -> PyResult<()> {
        let cell = &old.inner;
        let learnt = py.allow_threads(move || {
            lock(cell)
                .as_ref()
                .map(|inner| (inner.verdicts.clone(), inner.orders.clone()))
        });
        let Some((verdicts, orders)) = learnt else {
            return Ok(()); // closed: nothing to take on
        };
        self.with(py, move |inner| {
            inner.verdicts = verdicts;
            inner.orders = orders;
            Ok(())
        })
    }

    /// The records skipped on a learnt verdict since the last call: [(topic,
    /// partition, reason, count, first offset)].
    fn skips(&self, py: Python<'_>) -> PyResult<Vec<Skipped>> {
        self.with(py, |inner| Ok(inner.skips()))
    }

    /// Settle the record handed back for (topic, partition): produce it with exactly
    /// `headers` (Python's rewrite: its own headers and the provenance), or with None
    /// skip it (a loop). The partition then reads on from the next offset. False when
    /// the producer's queue stayed full for a second: the record is still held, and
    /// the caller releases it again after polling its group.
    #[pyo3(signature = (topic, partition, headers))]
    fn release(
        &self,
        py: Python<'_>,
        topic: String,
        partition: i32,
        headers: Option<Vec<OwnedHeader>>,
    ) -> PyResult<bool> {
        self.with(py, move |inner| {
            let slot = inner.assigned_slot(&topic, partition)?;
            inner.release(slot, headers)
        })
    }

    /// Per partition, what was delivered since the last call: {(topic, partition):
    /// (delivered_through, target_offset, in_flight, records, bytes, shifts,
    /// timestamp_ms, source_offset)}, the readings of a partition assigned again added up. Only the
    /// partitions with news are told (records delivered, shifts, or where it stands
    /// moved: delivered_through, target_offset, in_flight); every one the first time:
    /// at rest a call costs nothing per partition on the caller's side.
    /// delivered_through is the highest source offset every record up to which is
    /// acked by the target (or skipped), -1 for none; target_offset that of the newest
    /// acked record and source_offset its source offset (-1 for none); shifts the
    /// (source, target) pairs where the mapping stopped being a plain shift (one record
    /// after the other on both sides).
    fn progress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let told = self.with(py, |inner| Ok(inner.progress()))?;
        let rows = told.into_iter().map(|(key, r)| {
            let row = (
                r.delivered_through,
                r.target_offset,
                r.in_flight,
                r.records,
                r.bytes,
                r.shifts,
                r.timestamp_ms,
                r.source_offset,
            );
            (key, row)
        });
        dict(py, rows.collect())
    }

    /// The largest record each target topic takes, {target topic: bytes of key, value
    /// and headers}: a record above its partition's is handed back as too large
    /// (the producer's message.max.bytes is the largest topic's). Topics not named
    /// keep theirs; unknown ones have none but the producer's.
    fn limits(&self, py: Python<'_>, limits: HashMap<String, usize>) -> PyResult<()> {
        self.with(py, move |inner| {
            inner.set_limits(limits);
            Ok(())
        })
    }

    /// Have the producer learn the partitions of these target topics now, and return
    /// {target topic: partition count}. Call it before assigning partitions whose
    /// target partitions were just created: the producer refuses a record for a
    /// partition it does not know, and librdkafka refreshes a producer's metadata
    /// only every topic.metadata.refresh.interval.ms (5 minutes by default). Raises
    /// MoverError naming the topic when the target does not answer within `timeout`
    /// seconds or answers with an error for it.
    #[pyo3(signature = (topics, timeout=10.0))]
    fn know(
        &self,
        py: Python<'_>,
        topics: Vec<String>,
        timeout: f64,
    ) -> PyResult<HashMap<String, usize>> {
        let timeout = seconds(timeout)?;
        self.with(py, move |inner| inner.know(&topics, timeout))
    }

    /// Drop what the producer has not sent yet (its queue), keeping what is in flight,
    /// whose fate only the target knows; returns how many records are in flight. A
    /// rewind does this, then waits (`outstanding`) until they settled before any
    /// partition reads the target's tail again: one that lands after that read
    /// would be copied twice.
    fn purge_queue(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |inner| Ok(inner.purge_queue()))
    }

    /// Records the producer still has in flight (serving delivery reports first);
    /// errors of those deliveries are not raised here (see `purge_queue`).
    fn outstanding(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |inner| Ok(inner.outstanding()))
    }

    /// Wait up to `timeout` seconds for every record in flight to be acked; returns
    /// how many are still in flight. Raises MoverError for a failed delivery.
    #[pyo3(signature = (timeout=10.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<i32> {
        self.with(py, move |inner| inner.flush(timeout))
    }

    /// Transactional mover: initialise the producer's transactions, which fences every
    /// earlier producer with the same transactional id and settles its open
    /// transaction (aborted, or its commit completed), so that what the target and
    /// the offsets group say next is final. Call once, before `begin_transaction`.
    #[pyo3(signature = (timeout=30.0))]
    fn init_transactions(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = seconds(timeout)?;
        self.with_txn(py, move |inner| inner.init_transactions(timeout))
    }

    /// Open a transaction: `move_records` and `release` work only inside one.
    fn begin_transaction(&self, py: Python<'_>) -> PyResult<()> {
        self.with_txn(py, |inner| inner.begin_transaction())
    }

    /// Commit the open transaction, with the source offsets of what it moved (the
    /// offset after the last record produced or skipped, per partition) committed in
    /// it to `offsets_group` on the target, keyed by target topic and partition.
    /// Returns {(source topic, partition): next source offset} of the partitions the
    /// transaction moved. Raises TransactionError (see its attributes).
    #[pyo3(signature = (timeout=30.0))]
    fn commit_transaction<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = seconds(timeout)?;
        let positions = self.with_txn(py, move |inner| inner.commit_transaction(timeout))?;
        by_partition(py, self, positions)
    }

    /// Abort the open transaction: nothing it produced becomes visible, and each
    /// partition it read reads again from the first record it took (records handed
    /// back in it and not released are dropped: they are handed back again).
    /// Returns {(source topic, partition): offset read next} of those partitions.
    #[pyo3(signature = (timeout=30.0))]
    fn abort_transaction<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = seconds(timeout)?;
        let rewound = self.with_txn(py, move |inner| inner.abort_transaction(timeout))?;
        by_partition(py, self, rewound)
    }

    /// {(topic, partition): high watermark} of the partitions the Mover reads, as its
    /// consumer last learned them from its fetch responses (no request); a partition
    /// not fetched yet is left out. The source partitions' lag is measured against these.
    fn watermarks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let highs = self.with(py, |inner| Ok(inner.watermarks()))?;
        dict(py, highs)
    }

    /// {(topic, partition): position} of the partitions the Mover reads: where its
    /// consumer stands past every record it handed out, control records and aborted
    /// records included (`Source::positions`); a partition not fetched yet is left
    /// out. A partition's lag counts from there, not from its last record.
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let positions = self.with(py, |inner| inner.positions())?;
        dict(py, positions)
    }

    /// Client errors and librdkafka's warnings since the last call: [(client, level,
    /// text)], client "source" or "target".
    fn events(&self, py: Python<'_>) -> PyResult<Vec<(String, String, String)>> {
        self.with(py, |inner| Ok(inner.events()))
    }

    /// Close the consumer and drop both clients (records still in flight are lost:
    /// `flush` first).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let closed = py.allow_threads(|| {
            let inner = lock(&self.inner).take();
            match inner {
                None => Ok(()),
                Some(inner) => inner.source.close(),
            }
        });
        Ok(closed?)
    }

    fn __repr__(&self) -> String {
        let guard = lock(&self.inner);
        match guard.as_ref() {
            None => "<Mover closed>".into(),
            Some(inner) => {
                let transactional = inner
                    .transactional
                    .as_ref()
                    .map_or("", |_| " transactional");
                format!("<Mover partitions={}{transactional}>", inner.parts.len())
            }
        }
    }
}
