//! Fleets for unit tests (this crate's `filter.rs` and `select.rs`; with the `testkit`
//! feature, gpuscope's table and viewer): a host, a device and a process with plausible
//! values. Each test module changes what its assertions depend on (free memory, utilization,
//! its processes, the UUID) and says so where it builds its fleet.

use gpu_devices::DeviceIdentity;

use crate::model::{Fleet, FleetDevice, FleetProcess, Host, HostState, JSON_SCHEMA};

/// An H100 80 GB that is up: `id` is `N` for GPU N or `N:M` for its MIG device M, the UUID
/// `GPU-<id>`; `free` bytes of memory free (the rest used; unknown when `None`), `util` percent
/// busy; 40 °C, 100 W of 700 W; no processes.
pub fn device(id: &str, free: Option<u64>, util: Option<u32>) -> FleetDevice {
    let number = |s: &str| -> u32 {
        s.parse()
            .unwrap_or_else(|_| panic!("a device id is N or N:M, not {id:?}"))
    };
    let (index, mig_index) = match id.split_once(':') {
        Some((g, m)) => (number(g), Some(number(m))),
        None => (number(id), None),
    };
    const TOTAL: u64 = 80 << 30;
    FleetDevice {
        identity: DeviceIdentity {
            id: id.into(),
            index,
            mig_index,
            name: Some("NVIDIA H100 80GB HBM3".into()),
            uuid: Some(format!("GPU-{id}")),
            bus_id: None,
        },
        up: Some(true),
        memory_total_bytes: Some(TOTAL),
        memory_used_bytes: free.map(|f| TOTAL - f.min(TOTAL)),
        memory_free_bytes: free,
        gpu_utilization_percent: util,
        memory_utilization_percent: None,
        temperature_celsius: Some(40),
        fan_speed_percent: None,
        power_usage_watts: Some(100.0),
        power_limit_watts: Some(700.0),
        gpu_instance_id: None,
        compute_instance_id: None,
        processes: Vec::new(),
        out_of_range: Vec::new(),
        out_of_range_not_kept: 0,
    }
}

/// `user`'s process `pid` running `python train.py` in 1 GiB of GPU memory, in no pod.
pub fn process(pid: u32, user: &str) -> FleetProcess {
    FleetProcess {
        pid,
        user: Some(user.into()),
        command: Some("python train.py".into()),
        pod: None,
        namespace: None,
        container: None,
        used_memory_bytes: Some(1 << 30),
        sm_utilization_percent: None,
    }
}

/// Host `name` (instance `<name>:9445`, job `gpu`) in `state`, its latest sample 2 s old.
pub fn host(name: &str, state: HostState, devices: Vec<FleetDevice>) -> Host {
    Host {
        host: name.into(),
        instance: Some(format!("{name}:9445")),
        job: Some("gpu".into()),
        state,
        sample_age_seconds: Some(2.0),
        driver_version: None,
        names: None,
        sample_time: None,
        devices: std::sync::Arc::new(devices),
    }
}

/// A fleet of `hosts` read from Prometheus at `http://prom:9090`, with no failed query.
pub fn fleet(hosts: Vec<Host>) -> Fleet {
    Fleet {
        schema: JSON_SCHEMA,
        source: "http://prom:9090".into(),
        evaluated_at: None,
        hosts,
        errors: vec![],
    }
}

/// A [`device`] with one process: `user<N>`'s PID 100 + N on GPU N.
pub fn device_with_process(id: &str, free: Option<u64>, util: Option<u32>) -> FleetDevice {
    let mut d = device(id, free, util);
    d.processes = vec![process(
        100 + d.identity.index,
        &format!("user{}", d.identity.index),
    )];
    d
}

/// Three hosts, not in order, each device with its [`device_with_process`]: `b` up with GPU 0
/// (10 GiB free, 90% busy) and GPU 1 (70 GiB, 5%), `c` down with no device, `a` up with GPU 0
/// (30 GiB, 50%) and GPU 1 (free memory and utilization unknown).
pub fn three_hosts() -> Fleet {
    fleet(vec![
        host(
            "b",
            HostState::Up,
            vec![
                device_with_process("0", Some(10 << 30), Some(90)),
                device_with_process("1", Some(70 << 30), Some(5)),
            ],
        ),
        host("c", HostState::Down, vec![]),
        host(
            "a",
            HostState::Up,
            vec![
                device_with_process("0", Some(30 << 30), Some(50)),
                device_with_process("1", None, None),
            ],
        ),
    ])
}
