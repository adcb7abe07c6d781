//! `podwright completion SHELL`: the shell's completion script for every command and flag, made
//! by clap_complete from the command line's own definition, so it cannot fall behind it.

use crate::exit;
use clap::Args;
use clap_complete::Shell;
use std::io::Write;

#[derive(Args)]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the completion script of `cli` for the shell asked for.
pub fn completion(args: &CompletionArgs, mut cli: clap::Command) -> u8 {
    let script = script(args.shell, &mut cli);
    match std::io::stdout().lock().write_all(&script) {
        Ok(()) => exit::SUCCEEDED,
        Err(e) => {
            eprintln!("podwright: cannot write the completion script: {e}");
            exit::FAILED
        }
    }
}

fn script(shell: Shell, cli: &mut clap::Command) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, cli, "podwright", &mut script);
    script
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_shell_completes_every_command_and_their_flags() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(script(shell, &mut crate::Cli::command())).unwrap();
            for command in ["run", "check", "serve", "kubeconfig", "timeline", "runtime", "completion", "man"] {
                assert!(text.contains(command), "{shell}: no {command}");
            }
            // A flag of each level: the runtime's, serve's own, a runtime action's parent's.
            for flag in ["root-dir", "pod-manifest-path", "image-credential-provider-config", "out-dir"] {
                assert!(text.contains(flag), "{shell}: no --{flag}");
            }
        }
    }
}
