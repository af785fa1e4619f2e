//! What a cell produces beyond its output, in a confined kernel of the fat
//! image: files it writes into its working directory become artifacts
//! (never through a link, never too large, never twice), `Image.show()`
//! displays, a figure carries its chart data and a DataFrame its table
//! schema, and the repair prompt under `parsed+state` says what they show.

use crate::common;

use serde_json::{json, Value};

use retrace::kernel::{Bundle, ExecOptions, Kernel, KernelOptions, Outcome, OutputCap};
use retrace::repair::message::{next_message, FeedbackPolicy, RoundContext};
use retrace::repair::prompt::Templates;
use retrace::repair::{FeedbackKind, FeedbackMode};
use retrace::sandbox::{SandboxLimits, Verdict};

fn exec(dir: &std::path::Path) -> ExecOptions {
    ExecOptions {
        artifact_dir: Some(dir.to_path_buf()),
        artifact_prefix: "cell".into(),
        ..common::exec_opts(60)
    }
}

async fn run(k: &mut Kernel, code: &str, dir: &std::path::Path) -> Outcome {
    let o = k.execute(code, &exec(dir)).await;
    assert!(o.infra_error.is_none(), "{o:?}");
    o
}

/// The chart data of the execution's only figure.
fn chart(o: &Outcome) -> Value {
    let charts: Vec<&Value> = o
        .displays
        .iter()
        .filter_map(|b: &Bundle| b.data.get("e2b/chart"))
        .collect();
    assert_eq!(charts.len(), 1, "{:?}", o.displays);
    charts[0].clone()
}

/// A confined fat kernel and the directory of its artifacts; `None` when
/// the test is skipped for want of root.
async fn start(options: KernelOptions) -> Option<(tempfile::TempDir, Kernel)> {
    if common::lacks_root() {
        return None;
    }
    let k = common::fat_kernel(options).await;
    Some((tempfile::tempdir().unwrap(), k))
}

/// [`start`], then one cell that must run cleanly.
async fn first_cell(
    options: KernelOptions,
    code: &str,
) -> Option<(tempfile::TempDir, Kernel, Outcome)> {
    let (dir, mut k) = start(options).await?;
    let o = run(&mut k, code, dir.path()).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    Some((dir, k, o))
}

#[tokio::test(flavor = "multi_thread")]
async fn files_a_cell_saves_become_artifacts_once() {
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('p.png')\nplt.close('all')\n\
         from PIL import Image\nImage.new('RGB', (8, 8), 'blue').save('x.png')\n\
         open('t.csv', 'w').write('a,b\\n1,2\\n')\nopen('notes.txt', 'w').write('not collected')";
    let Some((dir, mut k, o)) = first_cell(KernelOptions::default(), code).await else {
        return;
    };
    let names: Vec<_> = o.artifacts.iter().map(|a| a.name.as_deref()).collect();
    assert_eq!(
        names,
        [Some("p.png"), Some("t.csv"), Some("x.png")],
        "{o:?}"
    );
    for a in &o.artifacts {
        let bytes = std::fs::read(dir.path().join(&a.path)).unwrap();
        assert_eq!(bytes.len() as u64, a.bytes);
        match a.mime.as_str() {
            "image/png" => assert!(bytes.starts_with(b"\x89PNG"), "{}", a.path),
            "text/csv" => assert_eq!(bytes, b"a,b\n1,2\n"),
            other => panic!("unexpected {other}"),
        }
    }
    // The bundle keeps what the file was, without its bytes.
    let file = o
        .displays
        .iter()
        .find_map(|b| b.data.get("application/vnd.retrace.file+json"))
        .expect("a file bundle");
    assert_eq!(file["base64"], "<artifact>");

    // Written by an earlier cell: not collected again; changed: collected.
    let o = run(&mut k, "x = 1", dir.path()).await;
    assert!(o.artifacts.is_empty(), "{:?}", o.artifacts);
    let o = run(&mut k, "open('t.csv', 'a').write('3,4\\n')", dir.path()).await;
    let names: Vec<_> = o.artifacts.iter().map(|a| a.name.as_deref()).collect();
    assert_eq!(names, [Some("t.csv")]);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn links_and_oversized_files_are_not_collected() {
    let cap = OutputCap {
        bytes: 256 * 1024,
        messages: 10_000,
    };
    let options = KernelOptions {
        output_cap: cap,
        ..Default::default()
    };
    let Some((dir, mut k)) = start(options).await else {
        return;
    };
    let o = run(
        &mut k,
        "import os\nopen('small.json', 'w').write('[1, 2]')\n\
         os.symlink('small.json', 'link.json')\nos.symlink('/etc/hostname', 'host.csv')\n\
         open('big.csv', 'w').write('x' * (300 * 1024))\n\
         open('huge.png', 'wb').write(os.urandom(2 << 20))",
        dir.path(),
    )
    .await;
    // Nothing the cell printed passed the cap: the file over it is only
    // left out.
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let names: Vec<_> = o.artifacts.iter().map(|a| a.name.as_deref()).collect();
    assert_eq!(names, [Some("small.json")], "{o:?}");
    assert_eq!(
        std::fs::read(dir.path().join(&o.artifacts[0].path)).unwrap(),
        b"[1, 2]"
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn image_show_displays_the_image() {
    let Some((dir, k, o)) = first_cell(
        KernelOptions::default(),
        "from PIL import Image\nImage.new('RGB', (30, 20), 'red').show()",
    )
    .await
    else {
        return;
    };
    assert_eq!(o.artifacts.len(), 1, "{o:?}");
    let a = &o.artifacts[0];
    assert_eq!((a.mime.as_str(), a.name.as_deref()), ("image/png", None));
    let file = std::fs::File::open(dir.path().join(&a.path)).unwrap();
    let info = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .expect("a PNG");
    assert_eq!((info.info().width, info.info().height), (30, 20));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn figures_carry_their_chart_data() {
    let Some((dir, mut k)) = start(KernelOptions::default()).await else {
        return;
    };
    let line = run(
        &mut k,
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4.5, 5, 9], label='north')\n\
         plt.plot([1, 2, 3], [1, 2, 3])\nplt.title('Sales'); plt.xlabel('month'); plt.ylabel('units (kg)')\nplt.show()",
        dir.path(),
    )
    .await;
    let c = chart(&line);
    assert_eq!(c["type"], "line");
    assert_eq!(c["title"], "Sales");
    assert_eq!(
        (&c["x_label"], &c["y_label"]),
        (&json!("month"), &json!("units (kg)"))
    );
    assert_eq!(c["y_unit"], "kg");
    assert_eq!(c["x_scale"], "linear");
    assert_eq!(c["elements"][0]["label"], "north");
    assert_eq!(
        c["elements"][0]["points"],
        json!([[1.0, 4.5], [2.0, 5.0], [3.0, 9.0]])
    );
    assert_eq!(c["elements"][1]["label"], "Line 1");
    // The figure's PNG is still its artifact.
    assert_eq!(line.artifacts.len(), 1);

    let bar = run(
        &mut k,
        "import matplotlib.pyplot as plt\nplt.bar(['A', 'B', 'C'], [100, 200, 300], label='Books')\n\
         plt.title('Sold'); plt.xlabel('Authors'); plt.ylabel('Copies')\nplt.show()",
        dir.path(),
    )
    .await;
    let c = chart(&bar);
    assert_eq!(
        (c["type"].as_str(), c["x_label"].as_str()),
        (Some("bar"), Some("Authors"))
    );
    assert_eq!(
        c["elements"],
        json!([
            {"label": "A", "group": "Books", "value": 100.0},
            {"label": "B", "group": "Books", "value": 200.0},
            {"label": "C", "group": "Books", "value": 300.0}
        ])
    );

    let pie = run(
        &mut k,
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n\
         ax.pie([90, 10], labels=['No', 'Yes'], autopct='%1.1f%%', startangle=90)\nax.set_title('Wake')\nplt.show()",
        dir.path(),
    )
    .await;
    let c = chart(&pie);
    assert_eq!(
        (c["type"].as_str(), c["title"].as_str()),
        (Some("pie"), Some("Wake"))
    );
    assert_eq!(
        c["elements"],
        json!([
            {"label": "No", "angle": 324.0, "radius": 1.0},
            {"label": "Yes", "angle": 36.0, "radius": 1.0}
        ])
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dataframe_result_carries_its_table_schema() {
    let Some((_dir, k, o)) = first_cell(
        KernelOptions::default(),
        "import pandas as pd\npd.DataFrame({'a': range(80), 0: ['x'] * 80})",
    )
    .await
    else {
        return;
    };
    let table = o.results[0]
        .data
        .get("application/vnd.dataresource+json")
        .expect("a table schema");
    assert_eq!(
        table["schema"]["fields"],
        json!([
            {"name": "index", "type": "integer"},
            {"name": "a", "type": "integer"},
            {"name": "0", "type": "string"}
        ])
    );
    assert_eq!(table["schema"]["primaryKey"], json!(["index"]));
    let rows = table["data"].as_array().unwrap();
    assert_eq!(rows.len(), 50, "rows are bounded");
    assert_eq!(rows[1], json!({"index": 1, "a": 1, "0": "x"}));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_repair_prompt_says_what_the_chart_shows() {
    let Some((dir, mut k)) = start(KernelOptions::default()).await else {
        return;
    };
    let code = "import matplotlib.pyplot as plt\nplt.plot(range(12), [3.1, 4, 5, 6, 7, 8, 9, 9.8, 9, 8, 7, 6])\n\
                plt.title('Sales'); plt.xlabel('month'); plt.ylabel('units')\nplt.show()\n\
                total = undefined_name";
    let o = run(&mut k, code, dir.path()).await;
    assert_eq!(o.verdict, Verdict::Error, "{o:?}");
    let limits = SandboxLimits::default();
    let message = |mode| {
        let policy = FeedbackPolicy {
            mode,
            budget: 4000,
            limits: &limits,
            vision: false,
            execution: Default::default(),
        };
        let round = RoundContext {
            kind: FeedbackKind::Error,
            rounds_left: 1,
            outcome: Some(&o),
            code,
            answer: "",
            unsupported: None,
            state: None,
            parts: &[],
        };
        next_message(&Templates::default(), policy, round)
            .unwrap()
            .joined_text()
    };
    let with_state = message(FeedbackMode::ParsedState);
    assert!(
        with_state.contains(
            "Figure: line chart 'Sales', x 'month' 0–11, y 'units' 3.1–9.8, 1 series: 'Line 0' (12 points)"
        ),
        "{with_state}"
    );
    assert!(!message(FeedbackMode::Parsed).contains("Figure:"));
    k.shutdown().await;
}
