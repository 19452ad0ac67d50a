//! Fixture files as written and read: both layouts, plain and compressed, whole or streamed one
//! frame at a time, and what is refused (a compressed file that decompresses past the bound,
//! data that is not what its name says).

use crate::common::{self, Scratch};

use std::io::Write as _;

use gpu_backend::fixture::{limits, Compression, FixtureHead, FixtureWriter, Style};
use gpu_backend::Fixture;
use proptest::prelude::*;

#[test]
fn the_pretty_writer_writes_what_serde_json_pretty_prints() {
    for (name, fixture) in common::all_fixtures() {
        let want = serde_json::to_string_pretty(&fixture).unwrap();
        assert!(
            fixture.to_json_pretty() == want,
            "{name}: the writer's pretty form is not serde_json's"
        );
    }
}

#[test]
fn every_fixture_reads_back_from_every_style_and_compression() {
    let dir = Scratch::new("fixture-files-styles");
    for (name, fixture) in common::all_fixtures() {
        for style in [Style::Pretty, Style::Compact] {
            for ext in ["json", "json.gz", "json.zst"] {
                let path = dir.path(&format!("{name}.{ext}"));
                fixture.save(&path, style).unwrap();
                let back = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
                if let Some(at) = back.first_difference(&fixture) {
                    panic!("{name} {style:?} .{ext}: differs at {at}");
                }
                assert!(
                    !dir.path(&format!("{name}.{ext}.partial")).exists(),
                    "the partial file is renamed into place"
                );
            }
        }
    }
}

#[test]
fn a_compact_fixture_has_a_line_per_frame_and_is_smaller() {
    let fixture = common::fixture("h100-sxm-8gpu");
    let compact = fixture.to_json(Style::Compact);
    let pretty = fixture.to_json_pretty();
    let frame_lines = compact
        .lines()
        .filter(|l| l.starts_with("{\"t_ms\":"))
        .count();
    assert_eq!(frame_lines, fixture.frames.len());
    assert!(
        compact.len() * 2 < pretty.len(),
        "compact {} vs pretty {}",
        compact.len(),
        pretty.len()
    );
}

#[test]
fn frames_streamed_one_at_a_time_make_the_same_file_as_a_whole_fixture() {
    let dir = Scratch::new("fixture-files-stream");
    let fixture = common::fixture("gpu-lost");
    let whole = dir.path("whole.json.zst");
    fixture.save(&whole, Style::Compact).unwrap();
    let streamed = dir.path("streamed.json.zst");
    let mut w = FixtureWriter::create(&streamed, Style::Compact).unwrap();
    w.begin(&FixtureHead::of(&fixture)).unwrap();
    for (i, frame) in fixture.frames.iter().enumerate() {
        w.frame(frame).unwrap();
        assert_eq!(w.frames_written(), i + 1);
        assert!(!streamed.exists(), "not in place before it is whole");
    }
    w.end(&fixture.host, None).unwrap();
    w.finish().unwrap();
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&streamed).unwrap()
    );
}

#[test]
fn a_writer_dropped_before_the_end_leaves_no_file() {
    let dir = Scratch::new("fixture-files-dropped");
    let fixture = common::fixture("old-driver");
    let path = dir.path("cut.json.gz");
    let mut w = FixtureWriter::create(&path, Style::Compact).unwrap();
    w.begin(&FixtureHead::of(&fixture)).unwrap();
    w.frame(&fixture.frames[0]).unwrap();
    drop(w);
    assert_eq!(std::fs::read_dir(dir.dir()).unwrap().count(), 0);
    // And finishing before the end is refused, not a broken file.
    let mut w = FixtureWriter::create(&path, Style::Compact).unwrap();
    w.begin(&FixtureHead::of(&fixture)).unwrap();
    assert!(w.finish().is_err());
    assert!(!path.exists());
}

/// Issue 32, item 15 (`record-fixture --out`, `rewrite-fixture --out`, `Fixture::save`): a
/// fixture is never written through a symbolic link. A link at the fixture's path is refused
/// before anything is written; a link planted at its `.partial` file is refused, never followed
/// (`File::create` followed it and created the link's target); a partial file left by a
/// recording that was killed is replaced as before.
#[cfg(unix)]
#[test]
fn a_fixture_is_never_written_through_a_symbolic_link() {
    let dir = Scratch::new("fixture-files-links");
    let fixture = common::fixture("old-driver");
    for precious in [false, true] {
        let target = dir.path(&format!("target-{precious}"));
        if precious {
            std::fs::write(&target, "precious").unwrap();
        }
        let before = std::fs::read(&target).ok();
        // At the fixture's own path.
        let out = dir.path(&format!("out-{precious}.json"));
        std::os::unix::fs::symlink(&target, &out).unwrap();
        let err = fixture.save(&out, Style::Compact).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(std::fs::symlink_metadata(&out).unwrap().is_symlink());
        // At its partial file.
        let out = dir.path(&format!("partial-{precious}.json"));
        let partial = dir.path(&format!("partial-{precious}.json.partial"));
        std::os::unix::fs::symlink(&target, &partial).unwrap();
        let err = match FixtureWriter::create(&out, Style::Compact) {
            Ok(_) => panic!("a link at {} was written through", partial.display()),
            Err(e) => e,
        };
        assert!(
            err.to_string().contains("symbolic link")
                && err.to_string().contains(&*partial.to_string_lossy()),
            "{err}"
        );
        assert!(!out.exists());
        assert_eq!(
            std::fs::read(&target).ok(),
            before,
            "the link's target changed"
        );
    }
    // A partial file a killed recording left behind is replaced.
    let out = dir.path("killed.json");
    std::fs::write(dir.path("killed.json.partial"), "half a fixture").unwrap();
    fixture.save(&out, Style::Compact).unwrap();
    assert_eq!(Fixture::load(&out).unwrap(), fixture);
    assert!(!dir.path("killed.json.partial").exists());
}

#[test]
fn a_small_compressed_bomb_is_refused_naming_the_file() {
    // A few hundred kilobytes that decompress to more than the bound of JSON text.
    let dir = Scratch::new("fixture-files-bomb");
    let path = dir.path("bomb.json.zst");
    let mut enc =
        zstd::stream::write::Encoder::new(std::fs::File::create(&path).unwrap(), 3).unwrap();
    enc.write_all(br#"{"schema_version": 2, "meta": {"name": ""#)
        .unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..=(limits::MAX_FILE_BYTES >> 20) {
        enc.write_all(&chunk).unwrap();
    }
    enc.finish().unwrap();
    let on_disk = std::fs::metadata(&path).unwrap().len();
    assert!(on_disk < 1 << 20, "{on_disk} bytes on disk");
    let err = Fixture::load(&path).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("bomb.json.zst"), "{msg}");
    assert!(msg.contains("decompresses to more than"), "{msg}");
    assert!(msg.contains("256 MiB"), "{msg}");
}

#[test]
fn data_that_is_not_what_its_name_says_is_refused_naming_the_file() {
    let dir = Scratch::new("fixture-files-names");
    let plain = common::fixture("old-driver").to_json(Style::Compact);
    for (name, bytes, expected) in [
        (
            "plain.json.gz",
            plain.as_bytes().to_vec(),
            "not valid gzip data",
        ),
        (
            "plain.json.zst",
            plain.as_bytes().to_vec(),
            "not valid Zstandard data",
        ),
        (
            "packed.json",
            zstd::encode_all(plain.as_bytes(), 3).unwrap(),
            "a compressed fixture's name ends in .gz or .zst",
        ),
    ] {
        let path = dir.path(name);
        std::fs::write(&path, bytes).unwrap();
        let msg = Fixture::load(&path).unwrap_err().to_string();
        assert!(msg.contains(name), "{msg}");
        assert!(msg.contains(expected), "{name}: {msg}");
    }
    // A gzip stream cut short.
    let path = dir.path("cut.json.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let bytes = gz.finish().unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let msg = Fixture::load(&path).unwrap_err().to_string();
    assert!(msg.contains("cut.json.gz"), "{msg}");
    assert!(msg.contains("gzip"), "{msg}");
}

#[test]
fn compression_is_chosen_by_the_name() {
    for (name, want) in [
        ("a.json", Compression::None),
        ("a.json.gz", Compression::Gzip),
        ("a.json.zst", Compression::Zstd),
        ("a.zst.json", Compression::None),
        ("a", Compression::None),
    ] {
        assert_eq!(Compression::from_path(name.as_ref()), want, "{name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any run of frames of any fixture, in any style and compression, reads back as written.
    #[test]
    fn any_frames_in_any_form_read_back(
        which in 0usize..16,
        start in any::<proptest::sample::Index>(),
        len in 1usize..6,
        style in prop_oneof![Just(Style::Pretty), Just(Style::Compact)],
        compression in prop_oneof![Just(Compression::None), Just(Compression::Gzip), Just(Compression::Zstd)],
    ) {
        let all = common::fixtures_once();
        let (_, base) = &all[which % all.len()];
        let mut fixture = base.clone();
        let from = start.index(fixture.frames.len());
        fixture.frames = fixture.frames[from..(from + len).min(fixture.frames.len())].to_vec();
        // A cut recording is still a fixture only if its host facts are of PIDs seen in it.
        prop_assume!(fixture.validate().is_ok());
        let mut bytes = Vec::new();
        let mut w = FixtureWriter::with_compression(&mut bytes, style, compression).unwrap();
        w.write_all(&fixture).unwrap();
        w.finish().unwrap();
        let text = match compression {
            Compression::None => bytes,
            Compression::Gzip => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut out).unwrap();
                out
            }
            Compression::Zstd => zstd::decode_all(&bytes[..]).unwrap(),
        };
        let back = Fixture::from_json_str(std::str::from_utf8(&text).unwrap(), "memory").unwrap();
        prop_assert!(back == fixture, "{}", back.first_difference(&fixture).unwrap_or_default());
    }
}
