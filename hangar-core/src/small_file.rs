//! Reading a small file the operator names (the config, the API keys) so that whatever is at
//! the path cannot hang the reader or fill its memory: it is opened without blocking (a FIFO
//! opens at once with `O_NONBLOCK`), judged on the open file (fstat, so it cannot be swapped
//! after the check), and read only if it is a regular file, at most `limit` bytes of it.
//! `/dev/zero`, `/dev/stdin`, a FIFO or a directory is refused, whether named or linked to.

use std::path::Path;

/// Why a small file was not read.
#[derive(Debug, thiserror::Error)]
pub enum SmallFileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file (it is {0})")]
    NotRegular(&'static str),
    #[error("it is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
}

/// The text of the regular file at `path` (a symlink to one is fine), if it is at most `limit`
/// bytes of UTF-8.
pub fn read_regular(path: &Path, limit: u64) -> Result<String, SmallFileError> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else {
            "not a file"
        };
        return Err(SmallFileError::NotRegular(what));
    }
    if metadata.len() > limit {
        return Err(SmallFileError::TooLarge { limit });
    }
    // The file may grow after the fstat: read one byte past the limit to notice.
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(SmallFileError::TooLarge { limit });
    }
    String::from_utf8(bytes).map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err).into())
}
