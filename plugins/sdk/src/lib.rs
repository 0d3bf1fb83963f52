//! Guest SDK for scalebench plugins.
//!
//! One module per world of `wit/plugin.wit` with the generated bindings, and
//! an export macro per world. A plugin crate is a `cdylib` built with
//! `cargo build --release --target wasm32-wasip2`; it implements the `Guest`
//! trait of its world and calls the export macro once:
//!
//! ```ignore
//! use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
//! struct MyModel;
//! impl Guest for MyModel { /* ... */ }
//! scalebench_plugin_sdk::export_value_model!(MyModel);
//! ```
//!
//! This crate holds no plugin logic: plugins stay pure functions of their
//! inputs, and everything with side effects is a host import. Beside the
//! bindings it holds only pure helpers more than one plugin needs
//! ([`date`]: civil dates from and to days since the epoch).

/// The contract version this SDK was built against; plugins report it as `abi`.
pub const ABI_VERSION: &str = "0.1.0";

pub mod date;

/// Bindings of world `value-model-plugin`.
pub mod value_model {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "value-model-plugin",
        pub_export_macro: true,
        export_macro_name: "export_value_model_world",
        default_bindings_module: "scalebench_plugin_sdk::value_model",
    });
}

/// Bindings of world `probe-set-plugin`.
pub mod probe_set {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "probe-set-plugin",
        pub_export_macro: true,
        export_macro_name: "export_probe_set_world",
        default_bindings_module: "scalebench_plugin_sdk::probe_set",
    });
}

/// Bindings of world `target-adapter-plugin`.
pub mod target_adapter {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "target-adapter-plugin",
        pub_export_macro: true,
        export_macro_name: "export_target_adapter_world",
        default_bindings_module: "scalebench_plugin_sdk::target_adapter",
    });
}

// The optional second exports. Each is a world of its own exporting one
// interface (`http-ingest-exports`, `history-sink-exports`,
// `probe-answer-exports`), so its export macros never collide with the base
// world's; a plugin calls both macros, and the component then has both
// exports (world `target-adapter-http-plugin` = `target-adapter-plugin` +
// `http-ingest`, and so on). Shared types come from the base world's module.

/// Bindings of the optional `http-ingest` export of an HTTP target adapter:
/// headers (Content-Type, Authorization) and what a response means. Without
/// it the host sends no Content-Type and counts any 2xx as acknowledged.
pub mod http_ingest {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "http-ingest-exports",
        pub_export_macro: true,
        export_macro_name: "export_http_ingest_world",
        default_bindings_module: "scalebench_plugin_sdk::http_ingest",
        with: { "scalebench:plugin/types@0.1.0": crate::target_adapter::scalebench::plugin::types },
    });
}

/// Bindings of the optional `history-sink` export of a target adapter
/// (prefill: history written through the SUT's own API).
pub mod history_sink {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "history-sink-exports",
        pub_export_macro: true,
        export_macro_name: "export_history_sink_world",
        default_bindings_module: "scalebench_plugin_sdk::history_sink",
        with: { "scalebench:plugin/types@0.1.0": crate::target_adapter::scalebench::plugin::types },
    });
}

/// Bindings of the optional `probe-answer` export of a probe set (the size
/// of an answer, as a user of the SUT would count it).
pub mod probe_answer {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "probe-answer-exports",
        pub_export_macro: true,
        export_macro_name: "export_probe_answer_world",
        default_bindings_module: "scalebench_plugin_sdk::probe_answer",
        with: { "scalebench:plugin/types@0.1.0": crate::probe_set::scalebench::plugin::types },
    });
}

/// Export a type implementing
/// `value_model::exports::scalebench::plugin::value_model::Guest` as the plugin.
#[macro_export]
macro_rules! export_value_model {
    ($ty:ident) => {
        $crate::value_model::export_value_model_world!($ty with_types_in $crate::value_model);
    };
}

/// Export a type implementing
/// `probe_set::exports::scalebench::plugin::probe_set::Guest` as the plugin.
#[macro_export]
macro_rules! export_probe_set {
    ($ty:ident) => {
        $crate::probe_set::export_probe_set_world!($ty with_types_in $crate::probe_set);
    };
}

/// Export a type implementing
/// `target_adapter::exports::scalebench::plugin::target_adapter::Guest` as the plugin.
#[macro_export]
macro_rules! export_target_adapter {
    ($ty:ident) => {
        $crate::target_adapter::export_target_adapter_world!($ty with_types_in $crate::target_adapter);
    };
}

/// Export a type implementing
/// `http_ingest::exports::scalebench::plugin::http_ingest::Guest` as the
/// adapter's `http-ingest` (call it beside [`export_target_adapter!`]).
#[macro_export]
macro_rules! export_http_ingest {
    ($ty:ident) => {
        $crate::http_ingest::export_http_ingest_world!($ty with_types_in $crate::http_ingest);
    };
}

/// Export a type implementing
/// `history_sink::exports::scalebench::plugin::history_sink::Guest` as the
/// adapter's `history-sink` (call it beside [`export_target_adapter!`]).
#[macro_export]
macro_rules! export_history_sink {
    ($ty:ident) => {
        $crate::history_sink::export_history_sink_world!($ty with_types_in $crate::history_sink);
    };
}

/// Export a type implementing
/// `probe_answer::exports::scalebench::plugin::probe_answer::Guest` as the
/// probe set's `probe-answer` (call it beside [`export_probe_set!`]).
#[macro_export]
macro_rules! export_probe_answer {
    ($ty:ident) => {
        $crate::probe_answer::export_probe_answer_world!($ty with_types_in $crate::probe_answer);
    };
}

/// Log through the host from any world's `logging` import.
#[macro_export]
macro_rules! log {
    ($module:path, $level:ident, $($arg:tt)*) => {{
        use $module as m;
        m::scalebench::plugin::logging::log(
            m::scalebench::plugin::types::LogLevel::$level,
            &format!($($arg)*),
        );
    }};
}
