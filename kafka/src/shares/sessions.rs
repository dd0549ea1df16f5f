//! Share sessions: the partitions a member fetches from this broker, so each fetch
//! names only those it adds or forgets. A member opens one with epoch 0 (replacing any it
//! had), numbers its later requests 1, 2, ... and closes it with -1.

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
}

/// Sessions by group and member.
#[derive(Default)]
pub struct Sessions {
    open: HashMap<(String, String), Session>,
}

/// The epoch that closes a session.
pub const FINAL_EPOCH: i32 = -1;

impl Sessions {
    /// Moves `key`'s session on by a request at `epoch` adding `add` and forgetting
    /// `forget`; its partitions after. A final request closes it (its partitions are
    /// returned). An unknown session is SHARE_SESSION_NOT_FOUND; a known one at another
    /// epoch INVALID_SHARE_SESSION_EPOCH, and it is closed (the member opens another).
    pub fn advance(
        &mut self,
        key: (String, String),
        epoch: i32,
        add: Vec<SessionPartition>,
        forget: &[(uuid::Uuid, i32)],
    ) -> Result<Vec<SessionPartition>, ResponseError> {
        if epoch == 0 {
            self.open.insert(key.clone(), Session { next_epoch: 0, partitions: BTreeSet::new() });
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
        session.next_epoch = session.next_epoch.checked_add(1).unwrap_or(1);
        session.partitions.retain(|p| !forget.contains(&(p.topic_id, p.partition)));
        session.partitions.extend(add);
        Ok(session.partitions.iter().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(topic: &str, partition: i32) -> SessionPartition {
        SessionPartition { topic_id: crate::topics::topic_id(topic), topic: topic.into(), partition }
    }

    #[test]
    fn a_session_opens_moves_on_by_one_and_closes() {
        let mut sessions = Sessions::default();
        let key = || ("g".to_string(), "m".to_string());
        assert_eq!(sessions.advance(key(), 1, vec![], &[]), Err(ResponseError::ShareSessionNotFound));
        assert_eq!(sessions.advance(key(), 0, vec![part("t", 0), part("t", 1)], &[]).unwrap().len(), 2);
        let forget = [(crate::topics::topic_id("t"), 0)];
        let mut now = sessions.advance(key(), 1, vec![part("u", 0)], &forget).unwrap();
        now.sort_by(|a, b| a.topic.cmp(&b.topic));
        assert_eq!(now, vec![part("t", 1), part("u", 0)]);
        assert_eq!(sessions.advance(key(), 3, vec![], &[]), Err(ResponseError::InvalidShareSessionEpoch));
        // The mismatch closed it.
        assert_eq!(sessions.advance(key(), 2, vec![], &[]), Err(ResponseError::ShareSessionNotFound));
        sessions.advance(key(), 0, vec![part("t", 0)], &[]).unwrap();
        assert_eq!(sessions.advance(key(), FINAL_EPOCH, vec![], &[]).unwrap(), vec![part("t", 0)]);
        assert_eq!(sessions.advance(key(), FINAL_EPOCH, vec![], &[]), Err(ResponseError::ShareSessionNotFound));
    }
}
