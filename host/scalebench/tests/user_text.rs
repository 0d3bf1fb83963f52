//! What users read never names the documents this project was started from
//! by their internal file labels ("seed 000" …): a user has never seen them.
//! Scans the README, docs/, budgets.json, results/README.md, the WIT
//! contract and every host source file (help texts and printed output live
//! there).

use std::path::{Path, PathBuf};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            files_under(&p, out);
        } else if ["rs", "md", "json", "wit", "toml", "txt"].iter().any(|x| name.ends_with(&format!(".{x}"))) {
            out.push(p);
        }
    }
}

#[test]
fn no_user_facing_text_names_the_seed_documents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md"), root.join("budgets.json"), root.join("results/README.md")];
    for d in ["docs", "wit", "host", "plugins"] {
        files_under(&root.join(d), &mut files);
    }
    // This file names the words it looks for.
    let me = Path::new(file!()).file_name().unwrap().to_owned();
    let mut hits = Vec::new();
    for f in files.iter().filter(|f| f.file_name() != Some(&me)) {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        for (i, line) in text.lines().enumerate() {
            let l = line.to_ascii_lowercase();
            if ["seed 000", "seed 002", "seed 003", "seed 00"].iter().any(|w| l.contains(w)) {
                hits.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 20, "scanned only {} files", files.len());
    assert!(hits.is_empty(), "user-facing text names the seed documents:\n{}", hits.join("\n"));
}
