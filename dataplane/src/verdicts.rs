//! What to do with a record that carries the replicator's own header names (`__dr_*`):
//! provenance from an earlier hop, or an application's forwarded input headers. The
//! loop rule is Python's (the flow's replication policy, custom ones included:
//! `replicator.engine.rewrite`), and it depends only on the record's topic and the
//! values of those headers, never on the offset header's. So Python decides once per
//! distinct provenance (the first such record is handed back, as before) and `learn`s
//! the verdict here; the next records with the same provenance are copied or skipped
//! by the mover itself, at the plain record's rate. Pure: tested without Kafka.

use std::collections::HashMap;
use std::sync::Arc;

/// A header as the mover keeps it: (name, value; None for a null value).
pub type Header = (Vec<u8>, Option<Vec<u8>>);

/// Python's verdict on the records of one provenance (shared, not copied, by each
/// record it settles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not replicated (a loop), for this reason (`replicator_skipped_records_total`).
    Skip(Arc<str>),
    /// Our copies of a record from the target (a loop): skipped for `why` while they
    /// stand in order (`order::ReplicaOrder`, by `stream`, which `learn` numbers); a
    /// record out of that order is an application's re-drive, copied as its own.
    Loop { why: Arc<str>, stream: u64 },
    /// Copied: its own headers less the reserved ones, then ours, then these.
    Copy(Arc<[Header]>),
}

/// The values of the reserved headers a record carries, by reserved name (the last
/// value of a name, as Python reads them; None: the name is absent).
type Provenance = Vec<Option<Option<Vec<u8>>>>;

/// The same, borrowed from a record being moved: no allocation per record.
type Seen<'a> = [Option<Option<&'a [u8]>>; MAX_RESERVED];

/// Reserved names a verdict can key on (the replicator has four).
const MAX_RESERVED: usize = 8;
/// Distinct provenances kept per topic at most: they are few (the clusters and topics
/// records came from), looked up in order; a flood of distinct ones starts over.
const MAX_PER_TOPIC: usize = 64;

#[derive(Clone)]
pub struct Verdicts {
    /// The reserved names, in the order of a `Provenance`.
    reserved: Vec<Vec<u8>>,
    /// Reserved names whose value differs on every record and decides nothing (the
    /// offset header): left out of the key.
    varying: Vec<Vec<u8>>,
    table: HashMap<String, Vec<(Provenance, Verdict)>>,
    /// The next `Verdict::Loop` stream number.
    streams: u64,
}

impl Verdicts {
    pub fn new(reserved: Vec<Vec<u8>>, varying: Vec<Vec<u8>>) -> Self {
        Verdicts {
            reserved,
            varying,
            table: HashMap::new(),
            streams: 0,
        }
    }

    pub fn is_reserved(&self, name: &[u8]) -> bool {
        self.reserved.iter().any(|r| r.as_slice() == name)
    }

    fn seen<'a>(&self, pairs: &[(&'a [u8], Option<&'a [u8]>)]) -> Seen<'a> {
        let mut found: Seen<'a> = [None; MAX_RESERVED];
        for (name, value) in pairs {
            if self.varying.iter().any(|v| v.as_slice() == *name) {
                continue;
            }
            if let Some(at) = self.reserved.iter().position(|r| r.as_slice() == *name) {
                found[at] = Some(*value);
            }
        }
        found
    }

    fn same(key: &Provenance, seen: &Seen<'_>) -> bool {
        key.iter()
            .zip(seen.iter())
            .all(|(k, s)| k.as_ref().map(|v| v.as_deref()) == *s)
    }

    /// The verdict Python gave on a record of `topic` with these headers' provenance.
    pub fn get(&self, topic: &str, pairs: &[(&[u8], Option<&[u8]>)]) -> Option<&Verdict> {
        if self.reserved.len() > MAX_RESERVED {
            return None; // never keyed: every such record goes to Python
        }
        let known = self.table.get(topic)?;
        let seen = self.seen(pairs);
        known
            .iter()
            .find(|(key, _)| Self::same(key, &seen))
            .map(|(_, verdict)| verdict)
    }

    /// Keep Python's verdict on a record of `topic` that carried `headers` (a
    /// `Verdict::Loop` gets a stream number of its own, kept when learnt again).
    pub fn learn(&mut self, topic: &str, headers: &[Header], mut verdict: Verdict) {
        if self.reserved.len() > MAX_RESERVED {
            return;
        }
        let pairs: Vec<(&[u8], Option<&[u8]>)> = headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_deref()))
            .collect();
        let seen = self.seen(&pairs);
        let key: Provenance = seen[..self.reserved.len()]
            .iter()
            .map(|s| s.map(|v| v.map(<[u8]>::to_vec)))
            .collect();
        let known = self.table.entry(topic.to_string()).or_default();
        if let Verdict::Loop { stream, .. } = &mut verdict {
            // Learnt again (another partition's first record): the same stream.
            *stream = match known.iter().find(|(k, _)| *k == key) {
                Some((_, Verdict::Loop { stream: known, .. })) => *known,
                _ => {
                    self.streams += 1;
                    self.streams
                }
            };
        }
        known.retain(|(k, _)| *k != key);
        if known.len() >= MAX_PER_TOPIC {
            known.clear();
        }
        known.push((key, verdict));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts() -> Verdicts {
        let names = ["__dr_off", "__dr_origin", "__dr_src", "__dr_topic"];
        Verdicts::new(
            names.iter().map(|n| n.as_bytes().to_vec()).collect(),
            vec![b"__dr_off".to_vec()],
        )
    }

    fn owned(pairs: &[(&str, Option<&str>)]) -> Vec<Header> {
        pairs
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec())))
            .collect()
    }

    fn borrowed(headers: &[Header]) -> Vec<(&[u8], Option<&[u8]>)> {
        headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_deref()))
            .collect()
    }

    #[test]
    fn a_verdict_answers_every_record_of_its_provenance_whatever_its_offset() {
        let mut v = verdicts();
        let first = owned(&[
            ("app", Some("x")),
            ("__dr_src", Some("b")),
            ("__dr_off", Some("1")),
            ("__dr_topic", Some("orders")),
        ]);
        v.learn("enriched", &first, Verdict::Copy(Arc::from([])));
        let later = owned(&[
            ("__dr_src", Some("b")),
            ("__dr_off", Some("987")),
            ("__dr_topic", Some("orders")),
            ("trace", None),
        ]);
        assert_eq!(
            v.get("enriched", &borrowed(&later)),
            Some(&Verdict::Copy(Arc::from([])))
        );
        // Another topic, another source or another upstream topic: not known.
        assert_eq!(v.get("other", &borrowed(&later)), None);
        let elsewhere = owned(&[
            ("__dr_src", Some("c")),
            ("__dr_off", Some("1")),
            ("__dr_topic", Some("orders")),
        ]);
        assert_eq!(v.get("enriched", &borrowed(&elsewhere)), None);
        let with_origin = owned(&[
            ("__dr_src", Some("b")),
            ("__dr_topic", Some("orders")),
            ("__dr_origin", Some("a")),
        ]);
        assert_eq!(v.get("enriched", &borrowed(&with_origin)), None);
    }

    #[test]
    fn the_last_value_of_a_name_counts_and_a_null_differs_from_an_absent_one() {
        let mut v = verdicts();
        let twice = owned(&[("__dr_src", Some("a")), ("__dr_src", Some("b"))]);
        v.learn("t", &twice, Verdict::Skip("loop".into()));
        let once = owned(&[("__dr_src", Some("b"))]);
        assert_eq!(
            v.get("t", &borrowed(&once)),
            Some(&Verdict::Skip("loop".into()))
        );
        let null = owned(&[("__dr_src", None)]);
        assert_eq!(v.get("t", &borrowed(&null)), None);
    }

    #[test]
    fn each_loop_verdict_learnt_is_a_stream_of_its_own() {
        let mut v = verdicts();
        let loop_ = |why: &str| Verdict::Loop {
            why: why.into(),
            stream: 0,
        };
        let from_b = owned(&[("__dr_src", Some("b")), ("__dr_topic", Some("orders"))]);
        let from_c = owned(&[("__dr_src", Some("c")), ("__dr_topic", Some("orders"))]);
        v.learn("orders", &from_b, loop_("loop"));
        v.learn("orders", &from_c, loop_("loop"));
        let stream = |v: &Verdicts, headers: &[Header]| match v.get("orders", &borrowed(headers)) {
            Some(Verdict::Loop { stream, .. }) => *stream,
            other => panic!("{other:?}"),
        };
        assert_ne!(stream(&v, &from_b), stream(&v, &from_c));
        assert_ne!(stream(&v, &from_b), 0);
        let before = stream(&v, &from_b);
        v.learn("orders", &from_b, loop_("loop"));
        assert_eq!(stream(&v, &from_b), before, "learnt again: the same stream");
    }

    #[test]
    fn reserved_names_are_told_apart_from_others() {
        let v = verdicts();
        assert!(v.is_reserved(b"__dr_origin"));
        assert!(!v.is_reserved(b"__dr"));
        assert!(!v.is_reserved(b"app"));
    }
}
