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
import json, socket, sys, threading, time
from jupyter_client import BlockingKernelClient
info = json.loads(sys.argv[1]); cells = json.loads(sys.argv[2]); timeout = float(sys.argv[3])
comm_port = info.pop("comm_port")
for k in ("pid", "pgid", "kernel_id"):
    info.pop(k, None)
info["ip"] = "127.0.0.1"
kc = BlockingKernelClient()
kc.load_connection_info(info)
kc.start_channels()
kc.wait_for_ready(timeout=60)
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
    let python = common::image(ImageName::Fat).python();
    let out = Command::new(python)
        .args(["-c", SCRIPT, &connection.to_string()])
        .arg(serde_json::to_string(cells).unwrap())
        .arg(timeout_secs.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "jupyter_client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap()
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

#[test]
fn an_oom_kill_is_reported_from_the_hosts_counters() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let gateway = GatewaySide::new();
    let kernel_id = uuid::Uuid::new_v4().to_string();
    let launcher = gateway.launch(&kernel_id, &["--memory", "200M"]);
    let connection = gateway.connection();
    let comm_port = connection["comm_port"].as_u64().unwrap();
    // Bytes written: every page touched.
    let results = client(&connection, &["x = b'x' * (1 << 30)"], 10);
    assert_eq!(results[0]["status"], "no reply", "{results:?}");
    let (report, _) = ended(launcher, 30);
    assert_eq!(report["ended"], "the kernel exited", "{report}");
    assert!(
        report["counters"]["oom_kills"].as_u64().unwrap() >= 1,
        "the OOM kill is in the host's counters: {report}"
    );
    assert!(!comm(comm_port, r#"{"signum": 0}"#), "the port is closed");
}
