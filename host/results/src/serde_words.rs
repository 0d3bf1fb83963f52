//! serde's error messages in a user's words: a file that does not read says
//! what it expected as JSON or YAML names it (a number, a whole number, an
//! object, a list), never as the Rust type it was to become (`f64`, `u64`,
//! `struct Deploy`).

/// `msg` (a serde_json or serde_yaml error's text) with Rust's type names
/// replaced by what a file writer knows them as.
pub fn user_words(msg: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("f64", "a number"),
        ("f32", "a number"),
        ("u64", "a whole number of 0 or more"),
        ("u32", "a whole number of 0 or more"),
        ("u16", "a whole number of 0 or more"),
        ("u8", "a whole number of 0 or more"),
        ("usize", "a whole number of 0 or more"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
        ("a sequence", "a list"),
        ("variant identifier", "name"),
    ];
    let mut out = msg
        .replace("invalid type: map", "invalid type: an object")
        .replace("invalid type: sequence", "invalid type: a list");
    for (rust, user) in WORDS {
        out = out.replace(&format!("expected {rust}"), &format!("expected {user}"));
    }
    for (kind, user) in [("struct ", "an object"), ("enum ", "one of its names")] {
        while let Some(at) = out.find(&format!("expected {kind}")) {
            let name_at = at + "expected ".len() + kind.len();
            let end =
                out[name_at..].find(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(out.len(), |e| name_at + e);
            out.replace_range(at..end, &format!("expected {user}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::user_words;

    #[test]
    fn rust_type_names_become_the_file_format_s_words() {
        assert_eq!(
            user_words("invalid type: string \"1\", expected f64 at line 1"),
            "invalid type: string \"1\", expected a number at line 1"
        );
        assert_eq!(
            user_words("invalid value: integer `-1`, expected u64"),
            "invalid value: integer `-1`, expected a whole number of 0 or more"
        );
        assert_eq!(
            user_words("services.a.deploy: invalid type: string \"x\", expected struct Deploy at line 11"),
            "services.a.deploy: invalid type: string \"x\", expected an object at line 11"
        );
        assert_eq!(user_words("invalid type: map, expected a sequence"), "invalid type: an object, expected a list");
        assert_eq!(user_words("missing field `steps`"), "missing field `steps`");
    }
}
