//! `rullama chat` on a pseudo-terminal, as a user at a terminal meets it: the line editor
//! (editing keys, history) and Ctrl-C as the terminal sends it (SIGINT to the foreground
//! process group during a reply; a key the editor reads at the prompt).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{chat_command, gather, text, tiny_smollm2};

/// A pseudo-terminal: the master end the test types into and reads, and the slave's path.
fn open_pty() -> (File, String) {
    // SAFETY: plain libc calls on a descriptor this function owns; ptsname_r writes at most
    // `name.len()` bytes, NUL included.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master = OwnedFd::from_raw_fd(master);
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0
        );
        let size = libc::winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size), 0);
        let name = std::ffi::CStr::from_ptr(name.as_ptr());
        (File::from(master), name.to_str().unwrap().to_string())
    }
}

/// `rullama chat MODEL --backend cpu ARGS` with the pseudo-terminal `slave` as its
/// controlling terminal and its stdin, stdout and stderr.
fn spawn_on(slave: &str, model: &std::path::Path, args: &[&str]) -> Child {
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(slave)
            .unwrap()
    };
    let mut cmd = chat_command(model, args);
    cmd.env("TERM", "xterm")
        .stdin(Stdio::from(open()))
        .stdout(Stdio::from(open()))
        .stderr(Stdio::from(open()));
    // SAFETY: setsid and ioctl are async-signal-safe, as pre_exec requires. A session of
    // its own with the terminal as the controlling one makes the child the terminal's
    // foreground process group, to which the terminal sends SIGINT for Ctrl-C.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("run rullama on a pseudo-terminal")
}

/// The terminal: what it shows, where each wait left off, and its keyboard.
struct Terminal {
    child: Child,
    shown: std::sync::Arc<Mutex<Vec<u8>>>,
    keys: File,
    /// Bytes of `shown` already matched by a wait.
    seen: usize,
}

impl Terminal {
    /// Waits up to a minute for `needle` after what earlier waits matched, and moves past
    /// it; fails the test (ending the child) if it never comes.
    fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = text(&self.shown);
            if let Some(at) = shown.get(self.seen..).and_then(|s| s.find(needle)) {
                self.seen += at + needle.len();
                return;
            }
            if Instant::now() > deadline || self.child.try_wait().unwrap().is_some() {
                let _ = self.child.kill();
                panic!("waiting for {needle:?}; the terminal shows:\n{shown}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for `n` more bytes than earlier waits matched.
    fn wait_for_bytes(&mut self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.shown.lock().unwrap().len() < self.seen + n {
            if Instant::now() > deadline || self.child.try_wait().unwrap().is_some() {
                let _ = self.child.kill();
                panic!("waiting for {n} bytes; shown:\n{}", text(&self.shown));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.seen = self.shown.lock().unwrap().len();
    }

    /// Waits up to a minute for the chat to end (ending it and failing the test if not).
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the chat did not end; shown:\n{}", text(&self.shown));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn press(&mut self, keys: &[u8]) {
        self.keys.write_all(keys).unwrap();
    }

    /// Types `keys` once the editor's next prompt shows.
    fn type_at_prompt(&mut self, keys: &[u8]) {
        self.wait_for(">>> ");
        self.press(keys);
    }
}

/// Each step waits for the editor's prompt before typing, as the editor reads keys only
/// once it has put the terminal in raw mode (before that the terminal's own line editing
/// would take a backspace).
#[test]
fn line_editing_history_and_ctrl_c_on_a_terminal() {
    let model = tiny_smollm2();
    let (master, slave) = open_pty();
    // The reply to "hello" runs to the end of a 4096-token context (seconds) unless stopped.
    let child = spawn_on(
        &slave,
        &model.path,
        &["-n", "100000", "--ctx", "4096", "--temp", "0"],
    );
    let mut term = Terminal {
        child,
        keys: master.try_clone().unwrap(),
        shown: gather(master),
        seen: 0,
    };

    term.type_at_prompt(b"/set top_k 7\r");
    term.type_at_prompt(b"/show\r");
    // At a line start: /show's output, not the echo of what was typed.
    term.wait_for("\ntop_k 7");
    // Up twice: `/set top_k 7` again; backspace, 9, Enter.
    term.type_at_prompt(b"\x1b[A\x1b[A\x7f9\r");
    term.type_at_prompt(b"/show\r");
    term.wait_for("\ntop_k 9");

    // Ctrl-C during the reply: the terminal sends SIGINT; the reply stops, the chat goes on.
    term.type_at_prompt(b"hello\r");
    term.wait_for("hello");
    term.wait_for_bytes(16);
    term.press(b"\x03");
    term.wait_for("(reply stopped)");
    // Ctrl-C at the prompt, a key the editor reads: the chat ends with status 130.
    term.type_at_prompt(b"\x03");
    let status = term.wait_exit();
    assert_eq!(status.code(), Some(130), "{}", text(&term.shown));
}
