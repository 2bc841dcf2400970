//! Ctrl-C in a chat: during a reply it stops the reply and the chat goes on; anywhere else
//! (at the prompt, or a second time before the reply has stopped) it ends the process with
//! status 130, as a shell reports a process that SIGINT ended.
//!
//! The handler is the `ctrlc` crate's: it runs the closure on a thread of its own (not in
//! the signal handler, so it may do anything), which is what lets it end the process while
//! the main thread is blocked reading a line. Where stdin is a terminal, the line editor puts
//! it in raw mode while it reads, so Ctrl-C at the prompt reaches it as a key instead
//! (`input.rs`), and the chat returns [`CliError::Interrupted`](super::CliError) itself.

use std::sync::atomic::{AtomicU8, Ordering};

use super::CliError;

/// No reply running: SIGINT ends the process.
const IDLE: u8 = 0;
/// A reply is running: SIGINT asks it to stop.
const REPLYING: u8 = 1;
/// The reply was asked to stop and has not yet: another SIGINT ends the process.
const STOPPING: u8 = 2;

/// One state for the process, as the signal is one per process.
static STATE: AtomicU8 = AtomicU8::new(IDLE);

/// Exit status for an interrupted chat (128 + SIGINT).
pub const EXIT_STATUS: u8 = 130;

/// Installs the SIGINT handler. The line editor installs its own SIGINT handler when it is
/// created (to read resizes), replacing any before it: call this after creating it.
pub fn install() -> Result<(), CliError> {
    ctrlc::set_handler(|| {
        let asked = STATE.compare_exchange(REPLYING, STOPPING, Ordering::SeqCst, Ordering::SeqCst);
        if asked.is_err() {
            // Leave the shell's prompt on a line of its own.
            eprintln!();
            std::process::exit(i32::from(EXIT_STATUS));
        }
    })
    .map_err(|e| CliError::Usage(format!("installing the Ctrl-C handler: {e}")))
}

/// While it lives, SIGINT asks the reply to stop ([`Reply::stop_asked`]) instead of ending
/// the process.
#[derive(Debug)]
pub struct Reply(());

impl Reply {
    pub fn start() -> Reply {
        STATE.store(REPLYING, Ordering::SeqCst);
        Reply(())
    }

    /// Whether Ctrl-C was pressed since the reply started.
    pub fn stop_asked(&self) -> bool {
        STATE.load(Ordering::SeqCst) == STOPPING
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        STATE.store(IDLE, Ordering::SeqCst);
    }
}
