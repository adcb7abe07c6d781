//! Commands on a terminal: `script` (util-linux) runs them on a pseudo-terminal, for kubectl's
//! `-t` (a TTY needs a terminal on kubectl's side too).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `cmd` (its program, arguments and environment) run by `script` on a pseudo-terminal of 30
/// rows and 90 columns: what `script` reads is typed on that terminal, and the command's stdout
/// and stderr both come out of it, on `script`'s stdout.
pub fn on_terminal(cmd: &Command) -> Command {
    let quote = |a: &OsStr| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''"));
    let line = std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(quote).collect::<Vec<_>>();
    let mut script = Command::new("script");
    script.args(["-qec", &format!("stty rows 30 cols 90; {}", line.join(" ")), "/dev/null"]);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    script
}

/// Runs `cmd` on a terminal ([`on_terminal`]) with `typed` typed at once; the terminal keeps
/// it until the command reads it, and stays open until the command ends (`script` would type
/// an end of input otherwise). Kills it after `limit`. Its status and everything it printed.
pub fn typed_on_terminal(cmd: &Command, typed: &str, limit: Duration) -> (ExitStatus, String) {
    let mut child = on_terminal(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed.as_bytes()).unwrap();
    let printed = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let into = printed.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let printed = String::from_utf8_lossy(&printed.lock().unwrap()).into_owned();
            panic!("{cmd:?} on a terminal still ran after {limit:?}; killed it. It printed:\n{printed}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(stdin);
    let _ = reader.join();
    let printed = String::from_utf8_lossy(&printed.lock().unwrap()).into_owned();
    (status, printed)
}
