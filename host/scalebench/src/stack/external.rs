//! A stack someone else runs (`--stack external`): only the services the
//! user named by URL. Its processes are not scalebench's: restarts and OOM
//! kills are unmeasured (never zero), and nothing is ever stopped.

use super::{Endpoint, StackDriver};

pub struct External {
    pub endpoints: Vec<Endpoint>,
}

impl StackDriver for External {
    fn kind(&self) -> &'static str {
        "external"
    }
    fn services(&self) -> Vec<Endpoint> {
        self.endpoints.clone()
    }
    fn caps(&self) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::from([("cpu".to_string(), "unknown (external stack)".to_string())])
    }
    fn stop(self: Box<Self>) {}
}
