//! igpu's surface on the shared context, opened from the environment: `GPUSCOPE_FIXTURE`,
//! `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`. The test runs in a process of its own,
//! started with that environment: the shared context is opened once per process.

use crate::common;

use gpu_devices::DeviceId;

#[test]
fn the_shared_context_follows_the_environment() {
    let fixture = common::fixtures_dir().join("h100-sxm-8gpu.json");
    let env = [
        (gpu_devices::FIXTURE_ENV_VAR, fixture.as_os_str()),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".as_ref()),
        ("CUDA_VISIBLE_DEVICES", "6,5".as_ref()),
    ];
    common::own_process!(the_shared_context_follows_the_environment, &env);

    assert_eq!(gpu_devices::count_devices().unwrap(), 8);
    assert_eq!(
        gpu_devices::devices_index().unwrap(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(gpu_devices::devices().unwrap().len(), 8);
    let gpu = gpu_devices::get_device(0).unwrap();
    assert_eq!(gpu.name().to_string(), "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu.memory_total_human().to_string(), "81559MiB");
    let e = gpu_devices::get_device(9).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no GPU with index 9: this machine has 8 GPUs (0-7)"
    );

    // The seed's first examples: the environment's value, then explicit ones.
    assert_eq!(
        gpu_devices::parse_cuda_visible_devices(
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()
        )
        .unwrap(),
        [DeviceId::Gpu(6), DeviceId::Gpu(5)]
    );
    assert_eq!(
        gpu_devices::visible_devices_index().unwrap(),
        [DeviceId::Gpu(6), DeviceId::Gpu(5)]
    );
    assert_eq!(gpu_devices::count_visible_devices().unwrap(), 2);
    let visible = gpu_devices::visible_devices().unwrap();
    assert_eq!(
        visible.iter().map(|d| d.id()).collect::<Vec<_>>(),
        [DeviceId::Gpu(6), DeviceId::Gpu(5)]
    );
    assert_eq!(visible[0].cuda_index(), Some(0));
    assert_eq!(gpu.cuda_index(), None, "GPU 0 is not visible");
    assert_eq!(
        gpu_devices::normalize_cuda_visible_devices(Some("4")).unwrap(),
        "GPU-b23b9980-b727-67bd-e92d-dd3920965d65"
    );
    assert_eq!(
        gpu_devices::normalize_cuda_visible_devices(None)
            .unwrap()
            .split(',')
            .count(),
        8
    );
    let ctx = gpu_devices::default_context().unwrap();
    let cuda = ctx.cuda_device(1).unwrap();
    assert_eq!(cuda.id(), DeviceId::Gpu(5));
    assert_eq!(
        ctx.cuda_device(2).unwrap_err().to_string(),
        "no CUDA device with index 2: CUDA shows 2 devices (0-1)"
    );
    assert_eq!(ctx.cuda_device_count(), 2);

    // The multi-section view of a device.
    let text = gpu.to_string();
    for section in test_support::igpu::SECTIONS {
        assert!(text.contains(section), "{section} in\n{text}");
    }
    assert!(text.contains("INDEX        : 0"), "{text}");
    // Clocks as igpu prints them (`1911.0 MHz (Max: 1911.0)`), the maximum the fixture's. (The
    // current clock depends on the frame the replay has reached, so only its form is checked.)
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let max = |k: &str| raw["devices"]["0"]["max_clocks"][k]["ok"].as_u64().unwrap();
    for (label, key) in [
        ("Graphics", "graphics"),
        ("SM      ", "sm"),
        ("Memory  ", "memory"),
    ] {
        let prefix = format!("    {label} : ");
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {label} clock in\n{text}"));
        let rest = &line[prefix.len()..];
        let (now, max_text) = rest.split_once(" MHz (Max: ").expect(line);
        assert!(
            now.ends_with(".0") && now[..now.len() - 2].parse::<u32>().is_ok(),
            "{line}"
        );
        assert_eq!(max_text, format!("{}.0)", max(key)), "{line}");
    }
}
