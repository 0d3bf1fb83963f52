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
//! inputs, and everything with side effects is a host import.

/// The contract version this SDK was built against; plugins report it as `abi`.
pub const ABI_VERSION: &str = "0.1.0";

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

// A target adapter that also exports `history-sink` (world
// `target-adapter-history-plugin`) generates its own bindings of that world
// with `wit_bindgen::generate!` (see plugins/targets/baler/src/component.rs):
// two exported-macro sets of the same interfaces cannot live in one crate.

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
