//! Time as the engine sees it: milliseconds on the caller's clock. The
//! engine reads no clock; every time it compares against is passed in.
//! Its own module so that the queue, the cache, facts and plugins share
//! the type without importing each other.

/// Milliseconds since the Unix epoch, on the caller's clock.
pub type Millis = u64;

pub const SECOND: Millis = 1000;
pub const MINUTE: Millis = 60 * SECOND;
