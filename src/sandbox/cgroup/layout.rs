//! Layout: the directories a group has, one per hierarchy.

use std::path::{Path, PathBuf};

/// retrace's own subtree in each hierarchy.
pub(super) const SUBTREE: &str = "retrace";

/// One hierarchy a group has a directory in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tree {
    Memory,
    Pids,
    Cpu,
    Cpuacct,
    Freezer,
    /// The cgroup2 tree of a hybrid host (no controllers).
    Unified,
    /// The cgroup2 tree of a v2 host.
    V2,
}

impl Tree {
    /// The v1 controllers retrace needs, with their names.
    pub(super) const V1: [(Tree, &'static str); 5] = [
        (Tree::Memory, "memory"),
        (Tree::Pids, "pids"),
        (Tree::Cpu, "cpu"),
        (Tree::Cpuacct, "cpuacct"),
        (Tree::Freezer, "freezer"),
    ];
}

/// The directories of one group path, one per hierarchy. `cpu` and
/// `cpuacct` share a directory where they are mounted together.
#[derive(Debug, Clone)]
pub(super) struct Dirs(pub(super) Vec<(Tree, PathBuf)>);

impl Dirs {
    pub(super) fn get(&self, tree: Tree) -> Option<&Path> {
        self.0
            .iter()
            .find(|(t, _)| *t == tree)
            .map(|(_, p)| p.as_path())
    }

    /// The directory of `tree`; the constructors give every mode its trees.
    pub(super) fn dir(&self, tree: Tree) -> &Path {
        self.get(tree)
            .unwrap_or_else(|| panic!("cgroup layout without a {tree:?} hierarchy"))
    }

    pub(super) fn join(&self, name: &str) -> Dirs {
        Dirs(self.0.iter().map(|(t, p)| (*t, p.join(name))).collect())
    }

    /// Each directory once, in hierarchy order.
    pub(super) fn unique(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for (_, p) in &self.0 {
            if !out.contains(&p.as_path()) {
                out.push(p);
            }
        }
        out
    }

    /// The directory used in messages: memory on v1, the group on v2.
    pub(super) fn primary(&self) -> &Path {
        self.get(Tree::Memory)
            .or_else(|| self.get(Tree::V2))
            .unwrap_or_else(|| self.0[0].1.as_path())
    }
}

/// Kernel ids become directory names.
pub(super) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}
