//! `podwright check`: load, default and validate a manifest and print the plan of each pod.

use crate::{exit, load, output};

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: String,
}

pub fn check(file: &str) -> u8 {
    let loaded = match load(file) {
        Ok(l) => l,
        Err(code) => return code,
    };
    for (pod, _warnings) in &loaded.pods {
        println!("{}", output::describe_plan(pod));
    }
    exit::SUCCEEDED
}
