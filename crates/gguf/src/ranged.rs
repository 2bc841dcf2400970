//! [`RangedFile`]: a file read in ranges, by positioned reads.
//!
//! Where a memory map of a file that shrinks faults the process (SIGBUS on the first page
//! past the new end), a positioned read past the end just returns fewer bytes, which becomes
//! an error naming the offset. A model loader copies every weight anyway (into the GPU's
//! buffers, or the CPU executor's own), so reading instead of mapping costs it one copy from
//! the page cache that the map would have made as page faults.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::source::ByteSource;

/// A file read with positioned reads (`pread` on Unix, `ReadFile` at an offset on Windows);
/// shared by reference between threads, since no read moves a cursor.
#[derive(Debug)]
pub struct RangedFile {
    file: File,
    len: u64,
    /// Targets without positioned reads seek and then read: one at a time.
    #[cfg(not(any(unix, windows)))]
    cursor: std::sync::Mutex<()>,
}

impl RangedFile {
    /// Open the file at `path` for reading.
    pub fn open(path: impl AsRef<Path>) -> io::Result<RangedFile> {
        RangedFile::new(File::open(path)?)
    }

    /// Read `file`, whose length now is the length every extent is checked against.
    pub fn new(file: File) -> io::Result<RangedFile> {
        let len = file.metadata()?.len();
        Ok(RangedFile {
            file,
            len,
            #[cfg(not(any(unix, windows)))]
            cursor: std::sync::Mutex::new(()),
        })
    }

    #[cfg(unix)]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }

    #[cfg(windows)]
    fn read_at(&self, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
        use std::os::windows::fs::FileExt;
        while !buf.is_empty() {
            match self.file.seek_read(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    #[cfg(not(any(unix, windows)))]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        let _cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = &self.file;
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(buf)
    }
}

impl ByteSource for RangedFile {
    fn byte_len(&self) -> u64 {
        self.len
    }

    fn in_memory(&self) -> Option<&[u8]> {
        None
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_at(offset, buf).map_err(|e| {
            if e.kind() != io::ErrorKind::UnexpectedEof {
                return e;
            }
            // The header's extents were checked against the length at open: the file has
            // shrunk since (or was replaced). Say so, with its length now.
            let now = self
                .file
                .metadata()
                .map_or_else(|_| "unknown".to_string(), |m| m.len().to_string());
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the file ends before byte {}: it had {} bytes when opened, {now} now \
                     (truncated or rewritten while in use?)",
                    offset.saturating_add(buf.len() as u64),
                    self.len
                ),
            )
        })
    }
}
