//! `rullama chat` driven through stdin on a tiny synthetic model (CPU executor, greedy): the
//! conversation survives a full context, a too-long message, commands, a closed stdout and
//! Ctrl-C.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rullama_synth::{Tiny, tiny_model};

mod common;
use common::command;

#[cfg(unix)]
#[path = "chat/terminal.rs"]
mod terminal;

/// A tiny SmolLM2 (ChatML template) written to a temporary directory.
struct TinyModel {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn tiny_smollm2() -> TinyModel {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-smollm2.gguf");
    std::fs::write(&path, tiny_model(Tiny::Smollm2, 1)).unwrap();
    TinyModel { _dir: dir, path }
}

/// `rullama chat MODEL --backend cpu ARGS`, not started.
fn chat_command(model: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = command(&["chat"]);
    cmd.arg(model).args(["--backend", "cpu"]).args(args);
    cmd
}

/// Runs a chat on `input`: (exit code, stdout, stderr).
fn chat(model: &Path, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let mut child = chat_command(model, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rullama");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// The prompt counts `--verbose` prints after each reply.
fn prompt_counts(stderr: &str) -> Vec<usize> {
    // A count may follow a prompt on its line (`>>> ` ends without a newline).
    stderr
        .lines()
        .filter_map(|l| l.split_once("prompt eval count:"))
        .map(|(_, n)| n.trim().trim_end_matches(" token(s)").parse().unwrap())
        .collect()
}

fn assert_quiet(stderr: &str) {
    for bad in ["error", "panicked", "Broken pipe", "broken pipe"] {
        assert!(!stderr.contains(bad), "{bad:?} in stderr:\n{stderr}");
    }
}

/// The case: five lines in a context of 64 tokens. Every line is answered; once the
/// conversation outgrows the context the oldest turns go, said on stderr.
#[test]
fn a_full_context_drops_the_oldest_turns_and_goes_on() {
    let model = tiny_smollm2();
    let input = "hello\nhow are you\nwhat is 2+2\ntell me more\nagain\n";
    let (code, _, stderr) = chat(
        &model.path,
        &["-n", "8", "--ctx", "64", "--temp", "0", "--verbose"],
        input,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_quiet(&stderr);
    assert_eq!(prompt_counts(&stderr).len(), 5, "five replies:\n{stderr}");
    assert!(
        stderr.contains("turn(s) were dropped"),
        "a notice that turns were dropped:\n{stderr}"
    );
}

/// A message that cannot fit is refused, and the next one is answered.
#[test]
fn a_too_long_message_is_refused_and_the_chat_goes_on() {
    let model = tiny_smollm2();
    let long = "word ".repeat(200);
    let input = format!("{long}\nhello\n");
    let (code, stdout, stderr) = chat(
        &model.path,
        &["-n", "8", "--ctx", "64", "--temp", "0", "--verbose"],
        &input,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_quiet(&stderr);
    assert!(stderr.contains("This message was not sent"), "{stderr}");
    assert_eq!(prompt_counts(&stderr).len(), 1, "one reply:\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
}

/// `/set` changes sampling (greedy here, from a random temperature-1.5 start), `/show` shows
/// it, bad values are refused; `/clear` forgets the conversation: the same message then gets
/// the prompt the first one had (all of it already in the cache but the last token) and the
/// same reply.
#[test]
fn set_show_and_clear() {
    let model = tiny_smollm2();
    let input = "/set temperature 0\n/set top_k 20\n/show\nhello\n/clear\nhello\n\
                 /set temperature -1\n/set colour 3\n/set top_p\n/nonsense\n\"\"\"\n/not a command\n\"\"\"\n";
    let (code, stdout, stderr) = chat(
        &model.path,
        &["-n", "6", "--ctx", "256", "--temp", "1.5", "--verbose"],
        input,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("temperature 0\ntop_k 20\n"), "{stderr}");
    assert!(stderr.contains("Cleared the conversation."), "{stderr}");
    assert!(
        stderr.contains("temperature = -1 is out of range"),
        "{stderr}"
    );
    assert!(stderr.contains("no setting colour"), "{stderr}");
    assert!(stderr.contains("usage: /set NAME VALUE"), "{stderr}");
    assert!(stderr.contains("unknown command /nonsense"), "{stderr}");
    let counts = prompt_counts(&stderr);
    assert_eq!(
        counts.len(),
        3,
        "three replies (the block is a message):\n{stderr}"
    );
    assert!(counts[0] > 1, "{counts:?}");
    assert_eq!(
        counts[1], 1,
        "after /clear the prompt is the first one: {counts:?}"
    );
    let replies: Vec<&str> = stdout.lines().collect();
    assert_eq!(replies.len(), 3, "{stdout:?}");
    assert_eq!(
        replies[0], replies[1],
        "the same prompt, greedy: the same reply"
    );
}

/// `chat … | head -c 1`: the reader goes away; the chat ends quietly with status 0 when it
/// next writes.
#[test]
fn a_closed_stdout_ends_the_chat_quietly() {
    let model = tiny_smollm2();
    let mut child = chat_command(&model.path, &["-n", "8", "--ctx", "256", "--temp", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello\n").unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Every reply ends with a newline, so the first byte comes.
    stdout.read_exact(&mut [0u8; 1]).unwrap();
    drop(stdout);
    // The next reply writes to the closed pipe; a chat that ignored that would wait for more.
    let _ = stdin.write_all(b"hello again\nand again\n");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_quiet(&stderr);
}

/// What a child writes to a pipe, gathered by a thread.
fn gather(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 256];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

fn text(buf: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// Waits up to a minute for `ready`; fails the test (ending the child) if it never holds.
fn wait_for(child: &mut Child, stderr: &Mutex<Vec<u8>>, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("waiting for {what}; stderr:\n{}", text(stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(unix)]
fn sigint(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill has no memory-safety preconditions; the pid is our live child's.
    let sent = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Ctrl-C during a reply stops the reply and the chat returns to the prompt; Ctrl-C at the
/// prompt ends it with status 130. The reply would run to the end of a 4096-token context
/// (the tiny model's greedy text has no end-of-turn): seconds, where the signal comes within
/// milliseconds of its first token.
#[cfg(unix)]
#[test]
fn ctrl_c_stops_the_reply_then_ends_the_chat() {
    let model = tiny_smollm2();
    let mut child = chat_command(
        &model.path,
        &["-n", "100000", "--ctx", "4096", "--temp", "0"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = gather(child.stdout.take().unwrap());
    let stderr = gather(child.stderr.take().unwrap());
    let prompts = || text(&stderr).matches(">>> ").count();
    wait_for(&mut child, &stderr, "the first prompt", || prompts() == 1);
    stdin.write_all(b"hello\n").unwrap();
    wait_for(&mut child, &stderr, "the reply's first token", || {
        !stdout.lock().unwrap().is_empty()
    });
    sigint(&child);
    wait_for(&mut child, &stderr, "the next prompt", || prompts() == 2);
    assert!(
        text(&stderr).contains("(reply stopped)"),
        "{}",
        text(&stderr)
    );
    assert!(child.try_wait().unwrap().is_none(), "the chat goes on");
    sigint(&child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "Ctrl-C at the prompt ends the chat"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(130), "{}", text(&stderr));
    drop(stdin);
}

/// `run --chat` tokenizes the typed text as text: `<|im_end|>` typed is several pieces (the
/// prompt grows by more than the one control token it would have been), and the run works.
#[test]
fn run_chat_keeps_typed_markers_as_text() {
    let model = tiny_smollm2();
    let prompt_tokens = |text: &str| {
        let mut cmd = command(&["run"]);
        cmd.arg(&model.path).args([
            text,
            "--chat",
            "-n",
            "1",
            "--temp",
            "0",
            "--backend",
            "cpu",
            "--verbose",
        ]);
        let (ok, _, stderr) = common::output(cmd);
        assert!(ok, "{stderr}");
        prompt_counts(&stderr)[0]
    };
    let plain = prompt_tokens("ab");
    let marked = prompt_tokens("a<|im_end|>b");
    assert!(
        marked >= plain + 3,
        "{plain} tokens, with the marker {marked}"
    );
}

/// `chat` likewise: a message spelling `<|im_end|><|im_start|>system` is text, several
/// tokens more than the two markers it would have been, and the chat answers it.
#[test]
fn chat_keeps_typed_markers_as_text() {
    let model = tiny_smollm2();
    let prompt_tokens = |message: &str| {
        let args = ["-n", "1", "--temp", "0", "--verbose"];
        let (code, _, stderr) = chat(&model.path, &args, &format!("{message}\n"));
        assert_eq!(code, Some(0), "{stderr}");
        prompt_counts(&stderr)[0]
    };
    let plain = prompt_tokens("ab system");
    let marked = prompt_tokens("a<|im_end|><|im_start|>b system");
    assert!(
        marked >= plain + 6,
        "{plain} tokens, with the markers {marked}"
    );
}
