//! The docs (`docs/src`) keep up with the command line and the config reader: every flag of every
//! command, with its default, is on that command's page and on the configuration page, every
//! command has its page, and every `KubeletConfiguration` field the config reader accepts is on
//! the configuration page. A flag or field added without its docs fails here.

use clap::CommandFactory;
use std::path::Path;

fn page(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `text` has `word` where neither side continues it (so `--tls` is not found in
/// `--tls-cert-file`, nor `-v` in `--v`).
fn mentions(text: &str, word: &str) -> bool {
    let continues = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(continues)
            && !text[i + word.len()..].chars().next().is_some_and(continues)
    })
}

/// How the docs name each argument of `command` (not those of its subcommands): its long
/// flag, else its short one, else (a positional) its value name; with its defaults.
fn arguments(command: &clap::Command) -> Vec<(String, Vec<String>)> {
    command
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .map(|a| {
            let name = match (a.get_long(), a.get_short()) {
                (Some(long), _) => format!("--{long}"),
                (None, Some(short)) => format!("-{short}"),
                (None, None) => a
                    .get_value_names()
                    .and_then(|names| names.first())
                    .map_or_else(|| a.get_id().as_str().to_uppercase(), |n| n.to_string()),
            };
            let defaults = a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            (name, defaults)
        })
        .collect()
}

/// Every problem of `text` (the page `page`) with the arguments of `command`.
fn undocumented(page: &str, text: &str, command: &clap::Command, with_defaults: bool) -> Vec<String> {
    let mut missing = Vec::new();
    for (name, defaults) in arguments(command) {
        if !mentions(text, &name) {
            missing.push(format!("{page}: no {name} (of `{}`)", command.get_name()));
        }
        for default in defaults.iter().filter(|_| with_defaults) {
            if !text.contains(&format!("`{default}`")) {
                missing.push(format!("{page}: no default `{default}` of {name}"));
            }
        }
    }
    missing
}

#[test]
fn every_command_has_a_page_naming_each_of_its_flags_and_their_defaults() {
    let cli = crate::Cli::command();
    let mut missing = Vec::new();
    let index = page("commands/index.md");
    // The global options: on the commands' overview.
    missing.extend(undocumented("commands/index.md", &index, &cli, true));
    for command in cli.get_subcommands() {
        let name = format!("commands/{}.md", command.get_name());
        let text = page(&name);
        if !index.contains(&format!("({}.md)", command.get_name())) {
            missing.push(format!("commands/index.md: no link to {name}"));
        }
        missing.extend(undocumented(&name, &text, command, true));
        // Subcommands (`runtime start`, ...) are on their parent's page.
        for sub in command.get_subcommands() {
            if !text.contains(&format!("`{}`", sub.get_name())) {
                missing.push(format!("{name}: no `{}`", sub.get_name()));
            }
            missing.extend(undocumented(&name, &text, sub, true));
        }
    }
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}

#[test]
fn the_configuration_page_names_every_flag_and_every_config_field() {
    let cli = crate::Cli::command();
    let text = page("configuration.md");
    let mut missing = undocumented("configuration.md", &text, &cli, false);
    for command in cli.get_subcommands() {
        missing.extend(undocumented("configuration.md", &text, command, false));
        for sub in command.get_subcommands() {
            missing.extend(undocumented("configuration.md", &text, sub, false));
        }
    }
    // The fields the reader accepts, as serde lists them for an unknown one.
    let refusal =
        podwright_api::yaml::from_str::<crate::config::ServeConfig>("notAField: 1\n").unwrap_err().to_string();
    let expected = refusal.split_once("expected one of ").map(|(_, list)| list).unwrap_or_default();
    let fields: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    assert!(fields.contains(&"clusterDNS") && fields.contains(&"imageMaximumGCAge"), "{refusal}");
    for field in fields {
        if !text.contains(&format!("| `{field}` |")) {
            missing.push(format!("configuration.md: no row for the config field `{field}`"));
        }
    }
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}

#[test]
fn mentions_finds_whole_flags_only() {
    assert!(mentions("`--tls` and more", "--tls"));
    assert!(!mentions("`--tls-cert-file`", "--tls"));
    assert!(!mentions("--v N", "-v"));
    assert!(mentions("`-v N`, `--v N`", "-v"));
}
