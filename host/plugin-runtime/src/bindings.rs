//! Host-side bindings generated from `wit/plugin.wit`, one module per world.
//! The shared interfaces (types and the host imports) are generated once, in
//! the target-adapter world that imports them all, and reused by the others.

pub mod adapter {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "target-adapter-plugin",
    });
}

pub mod probe {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "probe-set-plugin",
        with: {
            "scalebench:plugin/types": crate::bindings::adapter::scalebench::plugin::types,
            "scalebench:plugin/logging": crate::bindings::adapter::scalebench::plugin::logging,
            "scalebench:plugin/http-client": crate::bindings::adapter::scalebench::plugin::http_client,
            "scalebench:plugin/sql-client": crate::bindings::adapter::scalebench::plugin::sql_client,
            "scalebench:plugin/entropy": crate::bindings::adapter::scalebench::plugin::entropy,
        },
    });
}

pub mod model {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "value-model-plugin",
        with: {
            "scalebench:plugin/types": crate::bindings::adapter::scalebench::plugin::types,
            "scalebench:plugin/logging": crate::bindings::adapter::scalebench::plugin::logging,
        },
    });
}

/// The optional `history-sink` export of a target adapter (prefill).
pub mod history {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "history-sink-exports",
        with: {
            "scalebench:plugin/types": crate::bindings::adapter::scalebench::plugin::types,
        },
    });
}

/// The records shared by every world (`scalebench:plugin/types`).
pub use adapter::scalebench::plugin::types;

/// The optional `http-ingest` export of a target adapter (HTTP transport).
pub mod http_ingest {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "http-ingest-exports",
        with: {
            "scalebench:plugin/types": crate::bindings::adapter::scalebench::plugin::types,
        },
    });
}

/// The optional `probe-answer` export of a probe set (sizes of HTTP answers).
pub mod probe_answer {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "probe-answer-exports",
        with: {
            "scalebench:plugin/types": crate::bindings::adapter::scalebench::plugin::types,
        },
    });
}
