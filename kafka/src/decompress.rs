//! Decompressing produced record batches within a bound. A few KiB of gzip, zstd or lz4
//! can expand to gigabytes, and a snappy block names its own uncompressed length, which
//! a careless decoder allocates up front; so every codec here stops at
//! [`MAX_DECOMPRESSED_BYTES`] and the batch is refused with `MESSAGE_TOO_LARGE`.

use std::io::Read;

use bytes::{Buf, Bytes};
use kafka_protocol::records::Compression;

/// The most a produced batch's records may take once decompressed: 64 MiB, the largest
/// request the listener reads by default (`[kafka] max_request_bytes`).
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Returned (inside the codec's error) when a batch decompresses past the bound.
#[derive(Debug, thiserror::Error)]
#[error("the record batch decompresses to more than {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

/// The records of a batch compressed with `compression`, decompressed, at most `limit`
/// bytes (uncompressed ones as they are).
pub fn decompress(input: Bytes, compression: Compression, limit: usize) -> anyhow::Result<Bytes> {
    match compression {
        Compression::None => Ok(input),
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(input.reader()), limit),
        Compression::Zstd => read_bounded(zstd::stream::read::Decoder::new(input.reader())?, limit),
        Compression::Lz4 => read_bounded(lz4::Decoder::new(input.reader())?, limit),
        Compression::Snappy => snappy(input, limit),
    }
}

/// Reads a decoder to its end, failing once it yields more than `limit` bytes.
fn read_bounded(decoder: impl Read, limit: usize) -> anyhow::Result<Bytes> {
    let mut out = Vec::new();
    decoder.take(limit as u64 + 1).read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(TooLarge { limit }.into());
    }
    Ok(out.into())
}

/// Kafka's snappy: xerial's framing (a magic header, then length-prefixed blocks), or
/// one raw block as the Java client falls back to.
fn snappy(mut input: Bytes, limit: usize) -> anyhow::Result<Bytes> {
    const MAGIC: &[u8] = b"\x82SNAPPY\x00";
    const HEADER_BYTES: usize = 16;
    if !input.starts_with(MAGIC) {
        return snappy_blocks(&[input], limit);
    }
    anyhow::ensure!(input.len() >= HEADER_BYTES, "truncated snappy header");
    input.advance(HEADER_BYTES);
    let mut blocks = Vec::new();
    while input.has_remaining() {
        anyhow::ensure!(input.remaining() >= 4, "truncated snappy block length");
        let len = input.get_u32() as usize;
        anyhow::ensure!(input.remaining() >= len, "truncated snappy block");
        blocks.push(input.split_to(len));
    }
    snappy_blocks(&blocks, limit)
}

/// Raw snappy blocks, each sized from its header before anything is allocated.
fn snappy_blocks(blocks: &[Bytes], limit: usize) -> anyhow::Result<Bytes> {
    let mut total = 0usize;
    for block in blocks {
        total = total.saturating_add(snap::raw::decompress_len(block)?);
        if total > limit {
            return Err(TooLarge { limit }.into());
        }
    }
    let mut out = vec![0u8; total];
    let mut at = 0;
    let mut decoder = snap::raw::Decoder::new();
    for block in blocks {
        at += decoder.decompress(block, &mut out[at..])?;
    }
    out.truncate(at);
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn each_codec(plain: &[u8]) -> Vec<(Compression, Bytes)> {
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(plain).unwrap();
        let zstd = zstd::encode_all(plain, 1).unwrap();
        let mut lz4 = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        lz4.write_all(plain).unwrap();
        let (lz4, done) = lz4.finish();
        done.unwrap();
        let raw_snappy = snap::raw::Encoder::new().compress_vec(plain).unwrap();
        let mut framed = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        framed.extend_from_slice(&(raw_snappy.len() as u32).to_be_bytes());
        framed.extend_from_slice(&raw_snappy);
        vec![
            (Compression::Gzip, gzip.finish().unwrap().into()),
            (Compression::Zstd, zstd.into()),
            (Compression::Lz4, lz4.into()),
            (Compression::Snappy, raw_snappy.into()),
            (Compression::Snappy, framed.into()),
        ]
    }

    #[test]
    fn every_codec_decompresses_within_the_bound_and_stops_past_it() {
        let plain = vec![7u8; 100_000];
        for (codec, compressed) in each_codec(&plain) {
            let out = decompress(compressed.clone(), codec, plain.len()).unwrap();
            assert_eq!(out.as_ref(), plain.as_slice(), "{codec:?}");
            let error = decompress(compressed.clone(), codec, plain.len() - 1).unwrap_err();
            assert!(error.downcast_ref::<TooLarge>().is_some(), "{codec:?}: {error}");
        }
    }

    /// A snappy block claiming 4 GiB is refused from its header, before any allocation.
    #[test]
    fn a_snappy_block_claiming_gigabytes_is_refused_before_allocating() {
        let mut claim = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        claim.extend_from_slice(&[0; 8]);
        let error = decompress(Bytes::from(claim), Compression::Snappy, MAX_DECOMPRESSED_BYTES).unwrap_err();
        assert!(error.downcast_ref::<TooLarge>().is_some(), "{error}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [Compression::Gzip, Compression::Zstd, Compression::Lz4, Compression::Snappy] {
            let garbage = Bytes::from_static(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x05abc");
            assert!(decompress(garbage.clone(), codec, 1 << 20).is_err(), "{codec:?}");
        }
    }
}
