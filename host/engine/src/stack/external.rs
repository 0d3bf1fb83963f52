//! A stack someone else runs (`--stack external`): only the services the
//! user named by URL. Its processes are not scalebench's and nothing is ever
//! stopped or signalled. Health is measured only for what `--watch` names
//! (a pid, a container, a health URL: see [`super::watch`]); with nothing
//! watched, restarts and OOM kills are unmeasured (never zero) and every
//! pass says "health not watched".

use std::collections::BTreeMap;

use super::watch::Watchers;
use super::{Endpoint, ProcSample, StackDriver};
use crate::future::BoxFuture;
use crate::results::ServiceHealth;

pub struct External {
    pub endpoints: Vec<Endpoint>,
    pub watchers: Watchers,
}

impl StackDriver for External {
    fn kind(&self) -> &'static str {
        "external"
    }
    fn services(&self) -> Vec<Endpoint> {
        self.endpoints.clone()
    }
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.watchers.check(false))
    }
    fn supervise_now(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.watchers.check(true))
    }
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        (!self.watchers.is_empty()).then(|| self.watchers.totals())
    }
    fn sample_processes(&mut self) -> Vec<ProcSample> {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(self.watchers.samples()))
    }
    fn caps(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cpu".to_string(), "unknown (external stack)".to_string())])
    }
    fn stop(self: Box<Self>) {}
}
