//! The processes watching this instance's tails (gateways, readers, agents, compactors),
//! each while its watch stream is open, by the role and HTTP address it gave: what
//! `/metrics` reports and the console's cluster page lists. In memory only: a new leader
//! learns them as they reconnect.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::Metadata;

impl Metadata {
    /// Appends the Kafka agents this instance has registered and the processes watching
    /// it, as Prometheus text.
    pub fn render_members(&self, out: &mut String) {
        self.agents.render(self.clock.now_ms(), out);
        self.watchers.render(out);
    }

    /// Lists a watching process (`role`, HTTP `address`) until the returned guard drops.
    pub fn watching(&self, role: String, address: String) -> Watching {
        self.watchers.register(role, address)
    }
}

#[derive(Default)]
pub(crate) struct Watchers {
    next: AtomicU64,
    live: Mutex<BTreeMap<u64, (String, String)>>,
}

/// One open watch; dropping it (the stream ended) takes its process off the list.
pub struct Watching {
    watchers: Arc<Watchers>,
    id: u64,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.watchers.lock().remove(&self.id);
    }
}

impl Watchers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, (String, String)>> {
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn register(self: &Arc<Self>, role: String, address: String) -> Watching {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (role, address));
        Watching { watchers: self.clone(), id }
    }

    /// Prometheus text: how many processes of each role watch, and one series per
    /// process (role and address).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let live = self.lock();
        let mut by_role: BTreeMap<&str, usize> = BTreeMap::new();
        for (role, _) in live.values() {
            *by_role.entry(role.as_str()).or_default() += 1;
        }
        let _ = writeln!(
            out,
            "# HELP shale_metadata_watchers Processes watching this metadata instance, by role\n\
             # TYPE shale_metadata_watchers gauge"
        );
        for (role, count) in by_role {
            let _ = writeln!(out, "shale_metadata_watchers{{role=\"{}\"}} {count}", role.escape_default());
        }
        let _ = writeln!(
            out,
            "# HELP shale_metadata_watcher One series per watching process: its role and HTTP address\n\
             # TYPE shale_metadata_watcher gauge"
        );
        for (role, address) in live.values() {
            let _ = writeln!(
                out,
                "shale_metadata_watcher{{role=\"{}\",address=\"{}\"}} 1",
                role.escape_default(),
                address.escape_default()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watcher_is_listed_while_its_watch_is_open() {
        let watchers = Arc::new(Watchers::default());
        let gateway = watchers.register("gateway".into(), "127.0.0.1:1".into());
        let reader = watchers.register("reader".into(), "127.0.0.1:2".into());
        let mut out = String::new();
        watchers.render(&mut out);
        assert!(out.contains("shale_metadata_watchers{role=\"gateway\"} 1"), "{out}");
        assert!(out.contains("shale_metadata_watcher{role=\"reader\",address=\"127.0.0.1:2\"} 1"), "{out}");
        drop((gateway, reader));
        let mut out = String::new();
        watchers.render(&mut out);
        assert!(!out.contains("role=\"gateway\""), "{out}");
    }
}
