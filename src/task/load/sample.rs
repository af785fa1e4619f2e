//! Sampling and limiting a suite: a seeded, id-keyed selection.

use serde::{Deserialize, Serialize};

use super::Task;
use crate::util::rng::seeded_rank;

/// `--sample-tagged TAG=N`: of the sampled tasks, N are drawn from the
/// tasks carrying TAG and the rest from the others (a stratified sample,
/// chosen by what the tasks are).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TagQuota {
    pub tag: String,
    pub count: usize,
}

impl std::fmt::Display for TagQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.tag, self.count)
    }
}

/// `--sample N --seed S` (with an optional tag quota) then `--limit-tasks N`.
///
/// Sampling is a seeded shuffle keyed by task id (each task's rank is a hash
/// of the seed and its id), keeping the N lowest ranks in their original
/// order. The same seed picks the same tasks on every machine, and a task
/// stays picked when other tasks are added to or removed from the suite.
/// With a quota, the lowest ranks are kept within each of the two groups
/// (tagged, untagged); a group with too few tasks gives all it has and the
/// other group fills the sample. The limit then keeps the first N.
pub fn select(
    tasks: Vec<Task>,
    limit: Option<usize>,
    sample: Option<usize>,
    quota: Option<&TagQuota>,
    seed: u64,
) -> Vec<Task> {
    let mut tasks = tasks;
    if let Some(n) = sample.filter(|&n| n < tasks.len()) {
        let mut ranked: Vec<(u64, usize)> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (seeded_rank(seed, &t.id), i))
            .collect();
        ranked.sort_unstable();
        let picked = match quota {
            None => ranked[..n].to_vec(),
            Some(q) => {
                let (tagged, others): (Vec<_>, Vec<_>) = ranked
                    .into_iter()
                    .partition(|&(_, i)| tasks[i].tags.contains(&q.tag));
                let from_tagged = q
                    .count
                    .min(n)
                    .min(tagged.len())
                    .max(n.saturating_sub(others.len()));
                let mut picked = tagged[..from_tagged].to_vec();
                picked.extend_from_slice(&others[..n - from_tagged]);
                picked
            }
        };
        let mut keep = vec![false; tasks.len()];
        for &(_, i) in &picked {
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
                tags: if i % 4 == 0 {
                    vec!["organic-error".into()]
                } else {
                    Vec::new()
                },
                published: None,
            })
            .collect()
    }

    fn ids(tasks: &[Task]) -> Vec<String> {
        tasks.iter().map(|t| t.id.clone()).collect()
    }

    #[test]
    fn select_samples_deterministically_in_original_order() {
        let a = ids(&select(tasks(100), None, Some(10), None, 7));
        let b = ids(&select(tasks(100), None, Some(10), None, 7));
        let c = ids(&select(tasks(100), None, Some(10), None, 8));
        assert_eq!(a.len(), 10);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(a, sorted, "original order kept");
        // Stable under suite growth: a task picked from the first 100 stays
        // ranked among the lowest when 100 more are added.
        let grown = ids(&select(tasks(200), None, Some(20), None, 7));
        let kept = a.iter().filter(|id| grown.contains(id)).count();
        assert!(kept >= 5, "{kept} of {a:?} in {grown:?}");
        // Limit after sample; sample ≥ len keeps everything.
        assert_eq!(
            ids(&select(tasks(100), Some(3), Some(10), None, 7)),
            a[..3].to_vec()
        );
        assert_eq!(select(tasks(5), None, Some(10), None, 1).len(), 5);
        assert_eq!(
            ids(&select(tasks(5), Some(2), None, None, 1)),
            vec!["t000", "t001"]
        );
        assert!(select(tasks(5), Some(0), None, None, 1).is_empty());
        assert!(select(tasks(5), None, Some(0), None, 1).is_empty());
    }

    #[test]
    fn a_tag_quota_draws_its_share_from_the_tagged_tasks() {
        let tagged = |ts: &[Task]| {
            ts.iter()
                .filter(|t| t.tags.iter().any(|g| g == "organic-error"))
                .count()
        };
        let quota = |count| TagQuota {
            tag: "organic-error".into(),
            count,
        };
        // 100 tasks, 25 tagged.
        let picked = select(tasks(100), None, Some(12), Some(&quota(6)), 3);
        assert_eq!((picked.len(), tagged(&picked)), (12, 6));
        assert_eq!(
            ids(&picked),
            ids(&select(tasks(100), None, Some(12), Some(&quota(6)), 3)),
            "deterministic"
        );
        let mut sorted = ids(&picked);
        sorted.sort();
        assert_eq!(ids(&picked), sorted, "original order kept");
        // Within the tagged group the picks are that group's lowest ranks:
        // a larger quota keeps every task a smaller one picked.
        let tagged_ids = |ts: Vec<Task>| -> Vec<String> {
            ids(&ts)
                .into_iter()
                .filter(|id| id[1..].parse::<usize>().unwrap() % 4 == 0)
                .collect()
        };
        let more = tagged_ids(select(tasks(100), None, Some(12), Some(&quota(9)), 3));
        let fewer = tagged_ids(picked);
        assert!(
            fewer.iter().all(|id| more.contains(id)),
            "{fewer:?} within {more:?}"
        );
        // Too few tagged tasks: all of them, the rest from the others; too
        // few others: the tagged fill up.
        let all_tagged = select(tasks(100), None, Some(40), Some(&quota(30)), 3);
        assert_eq!((all_tagged.len(), tagged(&all_tagged)), (40, 25));
        let few_others = select(tasks(100), None, Some(90), Some(&quota(0)), 3);
        assert_eq!((few_others.len(), tagged(&few_others)), (90, 15));
        // A quota larger than the sample takes the whole sample from the tag.
        let over = select(tasks(100), None, Some(5), Some(&quota(8)), 3);
        assert_eq!((over.len(), tagged(&over)), (5, 5));
    }
}
