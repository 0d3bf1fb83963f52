//! The async runtime every command runs its I/O on, built in one place:
//! two worker threads (the machines this runs on have two cores, and the
//! load's producer is a thread of its own), every driver enabled. The
//! multi-threaded flavour is required: the ladder crosses into blocking
//! plugin calls with `block_in_place`, which a current-thread runtime refuses.

/// A runtime of `workers` threads (at least one).
pub fn with_workers(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers.max(1)).enable_all().build()
}

/// The runtime a command runs on.
pub fn two_threads() -> std::io::Result<tokio::runtime::Runtime> {
    with_workers(2)
}
