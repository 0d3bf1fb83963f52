//! Hostile adapter: an honest Haystack adapter (../hostile-base) whose
//! `encode` allocates up to its memory limit once a batch holds the second
//! step's new points: the host must stop it at the limit, in the middle of
//! the step, and end the step naming the plugin and `encode`.
#[path = "../../hostile-base/adapter.rs"]
mod adapter;

fn before_encode(points: &[u32]) {
    if points.iter().any(|p| *p >= adapter::LATE_FROM) {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut chunk = vec![0u8; 16 << 20];
            chunk[0] = points.len() as u8;
            hoard.push(std::hint::black_box(chunk));
            if hoard.len() == usize::MAX {
                return;
            }
        }
    }
}

fn extra_headers(_address: &str) -> Vec<(String, String)> {
    Vec::new()
}

fn before_judge(_address: &str) {}
