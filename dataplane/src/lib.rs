//! The replicator's compiled data plane (`replicator._dataplane`): records move
//! between clusters through librdkafka's public API, linked statically from the
//! source rdkafka-sys vendors, while Python keeps every decision. See
//! docs/dataplane.md.
//!
//! Without the `python` feature only the pure parts build (`cargo test
//! --no-default-features` tests them with no librdkafka and no Python).

// Every `unsafe` block (and `unsafe impl`) says why it is sound in a SAFETY
// comment above it; `make lint` (clippy with -D warnings) holds the crate to it.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod client_errors;
pub mod error;
pub mod ledger;
pub mod order;
pub mod plan;
pub mod slots;
pub mod txn;
pub mod verdicts;

#[cfg(feature = "python")]
mod clients;
#[cfg(feature = "python")]
mod exceptions;
#[cfg(feature = "python")]
mod group;
#[cfg(feature = "python")]
mod move_loop;
#[cfg(feature = "python")]
mod mover;
#[cfg(feature = "python")]
mod producing;
#[cfg(feature = "python")]
mod progress;
#[cfg(feature = "python")]
mod record;
#[cfg(feature = "python")]
mod settings_check;
#[cfg(feature = "python")]
mod source;
#[cfg(feature = "python")]
mod state;
#[cfg(feature = "python")]
mod target;
#[cfg(feature = "python")]
mod transactions;

#[cfg(feature = "python")]
use pyo3::prelude::*;

#[cfg(feature = "python")]
#[pymodule]
fn _dataplane(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<mover::Mover>()?;
    m.add("MoverError", m.py().get_type::<exceptions::MoverError>())?;
    m.add(
        "TransactionError",
        m.py().get_type::<exceptions::TransactionError>(),
    )?;
    m.add_function(wrap_pyfunction!(settings_check::check_client, m)?)?;
    m.add("LIBRDKAFKA_VERSION", rdkafka::util::get_rdkafka_version().1)?;
    Ok(())
}
