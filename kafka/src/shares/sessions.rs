//! Share sessions: the partitions a member fetches from this broker, so each fetch
//! names only those it adds or forgets. A member opens one with epoch 0 (replacing any it
//! had), numbers its later requests 1, 2, ... and closes it with -1. A session no request
//! has used for a while is evicted (its member vanished without closing it): the member's
//! next request is then SHARE_SESSION_NOT_FOUND, and it opens another. A broker holds at
//! most a set number of sessions: one more is SHARE_SESSION_LIMIT_REACHED.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::ResponseError;

/// A partition of a session: its topic's id and name, and its index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SessionPartition {
    pub topic_id: uuid::Uuid,
    pub topic: String,
    pub partition: i32,
}

struct Session {
    next_epoch: i32,
    partitions: BTreeSet<SessionPartition>,
    /// When a request last used it, in the clock's milliseconds.
    used_ms: u64,
}

/// A session's key: its group and member.
pub type SessionKey = (String, String);

/// Sessions by group and member.
pub struct Sessions {
    open: HashMap<SessionKey, Session>,
    /// The most open at once.
    limit: usize,
    idle_sweep: super::IdleSweep,
}

/// The epoch that closes a session.
pub const FINAL_EPOCH: i32 = -1;

impl Sessions {
    /// No session open; at most `limit` at once.
    pub fn new(limit: usize) -> Self {
        Sessions { open: HashMap::new(), limit, idle_sweep: super::IdleSweep::default() }
    }

    /// How many are open (idle ones not yet evicted included).
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Moves `key`'s session on by a request at `epoch` adding `add` and forgetting
    /// `forget`; its partitions after. A final request closes it (its partitions are
    /// returned). An unknown session is SHARE_SESSION_NOT_FOUND; a known one at another
    /// epoch INVALID_SHARE_SESSION_EPOCH, and it is closed (the member opens another).
    pub fn advance(
        &mut self,
        key: SessionKey,
        epoch: i32,
        add: Vec<SessionPartition>,
        forget: &[(uuid::Uuid, i32)],
        now_ms: u64,
    ) -> Result<Vec<SessionPartition>, ResponseError> {
        if epoch == 0 {
            if !self.open.contains_key(&key) && self.open.len() >= self.limit {
                return Err(ResponseError::ShareSessionLimitReached);
            }
            self.open.insert(key.clone(), Session { next_epoch: 0, partitions: BTreeSet::new(), used_ms: now_ms });
        }
        let Some(session) = self.open.get_mut(&key) else { return Err(ResponseError::ShareSessionNotFound) };
        if epoch == FINAL_EPOCH {
            let closed = self.open.remove(&key).map(|s| s.partitions).unwrap_or_default();
            return Ok(closed.into_iter().collect());
        }
        if epoch != session.next_epoch {
            self.open.remove(&key);
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        session.used_ms = now_ms;
        session.next_epoch = session.next_epoch.checked_add(1).unwrap_or(1);
        session.partitions.retain(|p| !forget.contains(&(p.topic_id, p.partition)));
        session.partitions.extend(add);
        Ok(session.partitions.iter().cloned().collect())
    }

    /// Removes the sessions no request has used for more than `idle_ms`, and returns
    /// them with their partitions. Looks at most once per quarter of `idle_ms`.
    pub fn evict_idle(&mut self, now_ms: u64, idle_ms: u64) -> Vec<(SessionKey, Vec<SessionPartition>)> {
        if !self.idle_sweep.due(now_ms, idle_ms) {
            return Vec::new();
        }
        let idle: Vec<SessionKey> = self
            .open
            .iter()
            .filter(|(_, session)| now_ms.saturating_sub(session.used_ms) > idle_ms)
            .map(|(key, _)| key.clone())
            .collect();
        idle.into_iter()
            .filter_map(|key| self.open.remove(&key).map(|s| (key, s.partitions.into_iter().collect())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(topic: &str, partition: i32) -> SessionPartition {
        SessionPartition { topic_id: crate::topics::topic_id(topic), topic: topic.into(), partition }
    }

    /// Member `m`'s session in group `g`.
    fn member(m: &str) -> SessionKey {
        ("g".to_string(), m.to_string())
    }

    #[test]
    fn a_session_opens_moves_on_by_one_and_closes() {
        let mut sessions = Sessions::new(10);
        let key = || member("m");
        assert_eq!(sessions.advance(key(), 1, vec![], &[], 0), Err(ResponseError::ShareSessionNotFound));
        assert_eq!(sessions.advance(key(), 0, vec![part("t", 0), part("t", 1)], &[], 0).unwrap().len(), 2);
        let forget = [(crate::topics::topic_id("t"), 0)];
        let mut now = sessions.advance(key(), 1, vec![part("u", 0)], &forget, 0).unwrap();
        now.sort_by(|a, b| a.topic.cmp(&b.topic));
        assert_eq!(now, vec![part("t", 1), part("u", 0)]);
        assert_eq!(sessions.advance(key(), 3, vec![], &[], 0), Err(ResponseError::InvalidShareSessionEpoch));
        // The mismatch closed it.
        assert_eq!(sessions.advance(key(), 2, vec![], &[], 0), Err(ResponseError::ShareSessionNotFound));
        sessions.advance(key(), 0, vec![part("t", 0)], &[], 0).unwrap();
        assert_eq!(sessions.advance(key(), FINAL_EPOCH, vec![], &[], 0).unwrap(), vec![part("t", 0)]);
        assert_eq!(sessions.advance(key(), FINAL_EPOCH, vec![], &[], 0), Err(ResponseError::ShareSessionNotFound));
    }

    #[test]
    fn an_idle_session_is_evicted_and_a_used_one_kept() {
        let mut sessions = Sessions::new(10);
        sessions.advance(member("gone"), 0, vec![part("t", 0)], &[], 1_000).unwrap();
        sessions.advance(member("busy"), 0, vec![part("t", 1)], &[], 1_000).unwrap();
        sessions.advance(member("busy"), 1, vec![], &[], 30_000).unwrap();
        assert!(sessions.evict_idle(40_000, 45_000).is_empty(), "nothing idle for 45 s yet");
        // Looked for at most once per quarter of the idle time: after 40 s, at 51.25 s.
        assert!(sessions.evict_idle(50_000, 45_000).is_empty());
        let evicted = sessions.evict_idle(52_000, 45_000);
        assert_eq!(evicted, vec![(member("gone"), vec![part("t", 0)])]);
        assert_eq!(sessions.advance(member("gone"), 1, vec![], &[], 52_000), Err(ResponseError::ShareSessionNotFound));
        assert_eq!(sessions.advance(member("busy"), 2, vec![], &[], 52_000).unwrap(), vec![part("t", 1)]);
    }

    #[test]
    fn past_the_limit_a_new_session_is_refused_and_an_open_one_reopened() {
        let mut sessions = Sessions::new(2);
        sessions.advance(member("a"), 0, vec![part("t", 0)], &[], 0).unwrap();
        sessions.advance(member("b"), 0, vec![part("t", 0)], &[], 0).unwrap();
        let refused = sessions.advance(member("c"), 0, vec![part("t", 0)], &[], 0);
        assert_eq!(refused, Err(ResponseError::ShareSessionLimitReached));
        assert!(sessions.advance(member("a"), 0, vec![], &[], 0).unwrap().is_empty(), "a member may open its own anew");
        sessions.advance(member("b"), FINAL_EPOCH, vec![], &[], 0).unwrap();
        assert_eq!(sessions.advance(member("c"), 0, vec![part("t", 1)], &[], 0).unwrap(), vec![part("t", 1)]);
    }
}
