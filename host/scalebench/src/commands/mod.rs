//! One module per subcommand.

pub mod gen;
pub mod gen_bench;
pub mod gen_compression;
pub mod plugins;
pub mod run;
pub mod table;
pub mod bench;
pub mod stack;
