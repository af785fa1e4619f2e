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
    std::process::exit(cli::main());
}
