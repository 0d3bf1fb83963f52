//! A boxed future: what object-safe async trait methods return (stack
//! drivers, carriers, storage counters).

pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
