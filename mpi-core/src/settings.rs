//! Settings, read once from the environment at MPI_Init.
//!
//! | variable | meaning | default | valid |
//! |---|---|---|---|
//! | `MPI_EAGER_LIMIT` | largest message (bytes) sent SHORT (eager); larger ones use REQ/RSP/DATA | 32768 (measured, see below) | 0 ..= 64M |
//! | `MPI_CTRL_SLOTS` | CTRL slots per sender in each receiver's ring (= credits) | 32 | 1 ..= 65536 |
//! | `MPI_HEAP_SIZE` | bytes of the per-rank heap (CTRL rings + MPI_Alloc_mem) | 64 MiB | 1M ..= 1T |
//! | `MPI_DEVICE` | device per peer: `auto` = shared memory (device-shm) for ranks on the same host, TCP for the others; `shm` = shared memory only (init fails if a rank is on another host); `tcp` = TCP for every peer | auto | auto, shm, tcp |
//! | `MPI_HEAP_MALLOC` | `1`: interpose the C allocator — `malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`, … of the whole program serve blocks of at least `MPI_HEAP_MALLOC_MIN` bytes from a malloc arena inside the heap once MPI_Init has run, so that large messages into them are one copy at a heap offset (see `mpi-capi/src/malloc.rs`) | 0 | 0/1, yes/no, true/false, on/off |
//! | `MPI_HEAP_MALLOC_MIN` | smallest allocation (bytes) served from the malloc arena; smaller ones stay with glibc | 65536 | 1 ..= 1T |
//! | `MPI_HEAP_MALLOC_SIZE` | bytes of the malloc arena, added to the heap when `MPI_HEAP_MALLOC=1` (address space: only touched pages cost memory); an exhausted arena falls back to glibc | 1 GiB | 1M ..= 1T |
//! | `MPI_PRINT_SETTINGS` | `1`: rank 0 prints the effective settings at start-up | 0 | 0/1, yes/no, true/false, on/off |
//!
//! Sizes are decimal bytes with an optional binary suffix `K`, `M`, `G` or `T` (×1024ⁿ,
//! case-insensitive, an optional trailing `B` or `iB`: `64M`, `64MiB`, `16k`). A value
//! that does not parse or is out of range is reported on stderr, naming the variable, and
//! the default is used instead; start-up never fails because of a setting.

use std::fmt;

/// Default of `MPI_EAGER_LIMIT` in bytes.
///
/// Chosen with the C ping-pong (`examples/pingpong.c`, 2 ranks, half round trip in µs),
/// eager (`MPI_EAGER_LIMIT=1M`) vs rendezvous (`MPI_EAGER_LIMIT=0`), on the 2-core test
/// machine while other jobs loaded it (load average ~7: absolute values are inflated, the
/// comparison per size is what counts):
///
/// | bytes | shm eager | shm rendezvous | tcp eager | tcp rendezvous |
/// |---|---|---|---|---|
/// | 16 KiB | 6.1 | 15.2 | 152 | 238 |
/// | 32 KiB | 11.2 | 19.3 | 157 | 255 |
/// | 64 KiB | 60.2 | 30.8 | 171 | 285 |
///
/// On shared memory the rendezvous (one CMA copy instead of two memcpys through a CTRL
/// slot) wins from 64 KiB; over TCP eager stays ahead beyond that. One setting for both:
/// 32 KiB, the largest size where eager wins on both devices.
pub const DEFAULT_EAGER_LIMIT: usize = 32768;
/// Default of `MPI_CTRL_SLOTS`.
pub const DEFAULT_CTRL_SLOTS: usize = 32;
/// Default of `MPI_HEAP_SIZE` in bytes.
pub const DEFAULT_HEAP_SIZE: usize = 64 << 20;
/// Default of `MPI_HEAP_MALLOC_MIN` in bytes: twice the default eager limit, so every
/// arena block is sent by rendezvous; below it glibc is faster and the message eager anyway.
pub const DEFAULT_HEAP_MALLOC_MIN: usize = 64 << 10;
/// Default of `MPI_HEAP_MALLOC_SIZE` in bytes. The heap lives in a sparse shared-memory
/// file (or an anonymous mapping), and the malloc arena is never mlocked: untouched pages
/// cost address space only (8 ranks × 1 GiB of /dev/shm address space per rank is fine).
pub const DEFAULT_HEAP_MALLOC_SIZE: usize = 1 << 30;

const MAX_EAGER_LIMIT: usize = 64 << 20;
const MAX_CTRL_SLOTS: usize = 65536;
const MIN_HEAP_SIZE: usize = 1 << 20;
const MAX_HEAP_SIZE: usize = 1 << 40;

/// Which device reaches which peer (`MPI_DEVICE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// Shared memory for ranks on the same host, TCP for the others.
    #[default]
    Auto,
    /// Shared memory only: every rank must be on this host.
    Shm,
    /// TCP for every peer (also on the same host).
    Tcp,
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Shm => "shm",
            DeviceChoice::Tcp => "tcp",
        })
    }
}

/// The effective settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Eager (SHORT) limit in bytes.
    pub eager_limit: usize,
    /// CTRL slots per sender.
    pub ctrl_slots: usize,
    /// Heap size in bytes.
    pub heap_size: usize,
    /// Print the settings at start-up.
    pub print: bool,
    /// Interpose the C allocator (`MPI_HEAP_MALLOC`).
    pub heap_malloc: bool,
    /// Smallest block served from the malloc arena (`MPI_HEAP_MALLOC_MIN`).
    pub heap_malloc_min: usize,
    /// Bytes of the malloc arena (`MPI_HEAP_MALLOC_SIZE`), used when `heap_malloc`.
    pub heap_malloc_size: usize,
    /// Device selection.
    pub device: DeviceChoice,
}

impl Default for Settings {
    /// The defaults of the table in the module documentation.
    fn default() -> Settings {
        Settings {
            eager_limit: DEFAULT_EAGER_LIMIT,
            ctrl_slots: DEFAULT_CTRL_SLOTS,
            heap_size: DEFAULT_HEAP_SIZE,
            print: false,
            heap_malloc: false,
            heap_malloc_min: DEFAULT_HEAP_MALLOC_MIN,
            heap_malloc_size: DEFAULT_HEAP_MALLOC_SIZE,
            device: DeviceChoice::Auto,
        }
    }
}

impl Settings {
    /// Reads the variables of the table from the process environment. Invalid values are
    /// reported on stderr and replaced by their defaults.
    pub fn from_env() -> Settings {
        Settings::from_lookup(|name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// As [`Settings::from_env`], with the variables looked up by `get` (for tests and for
    /// callers that hold the environment elsewhere, e.g. in a PMI key-value store).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Settings {
        let (settings, warnings) = Settings::parse(get);
        for w in warnings {
            eprintln!("mpi-core: warning: {w}");
        }
        settings
    }

    /// Parses without printing: the settings and one message per rejected variable.
    fn parse(get: impl Fn(&str) -> Option<String>) -> (Settings, Vec<String>) {
        let mut s = Settings::default();
        let mut warnings = Vec::new();
        let mut size = |name: &str, default: usize, min: usize, max: usize| -> usize {
            let Some(raw) = get(name) else {
                return default;
            };
            match parse_size(&raw) {
                Some(v) if (min..=max).contains(&v) => v,
                Some(_) => {
                    warnings.push(format!(
                        "{name}={raw:?} is out of range {min}..={max}; using the default {default}"
                    ));
                    default
                }
                None => {
                    warnings.push(format!(
                        "{name}={raw:?} is not a number (optional suffix K/M/G/T); \
                         using the default {default}"
                    ));
                    default
                }
            }
        };
        s.eager_limit = size("MPI_EAGER_LIMIT", DEFAULT_EAGER_LIMIT, 0, MAX_EAGER_LIMIT);
        s.ctrl_slots = size("MPI_CTRL_SLOTS", DEFAULT_CTRL_SLOTS, 1, MAX_CTRL_SLOTS);
        s.heap_size = size(
            "MPI_HEAP_SIZE",
            DEFAULT_HEAP_SIZE,
            MIN_HEAP_SIZE,
            MAX_HEAP_SIZE,
        );
        s.heap_malloc_min = size(
            "MPI_HEAP_MALLOC_MIN",
            DEFAULT_HEAP_MALLOC_MIN,
            1,
            MAX_HEAP_SIZE,
        );
        s.heap_malloc_size = size(
            "MPI_HEAP_MALLOC_SIZE",
            DEFAULT_HEAP_MALLOC_SIZE,
            MIN_HEAP_SIZE,
            MAX_HEAP_SIZE,
        );
        if let Some(raw) = get("MPI_HEAP_MALLOC") {
            match parse_bool(&raw) {
                Some(b) => s.heap_malloc = b,
                None => warnings.push(format!(
                    "MPI_HEAP_MALLOC={raw:?} is not a boolean (1/0, yes/no, true/false, \
                     on/off); using the default 0"
                )),
            }
        }
        if let Some(raw) = get("MPI_DEVICE") {
            match raw.trim().to_ascii_lowercase().as_str() {
                "auto" | "" => s.device = DeviceChoice::Auto,
                "shm" => s.device = DeviceChoice::Shm,
                "tcp" => s.device = DeviceChoice::Tcp,
                _ => warnings.push(format!(
                    "MPI_DEVICE={raw:?} is not one of auto, shm, tcp; using the default auto"
                )),
            }
        }
        if let Some(raw) = get("MPI_PRINT_SETTINGS") {
            match parse_bool(&raw) {
                Some(b) => s.print = b,
                None => warnings.push(format!(
                    "MPI_PRINT_SETTINGS={raw:?} is not a boolean (1/0, yes/no, true/false, \
                     on/off); using the default 0"
                )),
            }
        }
        (s, warnings)
    }

    /// Prints the effective settings to stdout, one variable per line (what
    /// `MPI_PRINT_SETTINGS=1` shows on rank 0).
    pub fn print(&self) {
        print!("{self}");
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "mpi-core settings:")?;
        writeln!(f, "  MPI_EAGER_LIMIT    = {}", self.eager_limit)?;
        writeln!(f, "  MPI_CTRL_SLOTS     = {}", self.ctrl_slots)?;
        writeln!(
            f,
            "  MPI_HEAP_SIZE      = {} ({})",
            self.heap_size,
            human(self.heap_size)
        )?;
        writeln!(f, "  MPI_HEAP_MALLOC    = {}", self.heap_malloc as u8)?;
        writeln!(f, "  MPI_HEAP_MALLOC_MIN  = {}", self.heap_malloc_min)?;
        writeln!(
            f,
            "  MPI_HEAP_MALLOC_SIZE = {} ({})",
            self.heap_malloc_size,
            human(self.heap_malloc_size)
        )?;
        writeln!(f, "  MPI_DEVICE         = {}", self.device)?;
        writeln!(f, "  MPI_PRINT_SETTINGS = {}", self.print as u8)
    }
}

/// `64M` → 67108864. Decimal digits, then an optional K/M/G/T (×1024ⁿ) optionally followed
/// by `B` or `iB`; a bare trailing `B` is also accepted. Whitespace around is ignored.
/// `None` on syntax errors and overflow.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let n: usize = s[..digits].parse().ok()?;
    let suffix = s[digits..].trim_start().to_ascii_lowercase();
    let shift = match suffix.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1usize << shift)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "y" | "true" | "on" => Some(true),
        "0" | "no" | "n" | "false" | "off" | "" => Some(false),
        _ => None,
    }
}

/// 67108864 → "64 MiB" (exact binary multiples only, else bytes).
fn human(n: usize) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> (Settings, Vec<String>) {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::parse(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let (s, w) = parse(&[]);
        assert_eq!(s, Settings::default());
        assert!(w.is_empty());
        assert_eq!(s.eager_limit, 32768);
        assert_eq!(s.ctrl_slots, 32);
        assert_eq!(s.heap_size, 64 << 20);
        assert!(!s.print);
    }

    #[test]
    fn valid_values() {
        let (s, w) = parse(&[
            ("MPI_EAGER_LIMIT", "8k"),
            ("MPI_CTRL_SLOTS", "64"),
            ("MPI_HEAP_SIZE", " 1G "),
            ("MPI_PRINT_SETTINGS", "1"),
            ("MPI_HEAP_MALLOC", "yes"),
            ("MPI_HEAP_MALLOC_MIN", "1M"),
            ("MPI_HEAP_MALLOC_SIZE", "2G"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            s,
            Settings {
                eager_limit: 8192,
                ctrl_slots: 64,
                heap_size: 1 << 30,
                print: true,
                heap_malloc: true,
                heap_malloc_min: 1 << 20,
                heap_malloc_size: 2 << 30,
                device: DeviceChoice::Auto,
            }
        );
        let (s, _) = parse(&[("MPI_EAGER_LIMIT", "0"), ("MPI_PRINT_SETTINGS", "off")]);
        assert_eq!(s.eager_limit, 0);
        assert!(!s.print);
    }

    #[test]
    fn invalid_values_fall_back_and_name_the_variable() {
        let cases = [
            ("MPI_EAGER_LIMIT", "lots"),
            ("MPI_EAGER_LIMIT", "-5"),
            ("MPI_EAGER_LIMIT", "1G"),
            ("MPI_CTRL_SLOTS", "0"),
            ("MPI_CTRL_SLOTS", "3.5"),
            ("MPI_HEAP_SIZE", "12"),
            ("MPI_HEAP_SIZE", "99999999999999999999"),
            ("MPI_HEAP_SIZE", "64X"),
            ("MPI_PRINT_SETTINGS", "maybe"),
            ("MPI_DEVICE", "ib"),
            ("MPI_HEAP_MALLOC", "sometimes"),
            ("MPI_HEAP_MALLOC_MIN", "0"),
            ("MPI_HEAP_MALLOC_SIZE", "1K"),
        ];
        for (var, val) in cases {
            let (s, w) = parse(&[(var, val)]);
            assert_eq!(s, Settings::default(), "{var}={val}");
            assert_eq!(w.len(), 1, "{var}={val}");
            assert!(w[0].contains(var), "{}", w[0]);
        }
        // One bad variable does not disturb the others.
        let (s, w) = parse(&[("MPI_CTRL_SLOTS", "x"), ("MPI_EAGER_LIMIT", "100")]);
        assert_eq!((s.ctrl_slots, s.eager_limit, w.len()), (32, 100, 1));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("16K"), Some(16384));
        assert_eq!(parse_size("16 kB"), Some(16384));
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size("100B"), Some(100));
        for bad in [
            "",
            "K",
            "-1",
            "1.5M",
            "0x10",
            "10Q",
            "18446744073709551615K",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn display_lists_every_variable() {
        let text = Settings::default().to_string();
        for var in [
            "MPI_EAGER_LIMIT",
            "MPI_CTRL_SLOTS",
            "MPI_HEAP_SIZE",
            "MPI_DEVICE",
            "MPI_PRINT_SETTINGS",
            "MPI_HEAP_MALLOC",
            "MPI_HEAP_MALLOC_MIN",
            "MPI_HEAP_MALLOC_SIZE",
        ] {
            assert!(text.contains(var), "{text}");
        }
        assert!(text.contains("64 MiB"), "{text}");
        assert_eq!(human(1000), "1000 B");
    }

    #[test]
    fn from_env_reads_the_environment() {
        // Only reads: the variables are unlikely to be set in the test environment, and a
        // set one must still give a valid result.
        let s = Settings::from_env();
        assert!(s.ctrl_slots >= 1 && s.heap_size >= MIN_HEAP_SIZE);
    }
}
