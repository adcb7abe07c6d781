//! `podwright check`: load, default and validate a manifest and print the plan of each pod.

use crate::{exit, load, output};

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: String,
}

pub fn check(file: &str) -> u8 {
    let pods = match load(file) {
        Ok(p) => p,
        Err(code) => return code,
    };
    for pod in &pods {
        println!("{}", output::describe_plan(pod));
    }
    exit::SUCCEEDED
}
