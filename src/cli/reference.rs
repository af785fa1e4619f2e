//! `docs/cli.md`, rendered from the clap definitions so the reference
//! cannot drift from the flags: a unit test compares the file with what
//! this renders. Nothing here depends on the terminal (no help wrapping)
//! or on the build (the version string, which names a commit, is left
//! out).

use std::fmt::Write;

use clap::{Arg, ArgAction, Command, CommandFactory};

/// The reference as Markdown: the top-level options, then one section per
/// command path, depth first, in the order `--help` lists them.
pub fn markdown() -> String {
    let mut root = super::Cli::command();
    root.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         <!-- Generated from the clap definitions by src/cli/reference.rs; do not edit.\n     \
         Regenerate: RETRACE_BLESS=1 cargo test --bin retrace cli_reference_is_current -->\n\n\
         Every command also takes `-h, --help` and the global options of `retrace` (`-v`).\n",
    );
    section(&mut out, &root, true);
    format!("{}\n", out.trim_end())
}

fn section(out: &mut String, cmd: &Command, top: bool) {
    let path = cmd.get_bin_name().unwrap_or(cmd.get_name());
    blank_line(out);
    let _ = write!(out, "## `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = write!(out, "{}\n\n", about.to_string().trim_end());
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim();
    let _ = write!(out, "```text\n{usage}\n```\n");
    // clap's own `help` subcommand is left out, as `--help` is below.
    let subcommands = visible(cmd.get_subcommands(), |c| {
        c.is_hide_set() || c.get_name() == "help"
    });
    if !subcommands.is_empty() {
        blank_line(out);
        out.push_str("Commands:\n\n");
        for sub in &subcommands {
            let name = sub.get_bin_name().unwrap_or(sub.get_name());
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(out, "- [`{name}`](#{}): {about}", name.replace(' ', "-"));
        }
    }
    let args = visible(cmd.get_arguments(), |a| {
        // `--help` is everywhere; global flags are listed once, at the top.
        a.is_hide_set() || a.get_id() == "help" || (a.is_global_set() && !top)
    });
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        args.into_iter().partition(|a| a.is_positional());
    for (title, list) in [("Arguments", positionals), ("Options", options)] {
        if !list.is_empty() {
            blank_line(out);
            let _ = write!(out, "{title}:\n\n");
            list.into_iter().for_each(|arg| argument(out, arg));
        }
    }
    for sub in subcommands {
        section(out, sub, false);
    }
}

/// Ends `out` with exactly one empty line.
fn blank_line(out: &mut String) {
    while !out.ends_with("\n\n") {
        out.push('\n');
    }
}

fn visible<'a, T>(items: impl Iterator<Item = &'a T>, hidden: impl Fn(&T) -> bool) -> Vec<&'a T> {
    items.filter(|item| !hidden(item)).collect()
}

/// One argument: its spelling, then its facts, then its help and values.
fn argument(out: &mut String, arg: &Arg) {
    let (spelling, takes_value) = spelling(arg);
    let _ = write!(out, "- `{spelling}`");
    let mut facts = Vec::new();
    if arg.is_required_set() {
        facts.push("required".to_string());
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if takes_value && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        facts.push(format!("default {}", defaults.join(", ")));
    }
    if let Some(env) = arg.get_env().filter(|_| !arg.is_hide_env_set()) {
        facts.push(format!("env `{}`", env.to_string_lossy()));
    }
    let aliases: Vec<String> = (arg.get_aliases().unwrap_or_default().into_iter())
        .map(|a| format!("`--{a}`"))
        .collect();
    if !aliases.is_empty() {
        facts.push(format!("alias {}", aliases.join(", ")));
    }
    if !facts.is_empty() {
        let _ = write!(out, " ({})", facts.join("; "));
    }
    out.push('\n');
    if let Some(help) = arg.get_long_help().or(arg.get_help()) {
        out.push('\n');
        for line in help.to_string().trim_end().lines() {
            let _ = writeln!(out, "{}", format!("  {line}").trim_end());
        }
    }
    let values: Vec<_> = (arg.get_possible_values().into_iter())
        .filter(|v| !v.is_hide_set())
        .collect();
    if !values.is_empty() && !arg.is_hide_possible_values_set() {
        out.push('\n');
        for value in values {
            let help = value
                .get_help()
                .map(|h| format!(": {h}"))
                .unwrap_or_default();
            let _ = writeln!(out, "  - `{}`{help}", value.get_name());
        }
    }
    out.push('\n');
}

/// `<NAME>` for a positional, `-s, --long <VALUE>` for an option; and
/// whether it takes a value.
fn spelling(arg: &Arg) -> (String, bool) {
    let id = arg.get_id().as_str().to_uppercase();
    let value = match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| format!("<{n}>"))
            .collect::<Vec<_>>()
            .join(" "),
        None => format!("<{id}>"),
    };
    if arg.is_positional() {
        return (value, true);
    }
    let mut names = Vec::new();
    names.extend(arg.get_short().map(|s| format!("-{s}")));
    names.extend(arg.get_long().map(|l| format!("--{l}")));
    let takes_value = !matches!(
        arg.get_action(),
        ArgAction::SetTrue
            | ArgAction::SetFalse
            | ArgAction::Count
            | ArgAction::Help
            | ArgAction::HelpShort
            | ArgAction::HelpLong
            | ArgAction::Version
    );
    let names = names.join(", ");
    match takes_value {
        true => (format!("{names} {value}"), true),
        false => (names, false),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The CI drift check: docs/cli.md is what the flags say.
    #[test]
    fn cli_reference_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
        let want = super::markdown();
        if std::env::var_os("RETRACE_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let line = (have.lines().zip(want.lines()))
                .position(|(h, w)| h != w)
                .unwrap_or(have.lines().count().min(want.lines().count()));
            panic!(
                "docs/cli.md is not what the clap definitions give (first difference at line {}); \
                 regenerate it with `RETRACE_BLESS=1 cargo test --bin retrace cli_reference_is_current` \
                 and commit it",
                line + 1
            );
        }
    }

    #[test]
    fn every_command_has_a_section() {
        let text = super::markdown();
        for path in [
            "retrace",
            "retrace run",
            "retrace model prepare",
            "retrace image kernelspec",
        ] {
            assert!(text.contains(&format!("\n\n## `{path}`\n\n")), "{path}");
        }
        assert!(
            text.contains("- `--suite <SUITE>` (default `math`)"),
            "{text}"
        );
        assert!(
            !text.contains(super::super::VERSION),
            "no build-specific text"
        );
    }
}
