//! Which names the exporter publishes under: the doors ([`Door`]) and a set of them
//! ([`Doors`], what `gpuscope export --names` takes), below both gpuscope's families (whose
//! options hold the set) and the doors' tables.

use std::fmt;
use std::str::FromStr;

/// One set of metric names the exporter can publish its sample under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Door {
    /// gpuscope's own families (`gpuscope_*`, [`crate::names`]).
    Gpuscope,
    /// dcgm-exporter's default counters and its profiling fields (`DCGM_FI_*`).
    Dcgm,
    /// nvidia_gpu_exporter's metrics (`nvidia_smi_*`).
    NvidiaSmi,
}

impl Door {
    /// Every door, in the order an exposition holds them.
    pub const ALL: [Door; 3] = [Door::Gpuscope, Door::Dcgm, Door::NvidiaSmi];

    /// Its name in `--names` (`gpuscope`, `dcgm`, `nvidia-smi`).
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Gpuscope => "gpuscope",
            Door::Dcgm => "dcgm",
            Door::NvidiaSmi => "nvidia-smi",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Door::Gpuscope => 1,
            Door::Dcgm => 2,
            Door::NvidiaSmi => 4,
        }
    }
}

impl fmt::Display for Door {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Door {
    type Err = DoorsError;

    /// `gpuscope`, `dcgm` or `nvidia-smi` (`nvidia_smi` too), ASCII case ignored.
    fn from_str(s: &str) -> Result<Door, DoorsError> {
        let name = s.trim();
        Door::ALL
            .into_iter()
            .find(|d| {
                d.as_str().eq_ignore_ascii_case(name)
                    || d.as_str().replace('-', "_").eq_ignore_ascii_case(name)
            })
            .ok_or_else(|| DoorsError::Unknown(gpu_devices::text::escape_control(name).into()))
    }
}

/// The doors an exporter publishes: at least one, gpuscope's alone by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Doors(u8);

impl Doors {
    /// gpuscope's own names only (the default).
    pub const GPUSCOPE: Doors = Doors(1);

    /// One door.
    pub fn only(door: Door) -> Doors {
        Doors(door.bit())
    }

    /// These doors and `door`.
    pub fn with(self, door: Door) -> Doors {
        Doors(self.0 | door.bit())
    }

    /// Whether `door` is one of them.
    pub fn contains(self, door: Door) -> bool {
        self.0 & door.bit() != 0
    }

    /// The doors, in the order an exposition holds them.
    pub fn iter(self) -> impl Iterator<Item = Door> {
        Door::ALL.into_iter().filter(move |d| self.contains(*d))
    }
}

impl Default for Doors {
    fn default() -> Doors {
        Doors::GPUSCOPE
    }
}

impl fmt::Display for Doors {
    /// As `--names` takes them: `gpuscope,dcgm`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Door::as_str).collect();
        f.write_str(&names.join(","))
    }
}

impl FromStr for Doors {
    type Err = DoorsError;

    /// A comma-separated list of door names (`gpuscope,dcgm`); each at most once.
    fn from_str(list: &str) -> Result<Doors, DoorsError> {
        let mut doors = Doors(0);
        for word in list.split(',') {
            if word.trim().is_empty() {
                return Err(DoorsError::Empty(
                    gpu_devices::text::escape_control(list).into(),
                ));
            }
            let door: Door = word.parse()?;
            if doors.contains(door) {
                return Err(DoorsError::Twice(door));
            }
            doors = doors.with(door);
        }
        Ok(doors)
    }
}

/// Why a list of doors was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DoorsError {
    /// A name that is not a door.
    #[error("unknown names {0:?}: the names are gpuscope, dcgm and nvidia-smi")]
    Unknown(String),
    /// An empty name: an empty list, two commas, or one at an end.
    #[error("{0:?} has an empty name (an empty list, two commas, or one at an end)")]
    Empty(String),
    /// A door named twice.
    #[error("{0} is named twice")]
    Twice(Door),
}
