//! `podwright completion` and `podwright man` from the release binary: bash completes commands,
//! flags and runtime actions with the script it prints, and the man pages are written per
//! command.

use podwright_e2e::*;

/// What bash's completion offers for the words typed so far (the last one being completed).
fn bash_completes(script: &std::path::Path, words: &[&str]) -> String {
    let cur = words.last().unwrap();
    let prev = words[words.len() - 2];
    let program = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE=\"{}\"; COMP_POINT=${{#COMP_LINE}}; \
         _podwright podwright {cur} {prev}; echo \"${{COMPREPLY[*]}}\"",
        script.display(),
        words.join(" "),
        words.len() - 1,
        words.join(" "),
    );
    let out = std::process::Command::new("bash").args(["-c", &program]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn bash_completes_with_the_script_podwright_prints() {
    let out = podwright(&["completion", "bash"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let script = std::env::temp_dir().join(format!("podwright-e2e-completion-{}.bash", std::process::id()));
    std::fs::write(&script, &out.stdout).unwrap();
    let completes = |words: &[&str]| bash_completes(&script, words);
    assert_eq!(completes(&["podwright", "se"]), "serve");
    assert_eq!(completes(&["podwright", "serve", "--pod-m"]), "--pod-manifest-path");
    assert_eq!(completes(&["podwright", "runtime", "st"]), "start status stop");
    std::fs::remove_file(&script).unwrap();
    for shell in ["zsh", "fish"] {
        let out = podwright(&["completion", shell]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("pod-manifest-path"), "{shell}:\n{}", out.stdout);
    }
    let out = podwright(&["completion", "tcsh"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("invalid value 'tcsh'"), "{}", out.stderr);
}

#[test]
fn man_prints_podwrights_page_and_writes_one_per_command() {
    let out = podwright(&["man"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(".TH podwright 1"), "{}", out.stdout);
    let dir = std::env::temp_dir().join(format!("podwright-e2e-man-{}", std::process::id()));
    let out = podwright(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for command in ["run", "check", "serve", "kubeconfig", "timeline", "runtime-clean", "completion", "man"] {
        let page = std::fs::read_to_string(dir.join(format!("podwright-{command}.1"))).unwrap();
        assert!(page.contains(&format!(".TH podwright-{command} 1")), "{command}:\n{page}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
