//! Messages already taken account of, by msg_id. The gateway may hold
//! several connections to the kernel's IOPub (its websocket's, its own
//! activity tracking's), each relaying the same messages, some later than
//! others: a message is counted or told once, by the first connection
//! that passes it.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Ids remembered: far more than messages can be in flight on a lagging
/// connection behind the first.
const REMEMBERED: usize = 16 * 1024;

#[derive(Default)]
pub struct SeenOnce {
    ids: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl SeenOnce {
    /// Whether `msg_id` is seen for the first time (an empty id always is:
    /// it cannot be told apart).
    pub fn first(&self, msg_id: &str) -> bool {
        if msg_id.is_empty() {
            return true;
        }
        let mut ids = self.ids.lock().unwrap();
        let (set, order) = &mut *ids;
        if !set.insert(msg_id.to_string()) {
            return false;
        }
        order.push_back(msg_id.to_string());
        if order.len() > REMEMBERED {
            if let Some(oldest) = order.pop_front() {
                set.remove(&oldest);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_is_first_once_and_old_ones_are_forgotten() {
        let seen = SeenOnce::default();
        assert!(seen.first("a"));
        assert!(!seen.first("a"));
        assert!(seen.first(""));
        assert!(seen.first(""));
        for i in 0..REMEMBERED {
            seen.first(&i.to_string());
        }
        assert!(seen.first("a"), "forgotten after {REMEMBERED} others");
    }
}
