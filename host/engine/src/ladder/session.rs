//! What lives across the steps of one run: the plugin instances, the run's
//! points, the carrier and the storage counter.

use std::sync::{Arc, Mutex};

use plugin_runtime::ProbeSet;

use crate::live_safety;
use crate::storage::StoredCount;
use crate::target::{Adapter, Model};
use crate::transport::Carrier;

/// Everything that lives across steps.
pub struct Session {
    pub(crate) model: Option<Box<dyn Model>>,
    pub(crate) encoder: Option<Box<dyn Adapter>>,
    /// Learns the run's points, reads stats.
    pub(crate) counter: Arc<Mutex<dyn Adapter>>,
    /// Canary polling, on its own connection.
    pub(crate) canary: Arc<Mutex<dyn Adapter>>,
    pub(crate) probe_set: Option<ProbeSet>,
    pub(crate) addresses: Vec<Arc<str>>,
    /// The run's points so far, compactly.
    pub(crate) tags: crate::points::PointTable,
    pub(crate) period_ms: u64,
    /// How readings reach the SUT (from the plan's transport).
    pub(crate) carrier: Box<dyn Carrier>,
    /// Who counts what was stored (from the plan's storage).
    pub(crate) count: Arc<dyn StoredCount>,
    pub(crate) next_canary_seq: u64,
    pub(crate) watch: live_safety::Watch,
    /// Where the readings come from: this process, or a distributed run's
    /// workers (chosen once, when the session opens).
    pub(crate) load: Arc<dyn crate::load_source::LoadSource>,
    /// What bears on durability beyond the target's own stats: the stack's
    /// settings (`nats.sync_interval`) and the plan's (`jetstream.replicas`).
    pub(crate) durability_settings: std::collections::BTreeMap<String, String>,
}
