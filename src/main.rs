mod cli;

fn main() {
    // The kernel's init is this binary in a hidden mode; it must run before
    // any thread (the async runtime) exists, because it forks.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| a == retrace::sandbox::init::INIT_ARG)
    {
        let spec = args.next().unwrap_or_default();
        retrace::sandbox::init::main(std::path::Path::new(&spec));
    }
    quiet_on_closed_pipe();
    let code = cli::main();
    // Nothing of a command may outlive it: the image zygotes end here.
    retrace::kernel::zygote::shutdown_all();
    std::process::exit(code);
}

/// `retrace … | head`: once the reader has gone, end the way other Unix
/// tools do (killed by SIGPIPE, no message) instead of panicking in
/// `println!`. SIGPIPE itself stays ignored, as Rust sets it: the harness
/// writes to kernel sockets that hostile code may close, and those writes
/// must fail with EPIPE, not kill it.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or("");
        let printing = message.starts_with("failed printing to stdout")
            || message.starts_with("failed printing to stderr");
        if printing && message.contains(&format!("os error {}", libc::EPIPE)) {
            die_of_sigpipe();
        }
        default(info);
    }));
}

/// Terminates the whole process with SIGPIPE (exit status 141 in a shell).
#[allow(unsafe_code)]
fn die_of_sigpipe() -> ! {
    // SAFETY: restoring a signal's default action and raising it touch no
    // memory of this process; the process ends at the raise.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}
