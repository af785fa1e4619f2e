//! What a cell sends that is not valid Unicode, and code past the size
//! bound, against real kernels: invalid text is kept as U+FFFD and counted
//! (never a message lost, never an earlier line read as the answer), and
//! code over `MAX_CODE_BYTES` is refused before the kernel sees it while
//! code under it runs whatever its echo costs on the wire.

use crate::common;

use retrace::kernel::{AnswerRule, Kernel, KernelOptions, MAX_CODE_BYTES};
use retrace::sandbox::Verdict;

use common::exec_opts as opts;

async fn kernel() -> Kernel {
    common::fat_kernel(KernelOptions::default()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn printed_text_that_is_not_unicode_is_kept_and_read_as_the_last_line() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // A lone high surrogate: jupyter_client's packer raised and the flush
    // was lost, so `42` was read as the answer.
    let o = k
        .execute("print('42'); print('ok\\ud800')", &opts(20))
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert_eq!(o.stdout, "42\nok\u{FFFD}\n");
    assert_eq!(o.text_replacements, 1, "{o:?}");
    let a = o.answer.expect("an answer");
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("ok\u{FFFD}", AnswerRule::LastStdoutLine)
    );
    // A lone low surrogate of the undecodable-byte range: sent as the raw
    // byte, which is not UTF-8.
    let o = k.execute("print('42'); print('x\\udcff')", &opts(20)).await;
    assert_eq!(o.stdout, "42\nx\u{FFFD}\n", "{o:?}");
    assert_eq!(o.answer.map(|a| a.value).as_deref(), Some("x\u{FFFD}"));
    assert_eq!(o.text_replacements, 1);
    // Clean text, non-ASCII included, counts nothing.
    let o = k.execute("print('fine é')", &opts(20)).await;
    assert_eq!((o.stdout.as_str(), o.text_replacements), ("fine é\n", 0));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_holding_a_lone_surrogate_still_ends_its_cell() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // The error message and the reply carry the text: neither may be lost
    // (a lost reply left the cell running until its wall timeout).
    let o = k.execute("raise ValueError('bad\\ud800')", &opts(20)).await;
    assert_eq!(o.verdict, Verdict::Error, "{o:?}");
    let e = o.error.expect("the error");
    assert_eq!(
        (e.ename.as_str(), e.evalue.as_str()),
        ("ValueError", "bad\u{FFFD}")
    );
    assert!(o.text_replacements >= 1, "{}", o.text_replacements);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_holding_a_lone_surrogate_is_read_with_a_replacement() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute("print('7')\nanswer = '42\\ud800'", &opts(20))
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let a = o.answer.clone().expect("an answer, never none");
    assert_eq!(a.rule, AnswerRule::AnswerVariable, "{a:?}");
    assert_eq!(a.value, "'42\u{FFFD}'", "{a:?}");
    assert_eq!(a.json, Some(serde_json::json!("42\u{FFFD}")));
    assert!(a.unsupported.is_none(), "{a:?}");
    assert_eq!(o.text_replacements, 1, "{o:?}");
    // Inside containers and keys too; the last result likewise.
    let o = k
        .execute("{'k\\udcff': ['a\\ud800', 'b']}", &opts(20))
        .await;
    let a = o.answer.expect("an answer");
    assert_eq!(a.rule, AnswerRule::LastResult);
    assert_eq!(a.value, "{'k\u{FFFD}': ['a\u{FFFD}', 'b']}");
    assert_eq!(o.text_replacements, 2);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn code_over_the_bound_is_refused_before_the_kernel_runs_it() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // The first line would leave a file behind if it ran.
    let head = "open('ran.txt', 'w').write('x')\nprint('ran')\n";
    let size = (4 << 20) + 1;
    let code = format!("{head}{}", "#".repeat(size - head.len()));
    assert_eq!(code.len(), size);
    let o = k.execute(&code, &opts(20)).await;
    assert_eq!(o.verdict, Verdict::CodeTooLarge, "{:?}", o.error);
    let refused = o.code_too_large.expect("its size is recorded");
    assert_eq!(
        (refused.bytes, refused.limit),
        (size as u64, MAX_CODE_BYTES)
    );
    assert!(o.stdout.is_empty() && o.answer.is_none() && !o.state_lost);
    assert_eq!(o.execution_count, None, "the kernel never saw it");
    let after = k
        .execute("import os\nprint(os.path.exists('ran.txt'))", &opts(20))
        .await;
    assert_eq!(after.stdout, "False\n", "{after:?}");
    assert_eq!(
        after.execution_count,
        Some(1),
        "the refused cell took no count"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn code_under_the_bound_runs_whatever_its_echo_costs() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // 900 KiB of comments, then a print: its output is what counts.
    let comments = "# filler line of a long cell\n".repeat(900 * 1024 / 29);
    let o = k.execute(&format!("{comments}print(1)\n"), &opts(30)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{:?}", o.error);
    assert_eq!(o.stdout, "1\n");
    assert!(!o.truncated);
    // Code at the bound whose echo is past the message cap (control
    // characters travel as 6-byte JSON escapes): the echo is not output.
    let prefix = "s = '";
    let suffix = "'\nprint(len(s))\n";
    let fill = MAX_CODE_BYTES as usize - prefix.len() - suffix.len();
    let code = format!("{prefix}{}{suffix}", "\u{1}".repeat(fill));
    assert_eq!(code.len() as u64, MAX_CODE_BYTES);
    assert!(
        6 * fill as u64 > k.max_message(),
        "the echo is over the cap"
    );
    let o = k.execute(&code, &opts(30)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{:?} {:?}", o.error, o.fired);
    assert_eq!(o.stdout, format!("{fill}\n"));
    assert!(!o.truncated, "{:?}", o.truncation);
    k.shutdown().await;
}
