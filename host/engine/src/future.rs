//! A boxed future: what object-safe async trait methods return (stack
//! drivers, carriers, storage counters), and what this crate's public
//! async entry points that other crates await return (`ladder::run`,
//! `stack::start::start`, the Docker, Swarm and NATS calls, the servers).
//! A future handed out unboxed is compiled again in every crate that
//! polls it, with all it awaits (the Docker API's JSON types, the NATS
//! client): boxing it here compiles it once, in this crate. That halved
//! the command-line crate's build (118 to 58 s of compile CPU, the
//! engine's own 111 to 136 s).

pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A boxed future that stays on its task (stack drivers are not `Sync`).
pub type LocalBoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;
