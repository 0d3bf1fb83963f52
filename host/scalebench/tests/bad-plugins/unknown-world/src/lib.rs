//! Bad plugin: a component that exports a world scalebench does not know.
wit_bindgen::generate!({ path: "wit", world: "other" });

struct Other;

impl exports::acme::other::thing::Guest for Other {
    fn run() -> u32 {
        7
    }
}

export!(Other);
