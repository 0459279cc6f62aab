//! The exit codes of sysexits(3) the supervisor uses.

/// A service it needs is unavailable (the socket is served by another supervisor, the kill
/// mode asked for cannot be had).
pub const EX_UNAVAILABLE: u8 = 69;
/// An internal failure.
pub const EX_SOFTWARE: u8 = 70;
/// It cannot create a file it needs (something else is at the socket's path).
pub const EX_CANTCREAT: u8 = 73;
/// The configuration is bad.
pub const EX_CONFIG: u8 = 78;
