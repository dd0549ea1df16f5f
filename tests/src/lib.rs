//! Test harness: a local S3-compatible server (moto), storage backends to run the same
//! suites on, and an in-process node (metadata + gateway + reader) over any store.

#![allow(clippy::unwrap_used)]

mod moto;
mod node;

pub use moto::Moto;
pub use node::{Backend, Node};
