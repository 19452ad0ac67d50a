//! A scenario fixture with some answers changed by a test, in a temporary file outside the
//! source tree that is removed when the test is done.

#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

/// The path of scenario fixture `stem`.
pub fn scenario(stem: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/{stem}.json"))
}

/// A copy of a scenario fixture with `edit` applied to its JSON; the file is removed on drop.
pub struct EditedFixture {
    path: tempfile::TempPath,
}

impl EditedFixture {
    /// Scenario `stem` edited by `edit`, written under the system's temporary directory with a
    /// name of its own that starts with `stem` and `tag`: every test of the binary shares this
    /// process, so two that chose the same tag still get a file each.
    pub fn new(stem: &str, tag: &str, edit: impl FnOnce(&mut Value)) -> EditedFixture {
        let text = std::fs::read_to_string(scenario(stem)).expect("scenario fixture reads");
        let mut fx: Value = serde_json::from_str(&text).expect("scenario fixture is JSON");
        edit(&mut fx);
        let file = tempfile::Builder::new()
            .prefix(&format!("gpuscope-test-{stem}-{tag}-"))
            .suffix(".json")
            .tempfile()
            .expect("temporary fixture creates");
        std::fs::write(
            file.path(),
            serde_json::to_string(&fx).expect("JSON writes"),
        )
        .expect("temporary fixture writes");
        EditedFixture {
            path: file.into_temp_path(),
        }
    }

    /// The file's path, for `--fixture`.
    pub fn path(&self) -> String {
        self.path.display().to_string()
    }
}

/// Puts process `pid` on GPU 0's compute process list in every frame, holding `used_bytes` of
/// GPU memory (a fixture whose GPU 0 lists are values, such as old-driver's).
pub fn add_compute_process(fx: &mut Value, pid: u32, used_bytes: u64) {
    for frame in fx["frames"].as_array_mut().expect("frames") {
        frame["devices"]["0"]["compute_processes"]["ok"]
            .as_array_mut()
            .expect("GPU 0's process lists are values")
            .push(serde_json::json!({
                "pid": pid,
                "used_gpu_memory": used_bytes,
                "gpu_instance_id": null,
                "compute_instance_id": null,
            }));
    }
}

/// Writes `fx` to `path` (a file the test removes).
pub fn write(fx: &Value, path: &std::path::Path) {
    std::fs::write(path, serde_json::to_string(fx).expect("JSON writes")).expect("fixture writes");
}

/// Makes device `id`'s process lists at `frame` answer `error` (a fixture error name such as
/// `"no_permission"`; see docs/fixture-format.md). `lists` names which: `compute_processes`,
/// `graphics_processes`, or both.
pub fn fail_process_lists(fx: &mut Value, frame: usize, id: &str, lists: &[&str], error: &str) {
    let device = &mut fx["frames"][frame]["devices"][id];
    assert!(device.is_object(), "frame {frame} has device {id}");
    for list in lists {
        device[*list] = serde_json::json!({ "err": error });
    }
}

/// Removes every host fact that an imported `nvidia-smi -q -x` dump does not have: the name,
/// command line, user, parent and start time of each process, and its CPU, RSS and state in
/// every frame.
pub fn forget_host_facts(fx: &mut Value) {
    for facts in fx["host"]["processes"]
        .as_object_mut()
        .expect("host.processes")
        .values_mut()
    {
        *facts =
            serde_json::json!({ "cmdline": [], "user": null, "ppid": null, "start_time_s": null });
    }
    for frame in fx["frames"].as_array_mut().expect("frames") {
        for sample in frame["host"]["processes"]
            .as_object_mut()
            .expect("frame host.processes")
            .values_mut()
        {
            *sample = serde_json::json!({});
        }
    }
}
