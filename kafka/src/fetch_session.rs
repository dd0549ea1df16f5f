//! Incremental fetch sessions (KIP-227), as Java's consumer and kafka-python use them: a
//! full fetch at epoch 0 creates a session holding its partitions and their fetch
//! offsets; each later fetch at the next epoch names only the partitions whose fetch
//! offsets changed (and those to forget), and is answered with only the partitions that
//! have something new: records, an error, or a high watermark, last stable offset or log
//! start offset other than the one last answered. The fetch itself (its wait for
//! `min_bytes`, its byte bounds) covers every partition of the session.
//!
//! A session belongs to its connection, which holds at most one: a client whose
//! connection is replaced, or that names a session this connection does not hold, is
//! answered FETCH_SESSION_ID_NOT_FOUND and starts a new session with a full fetch, as it
//! does when a Kafka broker evicts its session. A fetch at another epoch than the next
//! is INVALID_FETCH_SESSION_EPOCH; epoch -1 closes the session and is answered as a
//! fetch without one.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::fetch::{self, Cursors};
use crate::Kafka;

/// The first Fetch version with sessions.
const FIRST_SESSION_VERSION: i16 = 7;
/// Session id 0: no session.
const NO_SESSION: i32 = 0;
/// Epoch 0 asks for a new session; -1 for none (closing the one named).
const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// What a connection keeps between its fetches: its partitions' read cursors and its
/// fetch session.
#[derive(Default)]
pub struct FetchState {
    cursors: Cursors,
    sessions: Sessions,
}

/// A connection's fetch session, if it has one.
#[derive(Default)]
struct Sessions {
    current: Mutex<Option<Session>>,
    /// The last session id issued on this connection.
    issued: Mutex<i32>,
}

struct Session {
    id: i32,
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    partitions: BTreeMap<(String, i32), Cached>,
}

/// What a session keeps of a partition: what the client last asked of it, and what it
/// was last answered.
struct Cached {
    asked: FetchPartition,
    answered: Option<Offsets>,
}

/// The offsets of a partition's answer that the client must hear of when they change.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Offsets {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// How a fetch stands to the connection's session.
enum Plan {
    /// No session: answered in full, session id 0.
    Sessionless,
    /// A full fetch that opened session `id`.
    Opened(i32),
    /// An incremental fetch of session `id`: only what changed is answered.
    Incremental(i32),
}

/// Answers `request` within the connection's fetch session (see the module's doc).
pub async fn fetch(kafka: &Kafka, mut request: FetchRequest, version: i16, state: &FetchState) -> FetchResponse {
    if version < FIRST_SESSION_VERSION {
        return fetch::fetch(kafka, request, &state.cursors).await;
    }
    let plan = match state.sessions.begin(&mut request) {
        Ok(plan) => plan,
        Err(error) => return FetchResponse::default().with_error_code(error.code()).with_session_id(NO_SESSION),
    };
    let mut response = fetch::fetch(kafka, request, &state.cursors).await;
    state.sessions.finish(&plan, &mut response);
    response
}

impl Sessions {
    /// Settles what `request` does to the session, and for an incremental fetch names
    /// every partition of the session in it, at the fetch offsets last asked.
    fn begin(&self, request: &mut FetchRequest) -> Result<Plan, ResponseError> {
        let mut current = self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match request.session_epoch {
            FINAL_EPOCH => {
                if request.session_id != NO_SESSION && current.as_ref().is_some_and(|s| s.id == request.session_id) {
                    *current = None;
                }
                Ok(Plan::Sessionless)
            }
            INITIAL_EPOCH => {
                let id = self.next_id();
                let mut session = Session { id, next_epoch: 1, partitions: BTreeMap::new() };
                session.ask(&request.topics);
                tracing::debug!(session = id, partitions = session.partitions.len(), "kafka fetch session opened");
                *current = Some(session);
                Ok(Plan::Opened(id))
            }
            epoch => {
                let session = current
                    .as_mut()
                    .filter(|s| s.id == request.session_id)
                    .ok_or(ResponseError::FetchSessionIdNotFound)?;
                if epoch != session.next_epoch {
                    return Err(ResponseError::InvalidFetchSessionEpoch);
                }
                session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                session.ask(&request.topics);
                for forgotten in &request.forgotten_topics_data {
                    for partition in &forgotten.partitions {
                        session.partitions.remove(&(forgotten.topic.0.to_string(), *partition));
                    }
                }
                request.topics = session.topics();
                Ok(Plan::Incremental(session.id))
            }
        }
    }

    /// Gives the answer its session id and, for an incremental fetch, keeps only the
    /// partitions with something new; remembers what each partition was answered.
    fn finish(&self, plan: &Plan, response: &mut FetchResponse) {
        response.session_id = NO_SESSION;
        let id = match *plan {
            Plan::Sessionless => return,
            Plan::Opened(id) | Plan::Incremental(id) => id,
        };
        let mut current = self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Replaced meanwhile (another fetch opened a session): the answer is whole, and
        // the session named in it is closed.
        let Some(session) = current.as_mut().filter(|s| s.id == id) else {
            return;
        };
        response.session_id = id;
        let incremental = matches!(plan, Plan::Incremental(_));
        for topic in &mut response.responses {
            topic.partitions.retain(|answer| {
                let Some(cached) = session.partitions.get_mut(&(topic.topic.0.to_string(), answer.partition_index))
                else {
                    return true;
                };
                let offsets = Offsets {
                    high_watermark: answer.high_watermark,
                    last_stable_offset: answer.last_stable_offset,
                    log_start_offset: answer.log_start_offset,
                };
                let news = answer.error_code != 0
                    || answer.records.as_ref().is_some_and(|r| !r.is_empty())
                    || cached.answered != Some(offsets);
                cached.answered = Some(offsets);
                news || !incremental
            });
        }
        response.responses.retain(|topic| !topic.partitions.is_empty());
    }

    fn next_id(&self) -> i32 {
        let mut issued = self.issued.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *issued = if *issued == i32::MAX { 1 } else { *issued + 1 };
        *issued
    }
}

impl Session {
    /// Takes the partitions `topics` name, at the fetch offsets and bounds they ask.
    fn ask(&mut self, topics: &[FetchTopic]) {
        for topic in topics {
            for partition in &topic.partitions {
                let key = (topic.topic.0.to_string(), partition.partition);
                let answered = self.partitions.remove(&key).and_then(|c| c.answered);
                self.partitions.insert(key, Cached { asked: partition.clone(), answered });
            }
        }
    }

    /// Every partition of the session, by topic, as a full fetch names them.
    fn topics(&self) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for ((name, _), cached) in &self.partitions {
            match topics.last_mut().filter(|t| t.topic.0.as_str() == name) {
                Some(topic) => topic.partitions.push(cached.asked.clone()),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(name.clone())))
                        .with_partitions(vec![cached.asked.clone()]),
                ),
            }
        }
        topics
    }
}
