//! The symbolic checker's throughput: 500 answers of ten kinds (fractions,
//! radicals, pi, complex numbers, tuples, intervals, sets, matrices,
//! degrees, text), each against its own expected LaTeX, through one
//! confined checker kernel as a run uses it. Prints the kernel's start
//! and setup, the 500 checks, and the median check; the target is all 500
//! under 60 s on 2 cores (benches/README.md, "Math checking").
//!
//! Confined: needs root. `cargo bench --bench math_checker`.

use std::sync::Arc;
use std::time::Instant;

use retrace::harness::math_checker::MathChecker;
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox};

/// The i-th (expected LaTeX, answer as the kernel records it).
fn case(i: i64) -> (String, String) {
    let n = i / 10 + 2;
    match i % 10 {
        0 => (
            format!("\\frac{{{n}}}{{{}}}", n + 1),
            format!("Rational({n}, {})", n + 1),
        ),
        1 => (format!("{n}\\sqrt{{2}}"), format!("sqrt({})", 2 * n * n)),
        2 => (
            format!("{n}\\pi"),
            format!("{:?}", n as f64 * std::f64::consts::PI),
        ),
        3 => (
            format!("{n} - {}i", n + 1),
            format!("Add(Integer({n}), Mul(Integer(-{}), I))", n + 1),
        ),
        4 => (
            format!("\\left( {n}, \\frac{{\\pi}}{{2}} \\right)"),
            format!("({n}, Mul(Rational(1, 2), pi))"),
        ),
        5 => (
            format!("[-{n}, {})", n + 3),
            format!("Interval(Integer(-{n}), Integer({}), false, true)", n + 3),
        ),
        6 => (format!("{n}, -{}", n + 1), format!("{{-{}, {n}}}", n + 1)),
        7 => (
            format!("\\begin{{pmatrix}} {n} \\\\ {} \\end{{pmatrix}}", n + 1),
            format!("MutableDenseMatrix([[Integer({n})], [Integer({})]])", n + 1),
        ),
        8 => (format!("{n}^\\circ"), format!("{n}")),
        _ => (format!("\\text{{Name{n}}}"), format!("'Name{n}'")),
    }
}

fn main() {
    let init = std::path::PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    let sandbox: Arc<dyn Sandbox> =
        Arc::new(Confined::open(init).expect("confined kernels need root"));
    let image = ImageStore::from_env()
        .ensure(ImageName::Checker, true)
        .expect("the checker image builds");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let checker = MathChecker::new(image, sandbox);
        let t = Instant::now();
        let first = checker.check("1", Some("1")).await;
        assert!(first.retrace.correct, "{first:?}");
        let setup = t.elapsed();
        let mut each = Vec::new();
        let mut wrong = Vec::new();
        let t = Instant::now();
        for i in 0..500 {
            let (expected, answer) = case(i);
            let one = Instant::now();
            let v = checker.check(&expected, Some(&answer)).await;
            each.push(one.elapsed());
            if !v.retrace.correct {
                wrong.push(format!("{expected} vs {answer}: {}", v.retrace.rule));
            }
        }
        let all = t.elapsed();
        checker.close().await;
        each.sort();
        println!("math_checker: start and setup {:.1} s", setup.as_secs_f64());
        println!(
            "math_checker: 500 answers {:.1} s (median {:.0} ms, max {:.0} ms); target < 60 s",
            all.as_secs_f64(),
            each[250].as_secs_f64() * 1e3,
            each[499].as_secs_f64() * 1e3
        );
        assert!(
            wrong.is_empty(),
            "answers judged wrong:\n{}",
            wrong.join("\n")
        );
    });
}
