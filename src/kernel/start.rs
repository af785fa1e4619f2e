//! Starting a kernel, in order: its directories, its connection file with
//! `ipc://` sockets and a random key, a clean environment, its process
//! (forked by the image's zygote or cold), then the handshake and
//! retrace's probe. Restarts go through the same steps in the same jail.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jupyter_protocol::connection_info::{ConnectionInfo, Transport};

use super::capture::OutputCap;
use super::client::{wait_for_sockets, Channels, WireCap};
use super::execution::ms;
use super::layout::lock_runtime_dir;
use super::options::{KernelBanner, KernelOptions};
use super::probe::{probe_from_home, PROBE_MARKER};
use super::process::{AdoptError, KernelProcess};
use super::requests::{handshake, install_probe};
use super::spec::{launch_command, KernelSpec};
use super::zygote::{StartPath, Zygote};
use super::KernelError;
use crate::sandbox::{Jail, KernelLayout};
use crate::util::{nofollow, IoContext};

/// A fresh connection description: ipc sockets in the runtime directory and
/// a random HMAC key.
pub fn connection_info(layout: &KernelLayout) -> ConnectionInfo {
    ConnectionInfo {
        transport: Transport::IPC,
        ip: layout.runtime_dir.join("k").to_string_lossy().into_owned(),
        stdin_port: 1,
        control_port: 2,
        hb_port: 3,
        shell_port: 4,
        iopub_port: 5,
        signature_scheme: "hmac-sha256".into(),
        key: format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
        kernel_name: Some("retrace".into()),
    }
}

/// Socket files the kernel creates when it binds; the client waits for them.
pub fn socket_paths(info: &ConnectionInfo) -> Vec<PathBuf> {
    [info.shell_port, info.iopub_port, info.control_port]
        .iter()
        .map(|port| PathBuf::from(format!("{}-{}", info.ip, port)))
        .collect()
}

/// Writes the connection file, readable only by its owner. The kernel user
/// can write the runtime directory: whatever has the file's name there (a
/// planted symlink to a host file) is removed, never written through.
pub fn write_connection_file(
    layout: &KernelLayout,
    info: &ConnectionInfo,
) -> Result<PathBuf, KernelError> {
    let path = layout.runtime_dir.join("kernel.json");
    let text = serde_json::to_string_pretty(info).map_err(|source| KernelError::Encode {
        what: "the connection file",
        source,
    })?;
    nofollow::remove_entry(&path)
        .and_then(|()| nofollow::create_new(&path, 0o600))
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .at("writing", &path)?;
    Ok(path)
}

/// Resolves once the process has exited (or its waiter is gone).
pub(super) async fn wait_exit(
    exit: &mut tokio::sync::watch::Receiver<Option<crate::sandbox::ExitInfo>>,
) {
    let _ = exit.wait_for(|e| e.is_some()).await;
}

/// Runs blocking work (a zygote's answer) without stalling the other
/// tasks of a multi-threaded runtime.
pub(super) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Starts the kernel process: forked by `zygote` when there is one and it
/// serves, else cold.
async fn start_process(
    jail: &dyn Jail,
    command: &crate::sandbox::LaunchCommand,
    layout: &KernelLayout,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, StartPath), KernelError> {
    let Some(zygote) = zygote else {
        return Ok((
            KernelProcess::spawn(jail, command, layout)?,
            StartPath::Cold,
        ));
    };
    let fork = |plan: &crate::sandbox::ForkPlan, pid1: i32| blocking(|| zygote.fork(plan, pid1));
    // Whatever the attempt started (the jail's init, half a kernel) goes
    // before the cold start in the same jail.
    let unserved = |reason: String| {
        blocking(|| jail.kill_all(None));
        reason
    };
    let reason =
        match KernelProcess::spawn_adopted(jail, command, layout, options.startup_timeout, fork)
            .await
        {
            Ok(Some(process)) => return Ok((process, StartPath::Zygote)),
            Ok(None) => "this sandbox cannot adopt a forked kernel".to_string(),
            Err(AdoptError::Jail(e)) => return Err(e),
            Err(AdoptError::NoPid1) => {
                unserved("the jail's PID 1 is not among its processes".into())
            }
            Err(AdoptError::Zygote(e)) => unserved(e.to_string()),
        };
    tracing::warn!(kernel = %layout.id, reason = %reason, "the zygote cannot serve; starting cold");
    let process = KernelProcess::spawn(jail, command, layout)?;
    Ok((process, StartPath::Fallback(reason)))
}

/// Starts the kernel process in its jail and waits for `kernel_info_reply`.
pub(super) async fn launch(
    spec: &KernelSpec,
    layout: &KernelLayout,
    jail: &dyn Jail,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, Channels, KernelBanner, StartPath), KernelError> {
    // Until the kernel is ready: no task code runs before.
    let _favoured = jail.favour_start();
    let timeout = options.startup_timeout;
    let wire = wire_cap(spec, layout, &options.output_cap)?;
    let info = connection_info(layout);
    for path in socket_paths(&info) {
        let _ = std::fs::remove_file(path);
    }
    let conn_file = write_connection_file(layout, &info)?;
    let mut command = launch_command(spec, layout, &conn_file);
    // The user's variables, on every start of this kernel (cold, forked,
    // restarted); never in the zygote's own environment.
    command
        .env
        .extend(options.env.pairs().map(|(k, v)| (k.into(), v.into())));
    let (process, path) = start_process(jail, &command, layout, options, zygote).await?;
    let mut exit = process.exit.clone();
    let handshake = async {
        // Where a start spends its time, for `-vv` and the start benchmarks.
        let began = Instant::now();
        wait_for_sockets(&socket_paths(&info)).await;
        let sockets = began.elapsed();
        let mut channels = Channels::connect(&info, &wire).await?;
        let mut banner = handshake(&mut channels).await?;
        let answered = began.elapsed();
        lock_runtime_dir(layout)?;
        // Taken away whatever the path: a forked kernel killed for a cold
        // fallback in the same jail may have left one.
        let marked = take_probe_marker(layout)?;
        banner.probe_preinstalled = path == StartPath::Zygote && marked;
        if !banner.probe_preinstalled {
            install_probe(&mut channels, &probe_from_home()).await?;
        }
        tracing::debug!(
            kernel = %layout.id,
            sockets_ms = ms(sockets),
            kernel_info_ms = ms(answered - sockets),
            probe_ms = ms(began.elapsed() - answered),
            probe_preinstalled = banner.probe_preinstalled,
            "kernel answering"
        );
        Ok::<_, KernelError>((channels, banner))
    };
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, handshake) => match r {
            Ok(r) => r,
            Err(_) => Err(KernelError::Startup {
                message: format!("no kernel_info_reply within {:?}", timeout),
                stderr: process.stderr_tail(),
            }),
        },
        _ = wait_exit(&mut exit) => {
            // Let the drain tasks collect the last words.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(KernelError::Startup {
                message: format!("the kernel process exited during startup ({:?})", process.exited()),
                stderr: process.stderr_tail(),
            })
        }
    };
    match result {
        Ok((channels, banner)) => {
            let mut process = process;
            if options.verify_completion {
                process.learn_main_thread(jail).await;
            }
            Ok((process, channels, banner, path))
        }
        Err(e) => {
            jail.kill_all(Some(process.pid));
            Err(e)
        }
    }
}

/// The relays of a kernel listen in a directory of the harness beside the
/// kernel's own (which is not bound into the kernel's view), and let no
/// message through that is larger than the output cap (with room for the
/// envelope) or 4 MiB, whichever is more: anything larger would exceed the
/// cap anyway.
fn wire_cap(
    spec: &KernelSpec,
    layout: &KernelLayout,
    cap: &OutputCap,
) -> Result<WireCap, KernelError> {
    let dir = spec.root.join(&layout.id).join("wire");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .at("creating", &dir)?;
    Ok(WireCap {
        dir,
        max_message: max_message(cap),
    })
}

/// The largest message a kernel with output cap `cap` may send.
pub(super) fn max_message(cap: &OutputCap) -> u64 {
    cap.bytes.saturating_add(64 * 1024).max(4 << 20)
}

/// Whether a forked kernel installed retrace's probe itself before it
/// answered (zygote.py's `install_probe`, the same steps as the installing
/// cell): it left [`PROBE_MARKER`] in its runtime directory, which only
/// retrace's code in the kernel could write (no task code has run, and the
/// directory is locked now). The marker is removed, so the kernel's view
/// ends as a cold kernel's. Without it, the cell installs the probe.
fn take_probe_marker(layout: &KernelLayout) -> Result<bool, KernelError> {
    let marker = layout.runtime_dir.join(PROBE_MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(_) => nofollow::remove_entry(&marker)
            .map(|()| true)
            .at("removing", &marker)
            .map_err(KernelError::from),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(KernelError::Io(crate::util::IoError::new(
            format!("reading {}", marker.display()),
            e,
        ))),
    }
}
