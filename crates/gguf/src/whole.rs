//! Files written whole or not at all: into a temporary file beside the destination, synced,
//! then renamed over it, so that a failed or interrupted write never leaves a half-written
//! file under the destination's name (a killed process may leave the temporary one, a hidden
//! `.*.tmp` in the same folder). The file gets the permissions a plain file would.

use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes `path` with what `write` puts into the writer it is given (buffered), whole or not
/// at all; `write`'s value is returned.
pub fn write_whole<T>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".").suffix(".tmp");
    // As a plain file would be created (0666 less the umask); tempfile's own default is
    // owner-only, which a model or adapter written for others to read must not be.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir)?;
    let value = {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file());
        let value = write(&mut w)?;
        w.flush()?;
        value
    };
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_nothing_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_whole(&path, |w| w.write_all(b"first")).unwrap();
        let failed = write_whole(&path, |w| {
            w.write_all(b"half")?;
            Err::<(), _>(std::io::Error::other("stopped"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_readable_as_a_plain_file_would_be() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (whole, plain) = (dir.path().join("whole"), dir.path().join("plain"));
        write_whole(&whole, |w| w.write_all(b"x")).unwrap();
        std::fs::write(&plain, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&whole), mode(&plain));
    }
}
