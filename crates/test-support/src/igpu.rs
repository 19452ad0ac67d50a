//! What igpu's multi-section view of a device shows, which gpu-devices' `Device` prints and
//! `gpuscope info` shows: the tests of both check for each section by its heading.

/// The headings of the view's sections, in order; `INDEX` is the first line's label, padded
/// as igpu pads it.
pub const SECTIONS: [&str; 7] = [
    "INDEX        :",
    "GPU MEMORY:",
    "GPU UTILIZATION:",
    "PCI INFO:",
    "GPU CLOCK:",
    "POWER INFO:",
    "PROCESSES:",
];
