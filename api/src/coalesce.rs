//! Fewer, larger socket writes for a connection's bursts.
//!
//! The HTTP/2 stack writes each DATA frame with its own system call and flushes after
//! each one; with a client's default 16 KiB frames a 1 MiB read batch costs 64 sends,
//! and on loopback each send also pays the receiving side's per-packet work. A
//! [`CoalescedWrites`] copies writes into one buffer and sends it when it holds
//! [`SEND_AT`] bytes, or when the connection flushes with nothing written since its
//! previous flush: the end of a burst.
//!
//! A flush that finds at least a frame's worth ([`PUT_OFF_FROM`]) but fewer than
//! [`SEND_AT`] bytes, and new writes since the previous flush, is put off: it returns
//! ready and wakes the connection's task, whose next poll flushes again (both HTTP
//! stacks flush on every poll). That next flush sends unless more was written in
//! between, and at most [`MAX_PUT_OFF`] flushes in a row are put off, so buffered bytes
//! wait a bounded number of task polls, never for a timer or for more traffic. Less than
//! a frame's worth (an ack, a heartbeat, a small live batch) is sent at the flush that
//! finds it: latency is only traded where a burst of full frames is under way.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most a connection buffers before a write must wait for a send.
const CAPACITY: usize = 256 * 1024;
/// A flush sends at once when this much is buffered.
const SEND_AT: usize = 128 * 1024;
/// A flush finding less than this buffered sends at once: the default HTTP/2 frame size.
const PUT_OFF_FROM: usize = 16 * 1024;
/// The buffer's size until a burst needs more: two default frames.
const SMALL_BUFFER: usize = 2 * PUT_OFF_FROM;
/// Consecutive flushes that may be put off before one must send.
const MAX_PUT_OFF: u32 = 16;

/// A byte stream whose writes are gathered into larger sends; reads pass through.
#[derive(Debug)]
pub struct CoalescedWrites<T> {
    inner: T,
    /// Bytes written by the connection and not yet sent: small until a burst needs more,
    /// given back when a send ends a burst.
    buffer: Vec<u8>,
    /// How much of `buffer` the inner stream has taken.
    sent: usize,
    /// Whether anything was written since the last flush.
    written_since_flush: bool,
    /// Flushes put off in a row.
    put_off: u32,
}

impl<T> CoalescedWrites<T> {
    pub fn new(inner: T) -> Self {
        Self { inner, buffer: Vec::new(), sent: 0, written_since_flush: false, put_off: 0 }
    }

    fn buffered(&self) -> usize {
        self.buffer.len() - self.sent
    }

    /// Copies as much of `slices` (`total` bytes) as fits; returns how many bytes were taken.
    fn take(&mut self, slices: &[IoSlice<'_>], total: usize) -> usize {
        let wanted = (self.buffer.len() + total).min(CAPACITY);
        if self.buffer.capacity() < wanted {
            // Acks and heartbeats fit the small size; a burst grows it once to the full one.
            let size = if wanted <= SMALL_BUFFER { SMALL_BUFFER } else { CAPACITY };
            self.buffer.reserve_exact(size - self.buffer.len());
        }
        let mut taken = 0;
        for slice in slices {
            let room = CAPACITY - self.buffer.len();
            let part = &slice[..slice.len().min(room)];
            self.buffer.extend_from_slice(part);
            taken += part.len();
            if part.len() < slice.len() {
                break;
            }
        }
        if taken > 0 {
            self.written_since_flush = true;
        }
        taken
    }
}

impl<T: AsyncWrite + Unpin> CoalescedWrites<T> {
    /// Sends everything buffered; the buffer is empty when this is ready with `Ok`.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buffer.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buffer[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buffer.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    fn poll_write_slices(&mut self, cx: &mut Context<'_>, slices: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let total: usize = slices.iter().map(|slice| slice.len()).sum();
        if self.buffer.len() + total > CAPACITY {
            ready!(self.poll_send(cx))?;
        }
        if self.buffer.is_empty() && total >= CAPACITY {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, slices);
        }
        Poll::Ready(Ok(self.take(slices, total)))
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected for CoalescedWrites<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CoalescedWrites<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, slices)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let wrote = std::mem::take(&mut this.written_since_flush);
        let buffered = this.buffered();
        if wrote && (PUT_OFF_FROM..SEND_AT).contains(&buffered) && this.put_off < MAX_PUT_OFF {
            // The task's next poll flushes again and sends, unless the burst went on.
            this.put_off += 1;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_send(cx))?;
        this.put_off = 0;
        if !wrote || buffered < PUT_OFF_FROM {
            // The burst is over (or there was none): the buffer is given back, so a quiet
            // connection holds none between its acks or heartbeats.
            this.buffer = Vec::new();
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    /// An inner stream recording each write it is given.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A coalescing stream over a [`Recorder`], polled with a waker that counts its wakes.
    struct Probe {
        io: CoalescedWrites<Recorder>,
        wakes: Arc<CountingWaker>,
        waker: std::task::Waker,
    }

    impl Probe {
        fn new() -> Self {
            let wakes = Arc::new(CountingWaker::default());
            Self { io: CoalescedWrites::new(Recorder::default()), waker: wakes.clone().into(), wakes }
        }

        fn write(&mut self, bytes: &[u8]) {
            let mut cx = Context::from_waker(&self.waker);
            let Poll::Ready(Ok(n)) = Pin::new(&mut self.io).poll_write(&mut cx, bytes) else {
                panic!("write not taken")
            };
            assert_eq!(n, bytes.len());
        }

        fn flush(&mut self) {
            let mut cx = Context::from_waker(&self.waker);
            assert!(matches!(Pin::new(&mut self.io).poll_flush(&mut cx), Poll::Ready(Ok(()))));
        }

        fn shutdown(&mut self) {
            let mut cx = Context::from_waker(&self.waker);
            assert!(matches!(Pin::new(&mut self.io).poll_shutdown(&mut cx), Poll::Ready(Ok(()))));
        }

        /// What reached the inner stream, one entry per write.
        fn sent(&self) -> &[Vec<u8>] {
            &self.io.inner.writes
        }

        fn wakes(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }
    }

    fn frame(i: usize) -> Vec<u8> {
        vec![(i % 251) as u8; 16 * 1024 + 9]
    }

    #[test]
    fn a_burst_of_flushed_frames_is_sent_in_large_writes_in_order() {
        let mut io = Probe::new();
        let frames: Vec<Vec<u8>> = (0..64).map(frame).collect();
        for f in &frames {
            // The way the HTTP/2 stack writes: one frame, then a flush.
            io.write(f);
            io.flush();
        }
        // The task's next poll flushes with nothing new: the rest goes out.
        io.flush();
        let sent = io.sent();
        assert!(sent.len() <= 64 / 7 + 1, "{} writes for 64 frames", sent.len());
        assert!(sent.iter().all(|w| w.len() <= CAPACITY));
        assert_eq!(sent.concat(), frames.concat(), "every byte, in order");
        assert!(io.wakes() > 0, "a put-off flush wakes the task");
        assert_eq!(io.io.buffered(), 0);
    }

    #[test]
    fn a_flush_with_nothing_new_sends_what_is_buffered() {
        let mut io = Probe::new();
        let first = frame(1);
        io.write(&first);
        io.flush();
        assert!(io.sent().is_empty(), "the first flush of a burst of frames is put off");
        assert_eq!(io.wakes(), 1, "and wakes the task to flush again");
        io.flush();
        assert_eq!(io.sent(), vec![first]);
        assert_eq!(io.io.inner.flushes, 1, "the inner stream is flushed once the bytes are sent");
    }

    #[test]
    fn less_than_a_frame_is_sent_at_its_flush() {
        let mut io = Probe::new();
        io.write(b"an ack");
        io.flush();
        assert_eq!(io.sent(), vec![b"an ack".to_vec()]);
        assert_eq!(io.wakes(), 0, "nothing put off, no extra poll");
    }

    #[test]
    fn the_buffer_stays_small_for_small_writes_and_is_given_back_after_a_burst() {
        let mut io = Probe::new();
        io.write(b"heartbeat");
        assert_eq!(io.io.buffer.capacity(), SMALL_BUFFER);
        io.flush();
        assert_eq!(io.io.buffer.capacity(), 0, "a quiet connection holds no buffer after its send");
        for i in 0..3 {
            io.write(&frame(i));
            io.flush();
        }
        assert_eq!(io.io.buffer.capacity(), CAPACITY, "a burst grows it to the full size");
        io.flush();
        assert_eq!(io.io.buffer.capacity(), 0, "and gives it back when the burst is over");
    }

    #[test]
    fn small_writes_between_every_flush_wait_a_bounded_number_of_flushes() {
        let mut io = Probe::new();
        io.write(&frame(0));
        let mut flushes_until_sent = None;
        for i in 0..100 {
            io.write(b"x");
            io.flush();
            if !io.sent().is_empty() {
                flushes_until_sent = Some(i + 1);
                break;
            }
        }
        assert_eq!(flushes_until_sent, Some(MAX_PUT_OFF as usize + 1));
    }

    #[test]
    fn writes_past_the_capacity_send_first_and_large_writes_pass_through() {
        let mut io = Probe::new();
        let big = vec![3u8; CAPACITY - 10];
        io.write(&big);
        assert!(io.sent().is_empty());
        io.write(&[4u8; 20]);
        assert_eq!(io.sent(), vec![big.clone()], "the buffer is sent before it overflows");
        let huge = vec![5u8; CAPACITY * 2];
        io.flush();
        io.flush();
        io.write(&huge);
        assert_eq!(io.sent().last(), Some(&huge), "an empty buffer passes a large write through");
        assert_eq!(io.sent().concat(), [big, vec![4u8; 20], huge].concat());
    }

    #[test]
    fn shutdown_sends_what_is_buffered_first() {
        let mut io = Probe::new();
        io.write(b"goodbye");
        io.shutdown();
        assert_eq!(io.sent(), vec![b"goodbye".to_vec()]);
        assert!(io.io.inner.shut);
    }
}
