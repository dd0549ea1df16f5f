//! A connection that holds one of its listener's slots until it closes and is given up
//! when its first bytes do not arrive in time: what every listener accepts, with TLS on
//! top or not ([`crate::tls`]).

use std::time::Duration;

/// A connection holding one of the listener's slots until it closes, failed with
/// `TimedOut` if its first bytes do not arrive in time.
#[derive(Debug)]
pub struct CappedStream {
    stream: tokio::net::TcpStream,
    _slot: tokio::sync::OwnedSemaphorePermit,
    /// Until the first byte arrives: when the connection is given up.
    first_bytes_by: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl CappedStream {
    pub(crate) fn new(
        stream: tokio::net::TcpStream,
        slot: tokio::sync::OwnedSemaphorePermit,
        first_bytes_within: Duration,
    ) -> Self {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
        Self { stream, _slot: slot, first_bytes_by: Some(Box::pin(tokio::time::sleep(first_bytes_within))) }
    }
}

impl tonic::transport::server::Connected for CappedStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl tokio::io::AsyncRead for CappedStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::future::Future;
        use std::task::Poll;
        let this = &mut *self;
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.first_bytes_by = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let expired =
                    this.first_bytes_by.as_mut().is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client sent nothing before the connection deadline",
                    )))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl tokio::io::AsyncWrite for CappedStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
