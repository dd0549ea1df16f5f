//! The gRPC codec of Shale's services: tonic's prost codec, except that a message is
//! encoded into room reserved for its whole length.
//!
//! tonic encodes each message into a buffer that starts at 8 KiB and grows as prost
//! writes, so a 1 MiB `ReadResponse` was copied through seven reallocations: under
//! callgrind, 22% of a `shale.v1` read's instructions. Reserving the encoded length first
//! makes it one allocation and no copy. (tonic builds its buffers itself, so the codec is
//! tested through the services: every gRPC test, Python's generated stubs among them.)

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::ProstDecoder;

/// `application/grpc+proto` by prost, each message encoded into room for all of it.
#[derive(Debug, Clone, Copy)]
pub struct SizedProstCodec<T, U> {
    _messages: PhantomData<(T, U)>,
}

impl<T, U> Default for SizedProstCodec<T, U> {
    fn default() -> Self {
        Self { _messages: PhantomData }
    }
}

impl<T, U> Codec for SizedProstCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = SizedEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        SizedEncoder { _message: PhantomData }
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::default()
    }
}

/// Encodes a `T` into room reserved for its encoded length.
#[derive(Debug, Clone, Copy)]
pub struct SizedEncoder<T> {
    _message: PhantomData<T>,
}

impl<T: Message> Encoder for SizedEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        // The room is reserved, so the length check inside `encode` is not needed.
        item.encode_raw(buf);
        Ok(())
    }
}
