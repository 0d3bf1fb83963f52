//! A socket that keeps count of how long writes found it full: the broker
//! not reading what was sent, which is pushback (as a full in-flight window
//! is). The wall time of a write is not that measure: it also holds the time
//! this process waited for a CPU, or for its TLS session to encrypt, while
//! the socket had room — on a machine shared with the SUT that is the
//! generator's delay, never the SUT's answer.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner` with its writes timed while the kernel refuses them (Pending).
pub struct BlockedTimer<S> {
    inner: S,
    since: Option<Instant>,
    total_ns: Arc<AtomicU64>,
}

impl<S> BlockedTimer<S> {
    /// Time `inner`'s full-socket waits into `total_ns`.
    pub fn new(inner: S, total_ns: Arc<AtomicU64>) -> Self {
        BlockedTimer { inner, since: None, total_ns }
    }

    fn note<T>(&mut self, poll: Poll<T>) -> Poll<T> {
        match poll {
            Poll::Pending => {
                self.since.get_or_insert_with(Instant::now);
                Poll::Pending
            }
            ready => {
                if let Some(t) = self.since.take() {
                    self.total_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                ready
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BlockedTimer<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.note(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BlockedTimer<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A peer that does not read: writes fill the pipe and wait, and the
    /// wait is counted; once the peer reads, the count stops growing.
    #[tokio::test]
    async fn a_peer_that_does_not_read_is_counted_and_one_that_reads_is_not() {
        let (ours, mut peer) = tokio::io::duplex(1024);
        let total = Arc::new(AtomicU64::new(0));
        let mut w = BlockedTimer::new(ours, total.clone());
        w.write_all(&[0u8; 512]).await.unwrap();
        assert_eq!(total.load(Ordering::Relaxed), 0, "room in the pipe: no wait");
        let writer = tokio::spawn(async move {
            w.write_all(&[0u8; 4096]).await.unwrap();
            w
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut sink = vec![0u8; 8192];
        let mut got = 0;
        while got < 512 + 4096 {
            got += peer.read(&mut sink).await.unwrap();
        }
        let _w = writer.await.unwrap();
        let waited = total.load(Ordering::Relaxed);
        assert!(waited >= 40_000_000, "the 50 ms the peer did not read: {waited} ns");
    }
}
