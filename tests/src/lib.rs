//! Test harness: a local S3-compatible server (moto), storage backends to run the same
//! suites on, an in-process node (metadata + gateway + reader) over any store, and
//! `shale serve` on a loopback port with an SSE client, and a linearizability checker
//! for recorded histories (`history`).

#![allow(clippy::unwrap_used)]

pub mod history;
mod moto;
mod node;
mod server;

pub use moto::Moto;
pub use node::{Backend, Node, TestStore};
pub use server::{SseEvent, SseReader, TestServer};
