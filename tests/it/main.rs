//! The integration tests, one crate (one link of the library instead of one
//! per file), one module per area. `fast` needs no Python image, no root and
//! no server outside this process: `cargo test --lib --bins && cargo test
//! --test it fast::` is the quick loop; `cargo test` runs everything
//! (tests/README.md, which defines the three tiers).
//!
//! Two files stay separate binaries because they change state of their
//! whole process: `tests/exit_leaves_nothing.rs` (a child subreaper) and
//! `tests/kernel_zygote.rs` (kills and shuts down the process's zygotes).

#[path = "../common/mod.rs"]
mod common;

pub(crate) mod fast {
    mod cli_limits;
    mod cli_version;
    mod docs;
    mod golden_reports;
    mod model_openai;
    mod repair_tracebacks;
    pub(crate) mod schemas;
    mod task_loading;
    mod tiers;
}

mod builtin_datasets;
mod cell_outputs;
mod cgroup_real;
mod cli_doctor;
mod cli_exec;
mod compare_runs;
mod containment;
mod crash_consistency;
mod dynamic_install;
mod dynamic_scan;
mod dynamic_strategy;
mod enterprise_gateway;
mod enterprise_gateway_fixture;
mod export_formats;
mod false_alarm;
mod fixed_image;
mod gateway;
mod gateway_fixture;
mod golden_run;
mod home_full;
mod hostile_endpoint;
mod hostile_inputs;
mod inspect_tools;
mod jail_resources;
mod kernel_answer;
mod kernel_env;
mod kernel_launcher;
mod kernel_restart;
mod kernel_session;
mod kernel_text;
mod local_model;
mod math_checker;
mod pyenv_image;
mod repair_masking;
mod report_html;
mod round0_from;
mod run_arms;
mod run_execution;
mod run_library;
mod run_loop;
mod sandbox_corpus;
mod task_files;
mod task_parquet;
mod wheel;
