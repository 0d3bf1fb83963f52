//! The plugin projects `scalebench plugins new` writes: one per kind of
//! plugin, all made the same way (a standalone crate with its own
//! `[workspace]`, release profile and copy of the contract, so it builds
//! wherever it is written). The source of each is the repository's
//! `plugins/template-<kind>` directory, embedded at build time: the command
//! writes those files with the crate's name replaced, and a test checks that
//! writing `template-<kind>` gives back the directory byte for byte.

use std::path::{Path, PathBuf};

/// The contract every project gets a copy of (`wit/plugin.wit`).
pub const CONTRACT: &str = include_str!("../../../wit/plugin.wit");

/// What kind of plugin a new project is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TemplateKind {
    /// A value model: what value each point has at each sample (`--model`).
    Model,
    /// A target adapter over MQTT, counting with SQL (`--target`): the Baler wire, against the local historian.
    AdapterMqtt,
    /// A target adapter over HTTP with `http-ingest` (`--target`): a Haystack server.
    AdapterHttp,
    /// A target adapter over NATS JetStream (`--target`): the host counts the stream.
    AdapterNats,
    /// A probe set: the reads timed under load (`--probes`).
    Probes,
}

impl TemplateKind {
    pub const ALL: [TemplateKind; 5] = [
        TemplateKind::Model,
        TemplateKind::AdapterMqtt,
        TemplateKind::AdapterHttp,
        TemplateKind::AdapterNats,
        TemplateKind::Probes,
    ];

    /// As the command line spells it: `model`, `adapter-mqtt`, …
    pub fn name(self) -> &'static str {
        match self {
            TemplateKind::Model => "model",
            TemplateKind::AdapterMqtt => "adapter-mqtt",
            TemplateKind::AdapterHttp => "adapter-http",
            TemplateKind::AdapterNats => "adapter-nats",
            TemplateKind::Probes => "probes",
        }
    }

    /// The repository directory this kind's project comes from, and the
    /// crate name in it (`template-<kind>`).
    pub fn source_name(self) -> String {
        format!("template-{}", self.name())
    }

    /// What a user does with a plugin of this kind, for the closing lines.
    pub fn describe(self) -> &'static str {
        match self {
            TemplateKind::Model => "a value model",
            TemplateKind::AdapterMqtt => "a target adapter over MQTT",
            TemplateKind::AdapterHttp => "a target adapter over HTTP",
            TemplateKind::AdapterNats => "a target adapter over NATS JetStream",
            TemplateKind::Probes => "a probe set",
        }
    }

    /// The files of the project but its contract, as the repository has them.
    fn files(self) -> &'static [(&'static str, &'static str)] {
        macro_rules! project {
            ($dir:literal $(, $extra:literal)*) => {
                &[
                    ("Cargo.toml", include_str!(concat!("../../../plugins/", $dir, "/Cargo.toml"))),
                    ("Cargo.lock", include_str!(concat!("../../../plugins/", $dir, "/Cargo.lock"))),
                    ("README.md", include_str!(concat!("../../../plugins/", $dir, "/README.md"))),
                    (".gitignore", include_str!(concat!("../../../plugins/", $dir, "/.gitignore"))),
                    ("src/lib.rs", include_str!(concat!("../../../plugins/", $dir, "/src/lib.rs"))),
                    $(($extra, include_str!(concat!("../../../plugins/", $dir, "/", $extra))),)*
                ]
            };
        }
        match self {
            TemplateKind::Model => project!("template-model"),
            TemplateKind::AdapterMqtt => project!("template-adapter-mqtt"),
            TemplateKind::AdapterHttp => project!("template-adapter-http"),
            TemplateKind::AdapterNats => project!("template-adapter-nats"),
            // Its budgets, under its own name: a run refuses probes without one.
            TemplateKind::Probes => project!("template-probes", "budgets.json"),
        }
    }
}

/// Why a project could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "`{0}` cannot name a plugin: use lowercase letters, digits and '-', starting with a letter (it becomes the crate's name, the .wasm file's and the name runs show)\n\
         hint: for example `my-model` or `acme-historian`"
    )]
    BadName(String),
    #[error("{} already exists and is not empty; nothing was written\nhint: choose another directory with --dir, or another name", .0.display())]
    NotEmpty(PathBuf),
    #[error("cannot write {}: {source}\nhint: check the directory is writable; nothing was left behind", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Is `name` a crate name every tool takes (cargo, the .wasm file, a topic)?
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 64
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'))
        && !name.ends_with('-')
}

/// The file `cargo build --release --target wasm32-wasip2` makes of `name`.
pub fn artifact(name: &str) -> String {
    format!("{}.wasm", name.replace('-', "_"))
}

/// The project's files (relative path, contents) for a crate called `name`.
pub fn render(kind: TemplateKind, name: &str) -> Vec<(&'static str, String)> {
    let from = kind.source_name();
    let from_snake = from.replace('-', "_");
    let to_snake = name.replace('-', "_");
    let mut out: Vec<(&'static str, String)> = kind
        .files()
        .iter()
        .map(|(path, text)| (*path, text.replace(&from, name).replace(&from_snake, &to_snake)))
        .collect();
    out.push(("wit/plugin.wit", CONTRACT.to_string()));
    out
}

/// Write the project into `dir` (made if missing; refused if it holds
/// anything). The files go to a sibling directory first and are renamed
/// into place, so an error leaves nothing half-written.
pub fn write(kind: TemplateKind, name: &str, dir: &Path) -> Result<(), TemplateError> {
    if !valid_name(name) {
        return Err(TemplateError::BadName(name.to_string()));
    }
    let occupied = dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true);
    if occupied {
        return Err(TemplateError::NotEmpty(dir.to_path_buf()));
    }
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TemplateError + '_ {
        move |source| TemplateError::Write { path: path.to_path_buf(), source }
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let staging = tempfile::Builder::new().prefix(".scalebench-new-").tempdir_in(&parent).map_err(io(&parent))?;
    for (rel, text) in render(kind, name) {
        let path = staging.path().join(rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).map_err(io(p))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    if dir.exists() {
        // An empty directory the user made: take its place.
        std::fs::remove_dir(dir).map_err(io(dir))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, dir).map_err(|source| {
        let _ = std::fs::remove_dir_all(&staged);
        TemplateError::Write { path: dir.to_path_buf(), source }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_cargo_and_a_topic_take() {
        for ok in ["my-model", "a", "acme-historian2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "My-model", "1model", "my_model", "my model", "model-", "a/b", "../x"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_project_is_renamed_everywhere_and_keeps_the_contract() {
        for kind in TemplateKind::ALL {
            let files = render(kind, "acme-thing");
            let all: String = files.iter().map(|(_, t)| t.as_str()).collect();
            assert!(!all.contains(&kind.source_name()), "{kind:?} still names its source");
            assert!(!all.contains(&kind.source_name().replace('-', "_")), "{kind:?} still names its artifact");
            let cargo = &files.iter().find(|(p, _)| *p == "Cargo.toml").unwrap().1;
            assert!(cargo.contains("name = \"acme-thing\""), "{kind:?}: {cargo}");
            assert!(cargo.contains("[workspace]"), "{kind:?} stands alone: {cargo}");
            assert!(!cargo.contains("path ="), "{kind:?} has no path dependency: {cargo}");
            let readme = &files.iter().find(|(p, _)| *p == "README.md").unwrap().1;
            assert!(readme.contains(&artifact("acme-thing")), "{kind:?}: {readme}");
            assert_eq!(files.iter().find(|(p, _)| *p == "wit/plugin.wit").unwrap().1, CONTRACT);
        }
    }

    #[test]
    fn writing_refuses_a_directory_with_something_in_it_and_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mine");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("keep.txt"), "mine").unwrap();
        let e = write(TemplateKind::Model, "mine", &dir).unwrap_err();
        assert!(matches!(e, TemplateError::NotEmpty(_)), "{e}");
        assert_eq!(std::fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");
        let e = write(TemplateKind::Model, "Bad Name", &tmp.path().join("other")).unwrap_err();
        assert!(e.to_string().contains("`Bad Name` cannot name a plugin"), "{e}");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("mine")], "nothing half-written");
        // An empty directory is taken.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        write(TemplateKind::Probes, "empty", &empty).unwrap();
        assert!(empty.join("src/lib.rs").is_file() && empty.join("wit/plugin.wit").is_file());
    }

    /// The repository's templates are what the command writes: one source.
    #[test]
    fn the_repositorys_templates_are_what_plugins_new_writes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
        for kind in TemplateKind::ALL {
            let dir = root.join(kind.source_name());
            let mut on_disk = Vec::new();
            for entry in walk(&dir) {
                let rel = entry.strip_prefix(&dir).unwrap().to_string_lossy().to_string();
                on_disk.push(rel);
            }
            on_disk.sort();
            let mut written: Vec<String> =
                render(kind, &kind.source_name()).iter().map(|(p, _)| p.to_string()).collect();
            written.sort();
            assert_eq!(on_disk, written, "plugins/{} has files the command does not write", kind.source_name());
            for (rel, text) in render(kind, &kind.source_name()) {
                let disk = std::fs::read_to_string(dir.join(rel)).unwrap();
                assert!(
                    disk == text,
                    "plugins/{}/{rel} differs from what `plugins new` writes (wit: copy wit/plugin.wit again)",
                    kind.source_name()
                );
            }
        }
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}
