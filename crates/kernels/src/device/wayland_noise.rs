//! libwayland-client's "XDG_RUNTIME_DIR is invalid or not set" kept off stderr while the
//! adapters are enumerated on a machine that can have no Wayland display.
//!
//! Who prints it, and why it says nothing wrong: Mesa's implicit Vulkan layer
//! `VK_LAYER_MESA_device_select` (installed with Mesa's Vulkan drivers, lavapipe among them)
//! reorders `vkEnumeratePhysicalDevices` so that the GPU driving the desktop comes first. When
//! the instance enables `VK_KHR_wayland_surface` (wgpu enables every window-system extension
//! the loader offers, whether a surface is ever made or not, and has no option to leave one
//! out), the layer asks the compositor which GPU that is, through `wl_display_connect(NULL)`.
//! Without `XDG_RUNTIME_DIR` there is no socket to ask, and libwayland-client says so on
//! stderr, once for each of the two calls an enumeration makes (the count, then the list).
//! The layer then tries X11 and the PCI bus as it would anyway. So the line shows on every
//! headless machine, container and CI runner with Mesa's Vulkan drivers, CPU-only runs
//! included (`--backend auto` enumerates to learn that there is no hardware GPU).
//!
//! What is done: only where libwayland would print it (its own test, [`wayland_would_complain`]),
//! fd 2 is a pipe for the length of the enumeration, and a thread writes every line through to
//! the real stderr as it comes, but that one: the loader's and the drivers' own messages still
//! show. The environment is left alone, so the layer orders the devices as it always does
//! (`NODEVICE_SELECT=1` would silence it by skipping the layer, and change the order that
//! `RULLAMA_ADAPTER`'s indices refer to).

use std::io::{BufRead, BufReader, PipeReader, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

/// The line, as libwayland-client 1.20 and later word it, and as earlier releases did.
const COMPLAINTS: [&[u8]; 2] = [
    b"error: XDG_RUNTIME_DIR is invalid or not set in the environment.",
    b"error: XDG_RUNTIME_DIR not set in the environment.",
];

/// Runs `enumerate` with libwayland-client's complaint kept off stderr where it would be
/// printed (and mean nothing); anything else written to stderr meanwhile goes through.
pub(super) fn quiet<T>(enumerate: impl FnOnce() -> T) -> T {
    if !wayland_would_complain() {
        return enumerate();
    }
    // fd 2 is the process's: one redirection at a time.
    static REDIRECTING: Mutex<()> = Mutex::new(());
    let _one = REDIRECTING.lock().unwrap_or_else(|e| e.into_inner());
    match Filter::start() {
        Some(filter) => {
            let out = enumerate();
            filter.finish();
            out
        }
        None => enumerate(),
    }
}

/// libwayland-client's own test in `wl_display_connect`: no socket handed down
/// (`WAYLAND_SOCKET`), no absolute socket path (`WAYLAND_DISPLAY`), and no absolute
/// `XDG_RUNTIME_DIR` to find a relative one in.
fn wayland_would_complain() -> bool {
    let absolute =
        |name: &str| std::env::var_os(name).is_some_and(|v| v.as_encoded_bytes().starts_with(b"/"));
    std::env::var_os("WAYLAND_SOCKET").is_none()
        && !absolute("WAYLAND_DISPLAY")
        && !absolute("XDG_RUNTIME_DIR")
}

/// fd 2 redirected into a pipe whose reader forwards to the saved stderr.
struct Filter {
    /// The real stderr, put back by [`Filter::finish`].
    saved: OwnedFd,
    /// Signalled when the forwarding thread has written everything out.
    done: mpsc::Receiver<()>,
}

impl Filter {
    /// Redirects fd 2, or `None` (nothing changed) where any step fails.
    fn start() -> Option<Filter> {
        let saved = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
        let out = std::fs::File::from(saved.try_clone().ok()?);
        let (reader, writer) = std::io::pipe().ok()?;
        let (tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name("stderr-filter".into())
            .spawn(move || {
                forward(reader, out);
                let _ = tx.send(());
            })
            .ok()?;
        let _ = std::io::stderr().flush();
        // SAFETY: both descriptors are open; dup2 replaces fd 2 atomically, and `writer`'s
        // own descriptor is closed right after (dropped), leaving fd 2 the pipe's write end.
        let redirected = unsafe { libc::dup2(writer.as_raw_fd(), libc::STDERR_FILENO) } >= 0;
        drop(writer);
        redirected.then_some(Filter { saved, done })
    }

    /// Puts the real stderr back and waits (briefly: a child process spawned meanwhile may
    /// hold the pipe open) for the forwarded lines to be written out.
    fn finish(self) {
        let _ = std::io::stderr().flush();
        // SAFETY: both descriptors are open; this closes fd 2's copy of the pipe's write end.
        unsafe { libc::dup2(self.saved.as_raw_fd(), libc::STDERR_FILENO) };
        let _ = self.done.recv_timeout(Duration::from_secs(1));
    }
}

/// Copies `reader` to `out` line by line, leaving out libwayland's complaint.
fn forward(reader: PipeReader, mut out: std::fs::File) {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                if !COMPLAINTS.contains(&text) {
                    let _ = out.write_all(&line);
                }
            }
        }
    }
}
