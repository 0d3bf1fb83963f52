//! Hostile adapter: an honest Haystack adapter (../hostile-base) whose
//! `judge` loops forever on answers to the second step's new points (the
//! `?late` address): the host must stop it at its deadline and end the step
//! naming the plugin and `judge`.
#[path = "../../hostile-base/adapter.rs"]
mod adapter;

fn before_encode(_points: &[u32]) {}

fn extra_headers(_address: &str) -> Vec<(String, String)> {
    Vec::new()
}

fn before_judge(address: &str) {
    if address.ends_with("?late") {
        let mut x = address.len() as u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            if x == 42 && address.is_empty() {
                return;
            }
        }
    }
}
