//! What a component must be to be loaded: a component (not a core module or
//! anything else), exporting exactly one known world of a supported contract
//! version, importing only what that world is granted.

use crate::PluginError;

/// The contract this host speaks (`package scalebench:plugin@0.1.0`).
pub const CONTRACT_VERSION: &str = "0.1.0";
const PACKAGE: &str = "scalebench:plugin";

/// The kind of plugin a component is, from the world it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    ValueModel,
    ProbeSet,
    TargetAdapter,
}

impl World {
    pub const ALL: [World; 3] = [World::ValueModel, World::ProbeSet, World::TargetAdapter];

    /// The interface the world exports.
    pub fn export_interface(self) -> &'static str {
        match self {
            World::ValueModel => "value-model",
            World::ProbeSet => "probe-set",
            World::TargetAdapter => "target-adapter",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            World::ValueModel => "value-model",
            World::ProbeSet => "probe-set",
            World::TargetAdapter => "target-adapter",
        }
    }

    /// Interfaces of our package the world may import.
    fn granted(self) -> &'static [&'static str] {
        match self {
            // Value models are pure functions: no I/O, not even entropy.
            World::ValueModel => &["types", "logging"],
            World::ProbeSet | World::TargetAdapter => &["types", "logging", "http-client", "sql-client", "entropy"],
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// WASI interfaces that Rust's std for wasm32-wasip2 imports even when the
/// plugin uses none of them. The host satisfies them from an empty context:
/// no arguments, no environment, stdin empty, stdout discarded, stderr kept
/// for error messages.
const WASI_SHIMS: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
];

/// Magic and layer of a component: `\0asm`, version 0x0d, layer 1.
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const MODULE_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Is this a component at all? Checked before compiling anything.
pub fn check_header(plugin: &str, bytes: &[u8]) -> Result<(), PluginError> {
    if bytes.len() >= 8 && bytes[..8] == COMPONENT_HEADER {
        return Ok(());
    }
    let reason = if bytes.len() >= 8 && bytes[..8] == MODULE_HEADER {
        "it is a core WebAssembly module, not a component".to_string()
    } else if bytes.len() >= 4 && bytes[..4] == COMPONENT_HEADER[..4] {
        format!("unsupported WebAssembly version/layer {:02x?}", &bytes[4..bytes.len().min(8)])
    } else if bytes.is_empty() {
        "the file is empty".to_string()
    } else {
        let head: String = bytes.iter().take(16).map(|b| if b.is_ascii_graphic() { *b as char } else { '.' }).collect();
        format!("the file does not start with the WebAssembly magic bytes (it starts with {head:?})")
    };
    Err(PluginError::NotAComponent { plugin: plugin.to_string(), reason })
}

/// Split "ns:pkg/iface@1.2.3" into ("ns:pkg", "iface", Some("1.2.3")).
fn split_name(name: &str) -> (&str, &str, Option<&str>) {
    let (path, version) = match name.split_once('@') {
        Some((p, v)) => (p, Some(v)),
        None => (name, None),
    };
    match path.split_once('/') {
        Some((pkg, iface)) => (pkg, iface, version),
        None => ("", path, version),
    }
}

fn supported(version: Option<&str>) -> bool {
    // Additive changes stay in 0.1.x: any 0.1 patch is ours.
    matches!(version, Some(v) if v.starts_with("0.1."))
}

/// Find the world from the export names and check the imports against it.
pub fn check_world(plugin: &str, exports: &[String], imports: &[String]) -> Result<World, PluginError> {
    let mut found: Vec<(World, String)> = Vec::new();
    let mut other_versions = Vec::new();
    for name in exports {
        let (pkg, iface, version) = split_name(name);
        if pkg != PACKAGE {
            continue;
        }
        if let Some(world) = World::ALL.iter().find(|w| w.export_interface() == iface) {
            if supported(version) {
                found.push((*world, name.clone()));
            } else {
                other_versions.push(name.clone());
            }
        }
    }
    if found.is_empty() {
        if let Some(name) = other_versions.first() {
            let found = split_name(name).2.unwrap_or("none").to_string();
            return Err(PluginError::Abi {
                plugin: plugin.into(),
                found,
                supported: CONTRACT_VERSION.into(),
                culprit: format!("its wit package (it exports {name}) is"),
            });
        }
        let list = if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") };
        return Err(PluginError::UnknownWorld {
            plugin: plugin.into(),
            reason: format!(
                "it exports {list}; expected exactly one of {PACKAGE}/value-model@{v}, {PACKAGE}/probe-set@{v}, {PACKAGE}/target-adapter@{v}",
                v = CONTRACT_VERSION
            ),
        });
    }
    if found.len() > 1 {
        let names: Vec<_> = found.iter().map(|(_, n)| n.as_str()).collect();
        return Err(PluginError::UnknownWorld {
            plugin: plugin.into(),
            reason: format!("it exports several plugin worlds ({}); a plugin is exactly one kind", names.join(", ")),
        });
    }
    let world = found[0].0;

    let mut refused = Vec::new();
    for name in imports {
        let (pkg, iface, version) = split_name(name);
        let ok = if pkg == PACKAGE {
            supported(version) && world.granted().contains(&iface)
        } else {
            let unversioned = format!("{pkg}/{iface}");
            WASI_SHIMS.contains(&unversioned.as_str()) && version.is_some_and(|v| v.starts_with("0.2."))
        };
        if !ok {
            refused.push(name.clone());
        }
    }
    if !refused.is_empty() {
        let why = if world == World::ValueModel && refused.iter().any(|n| n.starts_with(PACKAGE)) {
            "a value model is a pure function of (seed, tag, sample): it may import only logging".to_string()
        } else {
            let mut kinds = Vec::new();
            for n in &refused {
                let k = if n.starts_with("wasi:filesystem") {
                    "filesystem access"
                } else if n.starts_with("wasi:sockets") || n.starts_with("wasi:http") {
                    "network access"
                } else if n.starts_with("wasi:clocks") {
                    "clocks (the host owns time)"
                } else if n.starts_with("wasi:random") {
                    "randomness (models must be pure; adapters use the entropy import)"
                } else {
                    "an interface this world does not grant"
                };
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            format!("the {world} world does not grant {}", kinds.join(", "))
        };
        return Err(PluginError::ForbiddenImport { plugin: plugin.into(), imports: refused.join(", "), why });
    }
    Ok(world)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn finds_the_world_and_accepts_shims() {
        let w = check_world(
            "m",
            &s(&["scalebench:plugin/value-model@0.1.0"]),
            &s(&["scalebench:plugin/types@0.1.0", "wasi:cli/stderr@0.2.6", "wasi:io/streams@0.2.0"]),
        )
        .unwrap();
        assert_eq!(w, World::ValueModel);
    }

    #[test]
    fn refuses_filesystem_and_io_for_models() {
        let e =
            check_world("m.wasm", &s(&["scalebench:plugin/value-model@0.1.0"]), &s(&["wasi:filesystem/types@0.2.6"]))
                .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("m.wasm") && msg.contains("wasi:filesystem/types@0.2.6") && msg.contains("filesystem"),
            "{msg}"
        );
        let e = check_world(
            "m.wasm",
            &s(&["scalebench:plugin/value-model@0.1.0"]),
            &s(&["scalebench:plugin/sql-client@0.1.0"]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("pure function"), "{e}");
    }

    #[test]
    fn names_unknown_and_future_worlds() {
        let e = check_world("x", &s(&["acme:thing/run@1.0.0"]), &[]).unwrap_err();
        assert!(matches!(e, PluginError::UnknownWorld { .. }));
        assert!(e.to_string().contains("acme:thing/run@1.0.0"));
        let e = check_world("x", &s(&["scalebench:plugin/value-model@0.2.0"]), &[]).unwrap_err();
        assert!(matches!(e, PluginError::Abi { .. }), "{e}");
    }

    #[test]
    fn header_check_names_the_problem() {
        assert!(check_header("a", b"hello world, not wasm").unwrap_err().to_string().contains("magic"));
        assert!(check_header("a", &MODULE_HEADER).unwrap_err().to_string().contains("core WebAssembly module"));
        assert!(check_header("a", b"").unwrap_err().to_string().contains("empty"));
        check_header("a", &COMPONENT_HEADER).unwrap();
    }
}
