//! Lines of text fitted to a character budget: whole lines kept from the
//! top, then a marker saying how many were left out. Shared by the views a
//! repair prompt adds (the kernel's state, what a cell's outputs show).

/// Room kept for the marker when not everything fits.
const MARKER_ROOM: usize = 24;

/// `lines`, each ended by a newline, in at most `max_chars` bytes; when
/// they do not all fit, the first ones that do and `... (N more lines)`.
pub fn fitted_lines(lines: &[String], max_chars: usize) -> String {
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    if total <= max_chars {
        return lines.iter().map(|l| format!("{l}\n")).collect();
    }
    let mut out = String::new();
    let mut kept = 0;
    for line in lines {
        if out.len() + line.len() + 1 + MARKER_ROOM > max_chars {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    let marker = format!("... ({} more lines)", lines.len() - kept);
    if out.len() + marker.len() <= max_chars {
        out.push_str(&marker);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::fitted_lines;

    #[test]
    fn whole_lines_then_a_marker() {
        let lines: Vec<String> = (0..10).map(|i| format!("line {i}")).collect();
        assert_eq!(fitted_lines(&lines[..2], 100), "line 0\nline 1\n");
        let short = fitted_lines(&lines, 40);
        assert!(short.len() <= 40, "{short}");
        assert_eq!(short, "line 0\nline 1\n... (8 more lines)");
        assert_eq!(fitted_lines(&lines, 0), "");
    }
}
