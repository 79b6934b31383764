//! Our copies in the order they were written: a record is our replica when it stands
//! where one of them can stand, not only when its headers say so.
//!
//! One flow copies each source partition once and in order into the same partition
//! of the topic read here, so in a partition the source offsets (the offset header)
//! of our copies of one provenance only grow. An application that re-produces such a
//! copy into the same topic with its headers kept (a retry or dead-letter re-drive
//! under the Identity policy) can only do so after the copy was written: the re-drive
//! stands after it, and its source offset does not grow. Headers alone cannot tell
//! the two apart; this order can. `replicator.engine.rewrite` applies the same rule
//! on the Python loop. Pure: tested without Kafka.

/// Streams (provenances with a loop verdict) followed per partition at most; past
/// it, the order starts over (the next record of each is taken as our copy).
const MAX_STREAMS: usize = 64;

/// One partition's reading: per stream, the (offset, source offset) of the last
/// record taken as our copy.
#[derive(Debug, Default, Clone)]
pub struct ReplicaOrder {
    last: Vec<(u64, i64, i64)>,
}

impl ReplicaOrder {
    /// Whether a record of `stream` was taken as our copy in this reading.
    pub fn knows(&self, stream: u64) -> bool {
        self.last.iter().any(|(s, _, _)| *s == stream)
    }

    /// Whether the record at `offset` of `stream`, whose offset header reads
    /// `upstream`, stands in the order of our copies: after the last one read, with a
    /// greater source offset. A record read again (at or before the last one: the
    /// partition was rewound), one without a readable source offset and the first
    /// of a stream are taken as our copy.
    pub fn in_order(&mut self, stream: u64, offset: i64, upstream: Option<i64>) -> bool {
        let Some(upstream) = upstream else {
            return true;
        };
        match self.last.iter_mut().find(|(s, _, _)| *s == stream) {
            Some(last) => {
                if offset > last.1 && upstream <= last.2 {
                    return false;
                }
                (last.1, last.2) = (offset, upstream);
            }
            None => {
                if self.last.len() >= MAX_STREAMS {
                    self.last.clear();
                }
                self.last.push((stream, offset, upstream));
            }
        }
        true
    }
}

/// The source offset an offset header's value carries (8 bytes, big-endian, as
/// `replicator.engine.headers.encode_offset` writes it); None for anything else.
pub fn upstream_offset(value: Option<&[u8]>) -> Option<i64> {
    let bytes: [u8; 8] = value?.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_in_order_are_ours_and_a_re_drive_after_them_is_not() {
        let mut order = ReplicaOrder::default();
        assert!(!order.knows(1));
        assert!(order.in_order(1, 10, Some(100)));
        assert!(order.knows(1));
        assert!(order.in_order(1, 11, Some(101)));
        // An application re-produced the copy of source offset 100 after them.
        assert!(!order.in_order(1, 12, Some(100)));
        // The re-drive does not move the order: the next copy is still ours.
        assert!(order.in_order(1, 13, Some(102)));
        assert!(!order.in_order(1, 14, Some(102)));
    }

    #[test]
    fn streams_are_ordered_apart() {
        let mut order = ReplicaOrder::default();
        assert!(order.in_order(1, 10, Some(500)));
        assert!(order.in_order(2, 11, Some(7)));
        assert!(order.in_order(1, 12, Some(501)));
        assert!(!order.in_order(2, 13, Some(7)));
    }

    #[test]
    fn a_record_read_again_or_without_a_source_offset_is_taken_as_ours() {
        let mut order = ReplicaOrder::default();
        assert!(order.in_order(1, 10, Some(100)));
        assert!(order.in_order(1, 10, Some(100))); // the same record, read again
        assert!(order.in_order(1, 5, Some(50))); // rewound: the order starts there
        assert!(order.in_order(1, 6, Some(51)));
        assert!(order.in_order(1, 7, None));
    }

    #[test]
    fn the_offset_header_is_eight_bytes_big_endian() {
        assert_eq!(upstream_offset(Some(&42i64.to_be_bytes())), Some(42));
        assert_eq!(upstream_offset(Some(b"42")), None);
        assert_eq!(upstream_offset(None), None);
    }
}
