//! `retrace doctor [--json]`: what this host offers a confined run.

use clap::Args;

use super::Failure;

#[derive(Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON (`can_run`, and each check's name, status,
    /// detail and fix).
    #[arg(long)]
    json: bool,
}

/// Exit 0 when a confined run can work (warnings allowed), 1 when not.
pub async fn run(args: DoctorArgs) -> Result<i32, Failure> {
    let report = tokio::task::spawn_blocking(retrace::doctor::run)
        .await
        .map_err(Failure::infra)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(Failure::infra)?
        );
    } else {
        print!("{}", report.render());
    }
    Ok(report.exit_code())
}
