//! JUnit XML, the format CI systems read test results from.
//!
//! One `<testsuite>` with one `<testcase classname=… name=… time=…>` per
//! test and a `<failure message=…>` child with the details when it failed.
//! Hand-written: the format is tiny, and escaping is the only subtle part.

use std::fmt::Write as _;

pub use super::markup::xml as escape;

/// One test case of the suite.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// Groups cases in CI views (e.g. the hostile case's category).
    pub classname: String,
    pub name: String,
    pub time_secs: f64,
    /// `Some((message, details))` when the case failed.
    pub failure: Option<(String, String)>,
    /// Free text shown with the case (verdict, flags…).
    pub system_out: Option<String>,
}

/// Renders a complete JUnit document with one suite.
pub fn render(suite: &str, cases: &[TestCase]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let time: f64 = cases.iter().map(|c| c.time_secs.max(0.0)).sum();
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time:.3}\">",
        escape(suite),
        cases.len()
    );
    for case in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(&case.classname),
            escape(&case.name),
            case.time_secs.max(0.0)
        );
        if case.failure.is_none() && case.system_out.is_none() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        if let Some((message, details)) = &case.failure {
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"failure\">{}</failure>",
                escape(message),
                escape(details)
            );
        }
        if let Some(text) = &case.system_out {
            let _ = writeln!(out, "      <system-out>{}</system-out>", escape(text));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, failure: Option<(&str, &str)>) -> TestCase {
        TestCase {
            classname: "memory".into(),
            name: name.into(),
            time_secs: 1.25,
            failure: failure.map(|(m, d)| (m.into(), d.into())),
            system_out: None,
        }
    }

    #[test]
    fn counts_and_structure() {
        let xml = render(
            "retrace-sandbox",
            &[
                case("ok_case", None),
                case(
                    "bad<case>",
                    Some(("expected \"ok\"", "got oom_killed\n& more")),
                ),
                case("third", None),
            ],
        );
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
        assert!(xml.contains(
            "<testsuite name=\"retrace-sandbox\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"3.750\">"
        ));
        assert!(xml.contains("<testcase classname=\"memory\" name=\"ok_case\" time=\"1.250\"/>"));
        assert!(xml.contains("name=\"bad&lt;case&gt;\""));
        assert!(xml.contains(
            "<failure message=\"expected &quot;ok&quot;\" type=\"failure\">got oom_killed&#10;&amp; more</failure>"
        ));
        assert_eq!(xml.matches("<testcase ").count(), 3);
        assert_eq!(xml.matches("<failure ").count(), 1);
        assert_eq!(xml.matches("</testcase>").count(), 1);
        assert!(xml.ends_with("</testsuite>\n</testsuites>\n"));
        // Every '<' in the document opens a tag we wrote.
        for piece in xml.split('<').skip(1) {
            let tag: String = piece
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "?/-".contains(*c))
                .collect();
            assert!(
                [
                    "?xml",
                    "testsuites",
                    "/testsuites",
                    "testsuite",
                    "/testsuite",
                    "testcase",
                    "/testcase",
                    "failure",
                    "/failure"
                ]
                .contains(&tag.as_str()),
                "unexpected tag {tag:?} in {xml}"
            );
        }
    }

    #[test]
    fn empty_suite_and_system_out() {
        let xml = render("s", &[]);
        assert!(xml.contains("tests=\"0\" failures=\"0\""));
        let mut c = case("with_out", None);
        c.system_out = Some("verdict <ok>".into());
        let xml = render("s", &[c]);
        assert!(xml.contains("<system-out>verdict &lt;ok&gt;</system-out>"));
        assert!(xml.contains("failures=\"0\""));
    }
}
