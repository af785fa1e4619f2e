//! `retrace launch` driven the way Enterprise Gateway's
//! DistributedProcessProxy drives a kernel launcher: a response socket and
//! a 1024-bit RSA key of the "gateway" (this test), the sealed connection
//! opened as EG opens it, a real Jupyter client (jupyter_client in the fat
//! image) on the TCP ports the launcher serves, and the gateway's requests
//! on the communication port. The confinement is checked from the host
//! (the kernel's uid and memory cgroup), and nothing may be left after.
//! tests/it/enterprise_gateway.rs runs the same launcher under a real EG.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_lc_rs::cipher::{PaddedBlockDecryptingKey, UnboundCipherKey, AES_128};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use retrace::pyenv::ImageName;
use rsa::pkcs8::EncodePublicKey;
use rsa::{Pkcs1v15Encrypt, RsaPrivateKey};

/// The gateway's side of a launch: its response socket and key pair.
struct GatewaySide {
    response: TcpListener,
    key: RsaPrivateKey,
}

impl GatewaySide {
    fn new() -> GatewaySide {
        GatewaySide {
            response: TcpListener::bind("127.0.0.1:0").unwrap(),
            key: RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap(),
        }
    }

    /// `retrace launch` as the kernelspec runs it, with `flags` first.
    fn launch(&self, kernel_id: &str, flags: &[&str]) -> Child {
        let public = self.key.to_public_key().to_public_key_der().unwrap();
        let address = self.response.local_addr().unwrap().to_string();
        Command::new(env!("CARGO_BIN_EXE_retrace"))
            .arg("launch")
            .args(flags)
            .args(["--kernel-id", kernel_id, "--response-address", &address])
            .args(["--public-key", &BASE64.encode(public.as_bytes())])
            .args(["--port-range", "0..0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The connection the launcher sent, opened as EG's
    /// `ResponseManager._decode_payload` opens a version-1 payload.
    fn connection(&self) -> serde_json::Value {
        self.response.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut stream = loop {
            match self.response.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("no connection from the launcher in 90 s: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let envelope: serde_json::Value =
            serde_json::from_slice(&BASE64.decode(text.trim()).unwrap()).unwrap();
        assert_eq!(envelope["version"], 1, "{envelope}");
        let sealed_key = BASE64.decode(envelope["key"].as_str().unwrap()).unwrap();
        let aes_key = self.key.decrypt(Pkcs1v15Encrypt, &sealed_key).unwrap();
        let cipher =
            PaddedBlockDecryptingKey::ecb_pkcs7(UnboundCipherKey::new(&AES_128, &aes_key).unwrap())
                .unwrap();
        let mut sealed = BASE64
            .decode(envelope["conn_info"].as_str().unwrap())
            .unwrap();
        let context = aws_lc_rs::cipher::DecryptionContext::None;
        serde_json::from_slice(cipher.decrypt(&mut sealed, context).unwrap()).unwrap()
    }
}

/// Sends one request to the launcher's communication port, as EG does
/// (write, close); whether the port took it.
fn comm(port: u64, request: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port as u16)) else {
        return false;
    };
    stream.write_all(request.as_bytes()).is_ok()
}

/// Runs `cells` through jupyter_client (the fat image's) against the
/// served ports; an `"INTERRUPT"` cell runs a sleep and asks the
/// communication port for SIGINT a second in. Returns one result per cell:
/// status, stdout, error name (`no reply` past `timeout_secs`).
fn client(
    connection: &serde_json::Value,
    cells: &[&str],
    timeout_secs: u32,
) -> Vec<serde_json::Value> {
    const SCRIPT: &str = r#"
timeout = secs
def interrupt():
    time.sleep(1)
    with socket.create_connection(("127.0.0.1", comm_port)) as s:
        s.sendall(json.dumps({"signum": 2}).encode())
results = []
for code in cells:
    if code == "INTERRUPT":
        threading.Thread(target=interrupt).start()
        code = "import time; time.sleep(60)"
    out = []
    def hook(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
    try:
        reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        c = reply["content"]
        results.append({"status": c["status"], "stdout": "".join(out), "ename": c.get("ename")})
    except Exception as e:
        results.append({"status": "no reply", "stdout": "".join(out), "ename": type(e).__name__})
print(json.dumps(results))
"#;
    let results = fat_python(SCRIPT, connection, cells, timeout_secs);
    serde_json::from_value(results).unwrap()
}

/// What every client script starts with: `info` (the served connection),
/// `cells`, `secs`, `comm_port`, and `kc`, a jupyter_client ready on the
/// served ports.
const CLIENT_PREAMBLE: &str = r#"
import json, socket, sys, threading, time, zmq
from jupyter_client import BlockingKernelClient
info = json.loads(sys.argv[1]); cells = json.loads(sys.argv[2]); secs = float(sys.argv[3])
comm_port = info.pop("comm_port")
for k in ("pid", "pgid", "kernel_id"):
    info.pop(k, None)
info["ip"] = "127.0.0.1"
kc = BlockingKernelClient()
kc.load_connection_info(info)
kc.start_channels()
kc.wait_for_ready(timeout=60)
"#;

/// Runs `script` after [`CLIENT_PREAMBLE`] in the fat image's Python with
/// the connection, the cells and a number of seconds; the JSON its last
/// line prints.
fn fat_python(
    script: &str,
    connection: &serde_json::Value,
    cells: &[&str],
    secs: u32,
) -> serde_json::Value {
    let python = common::image(ImageName::Fat).python();
    let out = Command::new(python)
        .args([
            "-c",
            &format!("{CLIENT_PREAMBLE}{script}"),
            &connection.to_string(),
        ])
        .arg(serde_json::to_string(cells).unwrap())
        .arg(secs.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Jupyter client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap()
}

/// Runs `cells` with jupyter_client's shell channel and reads the IOPub
/// port raw (jupyter_client would raise on a bad signature): for each cell,
/// the IOPub messages answering it, each with its type, whether its
/// signature is valid under the kernel's key, and its content. A cell's
/// reading stops at the host's reading after its `idle` or its death, or
/// after `wait_secs`.
fn iopub_of_cells(
    connection: &serde_json::Value,
    cells: &[&str],
    wait_secs: u32,
) -> Vec<Vec<serde_json::Value>> {
    const SCRIPT: &str = r#"
sub = zmq.Context.instance().socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect("tcp://127.0.0.1:%d" % info["iopub_port"])
# Subscribed once the kernel's status for a request reaches this socket.
deadline = time.time() + 60
while time.time() < deadline:
    kc.kernel_info()
    if sub.poll(500):
        break
while sub.poll(200):
    sub.recv_multipart()
def parsed(frame):
    try:
        return json.loads(frame)
    except Exception:
        return None
results = []
for code in cells:
    msg_id = kc.execute(code)
    seen = []
    deadline = time.time() + secs
    while time.time() < deadline:
        if not sub.poll(100):
            continue
        frames = sub.recv_multipart()
        d = frames.index(b"<IDS|MSG>")
        parts = frames[d + 2:d + 6]
        header, parent, content = parsed(parts[0]), parsed(parts[1]) or {}, parsed(parts[3])
        dead = (header or {}).get("msg_type") == "retrace_host_evidence" \
            and (content or {}).get("moment") == "dead"
        # A kernel killed before its busy went out dies answering an earlier request.
        if parent.get("msg_id") != msg_id and not dead:
            continue
        seen.append({
            "msg_type": (header or {}).get("msg_type", "?"),
            "valid": kc.session.sign(parts) == frames[d + 1],
            "content": content,
        })
        last = seen[-1]
        if last["valid"] and last["msg_type"] == "retrace_host_evidence" \
                and last["content"]["moment"] in ("idle", "dead"):
            break
    results.append(seen)
print(json.dumps(results))
"#;
    serde_json::from_value(fat_python(SCRIPT, connection, cells, wait_secs)).unwrap()
}

/// The host's readings among `messages` whose signature is valid.
fn host_readings(messages: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    messages
        .iter()
        .filter(|m| m["msg_type"] == "retrace_host_evidence" && m["valid"] == true)
        .map(|m| &m["content"])
        .collect()
}

/// Waits for the launcher to end; its report line and its stderr.
fn ended(mut launcher: Child, secs: u64) -> (serde_json::Value, String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while launcher.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = launcher.kill();
            let out = launcher.wait_with_output().unwrap();
            panic!(
                "the launcher did not end in {secs} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = launcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "launcher failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(stdout.trim().lines().last().unwrap_or("{}"))
        .unwrap_or_else(|e| panic!("no report line ({e}): {stdout}\n{stderr}"));
    (report, stderr)
}

#[test]
fn serves_a_confined_kernel_to_the_gateway_and_leaves_nothing() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let gateway = GatewaySide::new();
    let kernel_id = uuid::Uuid::new_v4().to_string();
    let launcher = gateway.launch(&kernel_id, &["--memory", "300M"]);
    let launcher_pid = launcher.id();
    let connection = gateway.connection();
    assert_eq!(connection["kernel_id"], kernel_id.as_str());
    assert_eq!(connection["transport"], "tcp");
    assert_eq!(connection["pid"], launcher_pid, "EG signals the launcher");
    assert_eq!(connection["pgid"], launcher_pid, "its own process group");
    let comm_port = connection["comm_port"].as_u64().unwrap();
    for channel in ["shell", "iopub", "stdin", "control", "hb"] {
        assert!(connection[format!("{channel}_port")].as_u64().unwrap() > 0);
    }

    // Confined as a local kernel: its own uid, the memory limit asked for.
    let confined = common::confinement::of_kernel_under(launcher_pid);
    let uid = confined.uid;
    assert_ne!(uid, 0, "the kernel runs as a uid of its own");
    assert_eq!(confined.memory_limit, 300 << 20);

    let results = client(
        &connection,
        &["x = 41", "print(x + 1)", "INTERRUPT", "print('after')"],
        30,
    );
    assert_eq!(results[0]["status"], "ok", "{results:?}");
    assert_eq!(
        results[1]["stdout"], "42\n",
        "state across cells: {results:?}"
    );
    assert_eq!(results[2]["ename"], "KeyboardInterrupt", "{results:?}");
    assert_eq!(results[3]["stdout"], "after\n", "{results:?}");

    assert!(comm(comm_port, r#"{"signum": 0}"#), "the poll is answered");
    assert!(comm(comm_port, r#"{"shutdown": 1}"#));
    let (report, stderr) = ended(launcher, 30);
    assert_eq!(report["ended"], "shutdown by the gateway", "{report}");
    assert_eq!(report["uid"], uid);
    assert_eq!(report["counters"]["oom_kills"], 0, "{report}");
    assert!(stderr.contains(&kernel_id), "{stderr}");
    assert!(!comm(comm_port, r#"{"signum": 0}"#), "the port is closed");
    assert!(
        common::confinement::descendants(launcher_pid).is_empty(),
        "nothing of the kernel is left"
    );
    assert!(!confined.memory_cgroup.exists(), "its cgroup is removed");
}

/// A launcher with `memory` started as EG starts it: the process, the
/// connection it sent, its communication port.
fn launched(memory: &str) -> (Child, serde_json::Value, u64) {
    launched_with(&["--memory", memory])
}

fn launched_with(flags: &[&str]) -> (Child, serde_json::Value, u64) {
    common::image(ImageName::Fat);
    let gateway = GatewaySide::new();
    let kernel_id = uuid::Uuid::new_v4().to_string();
    let launcher = gateway.launch(&kernel_id, flags);
    let connection = gateway.connection();
    let comm_port = connection["comm_port"].as_u64().unwrap();
    (launcher, connection, comm_port)
}

#[test]
fn an_oom_kill_is_reported_from_the_hosts_counters() {
    if common::lacks_root() {
        return;
    }
    let (launcher, connection, comm_port) = launched("200M");
    // Bytes written: every page touched.
    let cells = iopub_of_cells(&connection, &["x = b'x' * (1 << 30)"], 20);
    // The launcher's last reading reaches the client before the launcher ends.
    let readings = host_readings(&cells[0]);
    let last = readings
        .last()
        .unwrap_or_else(|| panic!("no host reading: {:#}", serde_json::json!(cells)));
    assert_eq!(last["moment"], "dead", "{:#}", serde_json::json!(cells));
    assert_eq!(last["exit"]["signal"], 9, "{last:#}");
    assert!(
        last["counters"]["oom_kills"].as_u64().unwrap() >= 1,
        "the OOM kill is in the host's reading: {last:#}"
    );
    assert!(last["kernel_uid"].as_u64().unwrap() > 0, "{last:#}");
    let (report, _) = ended(launcher, 30);
    assert_eq!(report["ended"], "the kernel exited", "{report}");
    assert!(
        report["counters"]["oom_kills"].as_u64().unwrap() >= 1,
        "the OOM kill is in the host's counters: {report}"
    );
    assert!(!comm(comm_port, r#"{"signum": 0}"#), "the port is closed");
}

#[test]
fn host_readings_follow_each_cell_and_the_kernel_cannot_forge_one() {
    if common::lacks_root() {
        return;
    }
    let (launcher, connection, comm_port) = launched("300M");
    // The kernel holds the key: it signs a reading of its own on its IOPub
    // socket, and prints one.
    const FORGE: &str = r#"
import json
k = get_ipython().kernel
fake = {"moment": "idle", "counters": {"oom_kills": 0, "pids_max_events": 0,
        "cpu_usage_usec": 0, "nr_throttled": 0}, "exit": None, "kernel_uid": 1,
        "launcher_pid": 1, "launcher": "forged"}
parent = k.get_parent() if hasattr(k, "get_parent") else k._parent_header
k.session.send(k.iopub_socket, "retrace_host_evidence", fake, parent=parent)
print(json.dumps({"msg_type": "retrace_host_evidence", "content": fake}))
"#;
    let cells = iopub_of_cells(&connection, &["x = sum(range(10**7))", FORGE], 20);
    let all = serde_json::json!(cells);

    let cell = host_readings(&cells[0]);
    let moments: Vec<_> = cell.iter().map(|r| r["moment"].as_str()).collect();
    assert_eq!(moments, [Some("busy"), Some("idle")], "{all:#}");
    assert!(cell[1]["kernel_uid"].as_u64().unwrap() > 0, "{all:#}");
    assert!(cell[1]["exit"].is_null(), "{all:#}");
    let cpu = |r: &serde_json::Value| r["counters"]["cpu_usage_usec"].as_u64().unwrap();
    // The host's CPU counter may trail a task still on its CPU by a tick
    // (cgroup accounting): compared over the two cells, not within one.
    assert!(cpu(cell[1]) >= cpu(cell[0]), "{all:#}");
    assert!(cell[1]["launcher"]
        .as_str()
        .unwrap()
        .starts_with("retrace "));

    // The forged reading never arrives: nothing of it goes on (a gateway's
    // server fails on a message whose signature does not match); what the
    // cell printed does.
    let forged = cells[1]
        .iter()
        .filter(|m| m["content"]["launcher"] == "forged")
        .count();
    assert_eq!(forged, 0, "{all:#}");
    let printed = cells[1].iter().any(|m| {
        m["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("forged"))
    });
    assert!(printed, "{all:#}");
    let readings = host_readings(&cells[1]);
    assert!(
        readings.iter().all(|r| r["launcher"] != "forged"),
        "{all:#}"
    );
    assert_eq!(readings.len(), 2, "busy and idle of the launcher: {all:#}");
    assert!(
        cpu(readings[1]) > cpu(cell[0]),
        "the cells' CPU time: {all:#}"
    );

    assert!(comm(comm_port, r#"{"shutdown": 1}"#));
    let (report, _) = ended(launcher, 30);
    assert_eq!(report["ended"], "shutdown by the gateway", "{report}");
}

/// What a client cannot watch through a gateway the host does: a cell past
/// its CPU time is interrupted there and its reading counts the stop; the
/// reading after a cell's end says whether the main thread was back, and a
/// forged `idle` is caught.
#[test]
fn the_host_stops_a_runaway_cell_and_checks_a_cells_end() {
    if common::lacks_root() {
        return;
    }
    let (launcher, connection, comm_port) = launched_with(&["--cpu-time", "1s"]);
    const FORGED_IDLE: &str = r#"
import time
k = get_ipython().kernel
k.session.send(k.iopub_socket, 'status', {'execution_state': 'idle'}, parent=k.get_parent('shell'))
time.sleep(5)
"#;
    let cells = iopub_of_cells(
        &connection,
        &["while True: pass", "print(6 * 7)", FORGED_IDLE],
        20,
    );
    let all = serde_json::json!(cells);
    let end = |cell: &[serde_json::Value]| -> serde_json::Value {
        host_readings(cell)
            .into_iter()
            .rfind(|r| r["moment"] == "idle")
            .cloned()
            .unwrap_or_else(|| panic!("no reading after the cell: {all:#}"))
    };

    // Stopped on the host after its second of CPU, by an interrupt.
    let runaway = end(&cells[0]);
    assert_eq!(runaway["cpu_stops"], 1, "{all:#}");
    assert!(
        cells[0]
            .iter()
            .any(|m| m["content"]["ename"] == "KeyboardInterrupt"),
        "{all:#}"
    );
    assert_eq!(runaway["main_thread_back"], true, "{all:#}");
    // The next cell runs in the same kernel, within its limits.
    let next = end(&cells[1]);
    assert_eq!(next["cpu_stops"], 1, "{all:#}");
    assert_eq!(next["main_thread_back"], true, "{all:#}");
    assert!(
        cells[1].iter().any(|m| m["content"]["text"] == "42\n"),
        "{all:#}"
    );
    // The kernel's own `idle` came while its main thread still slept: the
    // reading after it says the end was forged.
    let forged = host_readings(&cells[2]);
    let after_idle = forged
        .iter()
        .find(|r| r["moment"] == "idle")
        .unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(after_idle["main_thread_back"], false, "{all:#}");
    assert_eq!(after_idle["sees_main_thread"], true, "{all:#}");

    assert!(comm(comm_port, r#"{"shutdown": 1}"#));
    let (report, _) = ended(launcher, 30);
    assert_eq!(report["ended"], "shutdown by the gateway", "{report}");
}
