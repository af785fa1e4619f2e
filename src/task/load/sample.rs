//! Sampling and limiting a suite: a seeded, id-keyed selection.

use super::Task;
use crate::util::rng::splitmix64;

/// `--sample N --seed S` then `--limit-tasks N`.
///
/// Sampling is a seeded shuffle keyed by task id (each task's rank is a hash
/// of the seed and its id), keeping the N lowest ranks in their original
/// order. The same seed picks the same tasks on every machine, and a task
/// stays picked when other tasks are added to or removed from the suite.
/// The limit then keeps the first N.
pub fn select(
    tasks: Vec<Task>,
    limit: Option<usize>,
    sample: Option<usize>,
    seed: u64,
) -> Vec<Task> {
    let mut tasks = tasks;
    if let Some(n) = sample.filter(|&n| n < tasks.len()) {
        let seed_key = splitmix64(seed);
        let mut ranked: Vec<(u64, usize)> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (splitmix64(seed_key ^ fnv1a(t.id.as_bytes())), i))
            .collect();
        ranked.sort_unstable();
        let mut keep = vec![false; tasks.len()];
        for &(_, i) in &ranked[..n] {
            keep[i] = true;
        }
        let mut k = keep.into_iter();
        tasks.retain(|_| k.next().unwrap_or(false));
    }
    if let Some(n) = limit {
        tasks.truncate(n);
    }
    tasks
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Expected;

    fn tasks(n: usize) -> Vec<Task> {
        (0..n)
            .map(|i| Task {
                id: format!("t{i:03}"),
                question: format!("question {i}"),
                files: Vec::new(),
                expected: Expected::Text {
                    value: format!("answer {i}"),
                    case_sensitive: false,
                },
                reference: None,
                packages: Vec::new(),
                tags: Vec::new(),
            })
            .collect()
    }

    fn ids(tasks: &[Task]) -> Vec<String> {
        tasks.iter().map(|t| t.id.clone()).collect()
    }

    #[test]
    fn select_samples_deterministically_in_original_order() {
        let a = ids(&select(tasks(100), None, Some(10), 7));
        let b = ids(&select(tasks(100), None, Some(10), 7));
        let c = ids(&select(tasks(100), None, Some(10), 8));
        assert_eq!(a.len(), 10);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(a, sorted, "original order kept");
        // Stable under suite growth: a task picked from the first 100 stays
        // ranked among the lowest when 100 more are added.
        let grown = ids(&select(tasks(200), None, Some(20), 7));
        let kept = a.iter().filter(|id| grown.contains(id)).count();
        assert!(kept >= 5, "{kept} of {a:?} in {grown:?}");
        // Limit after sample; sample ≥ len keeps everything.
        assert_eq!(
            ids(&select(tasks(100), Some(3), Some(10), 7)),
            a[..3].to_vec()
        );
        assert_eq!(select(tasks(5), None, Some(10), 1).len(), 5);
        assert_eq!(
            ids(&select(tasks(5), Some(2), None, 1)),
            vec!["t000", "t001"]
        );
        assert!(select(tasks(5), Some(0), None, 1).is_empty());
        assert!(select(tasks(5), None, Some(0), 1).is_empty());
    }
}
