//! `podwright man`: the man pages of podwright and of each of its commands, made by clap_mangen
//! from the command line's own definition, so they cannot fall behind it.

use crate::exit;
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ManArgs {
    /// Write `podwright.1` and a page per command (`podwright-run.1`, `podwright-runtime-start.1`,
    /// ...) into this directory, made if missing; without it, print `podwright.1`.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

pub fn man(args: &ManArgs, cli: clap::Command) -> u8 {
    let written = match &args.out_dir {
        Some(dir) => write_pages(cli, dir).map_err(|e| format!("{}: {e}", dir.display())),
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cli)
                .render(&mut page)
                .and_then(|()| std::io::stdout().lock().write_all(&page))
                .map_err(|e| format!("cannot write the man page: {e}"))
        }
    };
    match written {
        Ok(()) => exit::SUCCEEDED,
        Err(e) => {
            eprintln!("podwright: {e}");
            exit::FAILED
        }
    }
}

fn write_pages(cli: clap::Command, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(cli, dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn there_is_a_page_for_podwright_and_each_of_its_commands() {
        let dir = std::env::temp_dir().join(format!("podwright-man-{}", std::process::id()));
        write_pages(crate::Cli::command(), &dir).unwrap();
        let mut pages: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        pages.sort();
        let serve = std::fs::read_to_string(dir.join("podwright-serve.1")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let expected = [
            "podwright-check.1",
            "podwright-completion.1",
            "podwright-kubeconfig.1",
            "podwright-man.1",
            "podwright-run.1",
            "podwright-runtime-clean.1",
            "podwright-runtime-start.1",
            "podwright-runtime-status.1",
            "podwright-runtime-stop.1",
            "podwright-runtime.1",
            "podwright-serve.1",
            "podwright-timeline.1",
            "podwright.1",
        ];
        assert_eq!(pages, expected);
        let title = format!(".TH podwright-serve 1  \"serve {}\"", env!("CARGO_PKG_VERSION"));
        assert!(serve.contains(&title), "{serve}");
        assert!(serve.contains("pod\\-manifest\\-path"), "{serve}");
    }
}
