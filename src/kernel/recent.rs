//! The one bookkeeping of requests by msg_id: the latest few, oldest
//! forgotten first. [`Recent`] keeps something of each, in order (the
//! cells waiting behind a running one, what the host read as a request
//! went in, a gateway kernel's host readings by the request they answer);
//! [`RecentIds`] only the ids, for a quick look (the replies a channel
//! lets through, the messages already told).

use std::collections::{HashSet, VecDeque};

/// Messages remembered as seen where the gateway may hold several
/// connections to a kernel's IOPub (its websocket's, its own activity
/// tracking's), each relaying the same messages, some later than others:
/// far more than can be in flight on a lagging one behind the first.
pub(super) const SEEN_KEPT: usize = 16 * 1024;

/// The latest `CAP` values kept by msg_id, newest last.
#[derive(Debug)]
pub(super) struct Recent<T, const CAP: usize> {
    kept: VecDeque<(String, T)>,
}

impl<T, const CAP: usize> Default for Recent<T, CAP> {
    fn default() -> Self {
        Recent {
            kept: VecDeque::new(),
        }
    }
}

impl<T, const CAP: usize> Recent<T, CAP> {
    /// Keeps `value` of `id` as the newest, forgetting the oldest past the
    /// cap.
    pub(super) fn push(&mut self, id: String, value: T) {
        if self.kept.len() == CAP {
            self.kept.pop_front();
        }
        self.kept.push_back((id, value));
    }

    /// The newest value kept of `id`.
    pub(super) fn get(&self, id: &str) -> Option<&T> {
        self.kept
            .iter()
            .rev()
            .find(|(k, _)| k == id)
            .map(|(_, v)| v)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.kept.iter().any(|(k, _)| k == id)
    }

    pub(super) fn last(&self) -> Option<&T> {
        self.kept.back().map(|(_, v)| v)
    }

    /// Forgets everything up to the oldest `id` (included); nothing when
    /// it is not kept.
    pub(super) fn drain_through(&mut self, id: &str) {
        if let Some(at) = self.kept.iter().position(|(k, _)| k == id) {
            self.kept.drain(..=at);
        }
    }

    pub(super) fn pop_front(&mut self) -> Option<(String, T)> {
        self.kept.pop_front()
    }

    pub(super) fn clear(&mut self) {
        self.kept.clear();
    }

    /// Oldest first.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &T)> {
        self.kept.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// The latest `CAP` ids, for a look in constant time.
#[derive(Debug, Default)]
pub(super) struct RecentIds<const CAP: usize> {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl<const CAP: usize> RecentIds<CAP> {
    /// Remembers `id`, forgetting the oldest past the cap; whether it was
    /// new.
    pub(super) fn insert(&mut self, id: &str) -> bool {
        if !self.ids.insert(id.to_string()) {
            return false;
        }
        self.order.push_back(id.to_string());
        if self.order.len() > CAP {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
        true
    }

    /// Whether `id` is seen for the first time (an empty id always is: it
    /// cannot be told apart).
    pub(super) fn first(&mut self, id: &str) -> bool {
        id.is_empty() || self.insert(id)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_are_forgotten_first() {
        let mut recent = Recent::<_, 2>::default();
        for (id, v) in [("a", 1), ("b", 2), ("b", 3), ("c", 4)] {
            recent.push(id.into(), v);
        }
        assert!(!recent.contains("a"));
        assert_eq!(recent.get("b"), Some(&3));
        recent.drain_through("b");
        assert_eq!(recent.pop_front(), Some(("c".into(), 4)));
        let mut ids = RecentIds::<2>::default();
        assert!(ids.insert("a") && !ids.insert("a") && ids.first("") && ids.first(""));
        ids.insert("b");
        ids.insert("c");
        assert!(!ids.contains("a") && ids.contains("b") && ids.contains("c"));
    }
}
