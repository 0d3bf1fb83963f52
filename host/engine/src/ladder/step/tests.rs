//! Unit tests of the step's phases.

use crate::latency::Silence;
use crate::transport::AckCounts;

#[test]
fn a_silence_inside_one_second_is_measured_not_a_panic() {
    let mut counts = AckCounts { settled_msgs: 3, ..Default::default() };
    counts.acked_by_arrival_second.insert(1, 10);
    counts.latency.longest_silence = Some(Silence { from_ms: 1_500, to_ms: 1_800 });
    let a = super::count::ack_latency(&counts, 0);
    assert_eq!(a.longest_silence_s, Some(0.3));
    assert!(!a.silence_total, "no whole second lies in it");

    counts.latency.longest_silence = Some(Silence { from_ms: 1_500, to_ms: 4_200 });
    let a = super::count::ack_latency(&counts, 1_000);
    assert_eq!((a.silence_from_soak_s, a.silence_to_soak_s), (Some(0.5), Some(3.2)));
    assert!(a.silence_total, "seconds 2 and 3 had no answer");
    counts.acked_by_arrival_second.insert(3, 1);
    assert!(!super::count::ack_latency(&counts, 1_000).silence_total);
}

#[test]
fn answers_read_a_second_late_do_not_split_a_long_total_silence() {
    // A 20 s freeze from 29.0 s: answers sent before it, read in second 30
    // by a busy reader, leave it total; answers inside it do not.
    let mut counts = AckCounts { settled_msgs: 3, ..Default::default() };
    counts.latency.longest_silence = Some(Silence { from_ms: 29_000, to_ms: 49_000 });
    counts.acked_by_arrival_second.insert(30, 7);
    assert!(super::count::ack_latency(&counts, 0).silence_total);
    counts.acked_by_arrival_second.insert(31, 1);
    assert!(!super::count::ack_latency(&counts, 0).silence_total, "an answer in second 31 is an answer");
}
