//! Properties of the hostile-corpus loader: any file gives a case or an
//! error naming the file, never a panic; free text survives TOML.

use std::path::Path;

use proptest::prelude::*;

use super::corpus::{load_dir, Case, CorpusError};
use crate::util::props::{hostile_lines, hostile_text, megabyte_of, within_bound};

const GOOD: &str = "id = \"busy\"\ncategory = \"cpu_time\"\ndescription = \"spin\"\n\
                    expect = \"timeout_cpu\"\ncode = \"while True: pass\"\n";

/// A value for a key: TOML of the wrong type, a limit's text, or text.
fn toml_value() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        "-?[0-9]{0,25}(\\.[0-9]{0,4})?(e[0-9]{1,4})? ?(ms|s|m|h|K|M|G|T|iB|B)?"
            .prop_map(toml::Value::String),
        hostile_text(6).prop_map(toml::Value::String),
        proptest::collection::vec(hostile_text(4).prop_map(toml::Value::String), 0..3)
            .prop_map(toml::Value::Array),
    ]
}

const KEYS: &[&str] = &[
    "id",
    "category",
    "description",
    "code",
    "expect",
    "flags",
    "fired",
    "not_fired",
    "exception",
    "errno",
    "stdout_contains",
    "answer",
    "max_harness_mb",
    "setup",
    "setup_expect",
    "restart_before",
    "next_code",
    "limits.memory",
    "limits.pids",
    "limits.cpus",
    "limits.timeout",
    "limits.cpu_time",
    "limits.output_cap",
    "limits.disk",
];

/// The good case with generated values set on some of its keys.
fn case_text() -> impl Strategy<Value = String> {
    proptest::collection::vec((proptest::sample::select(KEYS), toml_value()), 0..6).prop_map(
        |changes| {
            let mut table: toml::Table = toml::from_str(GOOD).expect("GOOD parses");
            for (key, value) in changes {
                match key.split_once('.') {
                    Some((outer, inner)) => {
                        let limits = table
                            .entry(outer)
                            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                        if let toml::Value::Table(t) = limits {
                            t.insert(inner.to_string(), value);
                        }
                    }
                    None => {
                        table.insert(key.to_string(), value);
                    }
                }
            }
            toml::to_string(&table).expect("a table serialises")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_case_file_gives_a_case_or_an_error_naming_it(
        text in prop_oneof![case_text(), hostile_lines(10)],
    ) {
        let source = Path::new("cases/x.toml");
        if let Err(e) = Case::parse(&text, source) {
            prop_assert_eq!(e.file.as_path(), source);
            prop_assert!(e.to_string().contains("cases/x.toml"), "{}", e);
        }
    }

    #[test]
    fn free_text_survives_the_file(
        description in hostile_text(20),
        code in hostile_lines(8),
        contains in proptest::collection::vec(hostile_text(6), 0..3),
    ) {
        prop_assume!(!code.trim().is_empty() && contains.iter().all(|c| !c.is_empty()));
        let mut table: toml::Table = toml::from_str(GOOD).expect("GOOD parses");
        table.insert("description".into(), description.clone().into());
        table.insert("code".into(), code.clone().into());
        table.insert("stdout_contains".into(), contains.clone().into());
        let text = toml::to_string(&table).expect("a table serialises");
        let case = Case::parse(&text, Path::new("x.toml")).expect("a valid case");
        prop_assert_eq!(case.description, description.trim());
        prop_assert_eq!(case.code, code);
        prop_assert_eq!(case.expectation.stdout_contains, contains);
    }

    #[test]
    fn a_corpus_with_a_bad_file_names_that_file(text in hostile_lines(6)) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.toml"), GOOD).unwrap();
        std::fs::write(dir.path().join("b.toml"), &text).unwrap();
        match load_dir(dir.path()) {
            Ok(cases) => prop_assert_eq!(cases.len(), 2),
            Err(CorpusError::Case(e)) => prop_assert_eq!(e.file, dir.path().join("b.toml")),
            Err(other) => prop_assert!(false, "not about the file: {other}"),
        }
    }
}

#[test]
fn a_megabyte_case_file_is_read_in_linear_time() {
    for text in [
        format!("{GOOD}stdout_lacks = [{}\"x\"]\n", megabyte_of("\"x\", ")),
        format!("{GOOD}setup = '''{}'''\n", megabyte_of("x = [1]\n")),
        megabyte_of("["),
        megabyte_of("a.b.c = 1\n"),
    ] {
        let _ = within_bound("Case::parse", &text, |t| {
            Case::parse(t, Path::new("x.toml")).is_ok()
        });
    }
}
