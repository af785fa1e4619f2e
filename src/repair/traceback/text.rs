//! Fitting text into a character budget, with a marker saying how much
//! was cut.

pub(super) fn cut_end(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// Keeps the start and the end of `text` within `max` characters.
pub fn cut_middle(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let marker_len = |cut: usize| format!(" [... {cut} characters cut ...] ").chars().count();
    let mut keep = max.saturating_sub(marker_len(n));
    while keep > 0 && keep + marker_len(n - keep) > max {
        keep -= 1;
    }
    if keep == 0 {
        return text.chars().take(max).collect();
    }
    let head = keep / 2;
    let tail = keep - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start} [... {} characters cut ...] {end}", n - keep)
}

/// Fits `text` in `budget` characters keeping its first line (cut in the
/// middle if it is longer than half the budget) and its tail.
pub(crate) fn fit_keep_tail(text: &str, budget: usize) -> String {
    if text.chars().count() <= budget {
        return text.to_string();
    }
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    if budget < 40 || rest.is_empty() {
        return cut_middle(first, budget);
    }
    let first = cut_middle(first, budget / 2);
    let room = budget - first.chars().count() - 1;
    format!("{first}\n{}", keep_tail(rest, room))
}

/// The end of `text` within `budget` characters, preceded by a
/// `[... N characters cut ...]` line; starts at a line boundary when one is
/// near.
pub fn keep_tail(text: &str, budget: usize) -> String {
    let n = text.chars().count();
    if n <= budget {
        return text.to_string();
    }
    let marker = |cut: usize| format!("[... {cut} characters cut ...]\n");
    let mut keep = budget.saturating_sub(marker(n).chars().count());
    if keep == 0 {
        return text.chars().skip(n - budget).collect();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut start = n - keep;
    // Prefer starting at a line boundary within the first fifth of what is kept.
    if let Some(p) = chars[start..start + keep / 5]
        .iter()
        .position(|&c| c == '\n')
    {
        start += p + 1;
        keep = n - start;
    }
    let tail: String = chars[start..].iter().collect();
    let out = format!("{}{tail}", marker(n - keep));
    debug_assert!(out.chars().count() <= budget);
    out
}

/// The head and the tail of `text` within `budget` characters, with a
/// `[... N characters cut ...]` line in between (for stdout).
pub fn head_tail(text: &str, budget: usize) -> String {
    let n = text.chars().count();
    if n <= budget {
        return text.to_string();
    }
    let marker = |cut: usize| format!("\n[... {cut} characters cut ...]\n");
    let mut keep = budget.saturating_sub(marker(n).chars().count());
    while keep > 0 && keep + marker(n - keep).chars().count() > budget {
        keep -= 1;
    }
    if keep == 0 {
        return text.chars().skip(n - budget).collect();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut head = keep / 3;
    let mut tail = keep - head;
    // End the head and start the tail at line boundaries when one is near.
    if let Some(p) = chars[head - head / 5..head]
        .iter()
        .rposition(|&c| c == '\n')
    {
        head = head - head / 5 + p;
    }
    if let Some(p) = chars[n - tail..n - tail + tail / 5]
        .iter()
        .position(|&c| c == '\n')
    {
        tail -= p + 1;
    }
    let start: String = chars[..head].iter().collect();
    let end: String = chars[n - tail..].iter().collect();
    format!("{start}{}{end}", marker(n - head - tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_respects_budgets() {
        let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
        for budget in [0, 5, 30, 60, 100, 500] {
            assert!(keep_tail(&text, budget).chars().count() <= budget);
            assert!(head_tail(&text, budget).chars().count() <= budget);
            assert!(cut_middle(&text, budget).chars().count() <= budget);
            assert!(fit_keep_tail(&text, budget).chars().count() <= budget);
        }
        let t = keep_tail(&text, 100);
        assert!(t.starts_with("[... ") && t.ends_with("line 199\n"), "{t}");
        let h = head_tail(&text, 100);
        assert!(
            h.starts_with("line 0\n") && h.ends_with("line 199\n"),
            "{h}"
        );
    }
}
