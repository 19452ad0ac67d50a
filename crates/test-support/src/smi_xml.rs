//! Readers of `nvidia-smi -q -x`'s text by string search, without an XML parser: what a test
//! expects of an imported dump is read with these rather than with the importer's parser, so
//! that a mistake of the importer is not made again by the test that checks it. They take the
//! dump's layout as nvidia-smi writes it (no comments, no CDATA, an element not nested in one
//! of its own name).

/// The contents of every `<tag ...>...</tag>` in `s`, in order (not nested in each other).
pub fn blocks<'a>(s: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        // `<gpu` must not match `<gpu_temp>`: the name ends at '>' or a space.
        if !after.starts_with('>') && !after.starts_with(' ') {
            rest = after;
            continue;
        }
        let Some(gt) = after.find('>') else { break };
        let body = &after[gt + 1..];
        let Some(end) = body.find(&close) else { break };
        out.push(&body[..end]);
        rest = &body[end + close.len()..];
    }
    out
}

/// The first block of `tag` in `s`, or `""`.
pub fn block<'a>(s: &'a str, tag: &str) -> &'a str {
    blocks(s, tag).first().copied().unwrap_or("")
}

/// The trimmed text of the first `<tag>value</tag>` in `s`, placeholders included.
pub fn value(s: &str, tag: &str) -> Option<String> {
    blocks(s, tag).first().map(|v| v.trim().to_string())
}

/// `s` without the contents of its `<tag>...</tag>` blocks.
pub fn without(s: &str, tag: &str) -> String {
    let mut out = s.to_string();
    for b in blocks(s, tag) {
        out = out.replacen(b, "", 1);
    }
    out
}

/// Whether `v` is one of nvidia-smi's texts for "no value": empty, `N/A`, `[N/A]` and the
/// other bracketed reasons, deprecated, `Not available...`.
pub fn is_placeholder(v: &str) -> bool {
    v.is_empty()
        || v == "N/A"
        || v.starts_with('[')
        || v.contains("deprecated")
        || v.starts_with("Not available")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = "<gpu id=\"00000000:01:00.0\">\n  <gpu_temp>33 C</gpu_temp>\n  \
                       <fb_memory_usage><total>81559 MiB</total></fb_memory_usage>\n  \
                       <bar1_memory_usage><total>131072 MiB</total></bar1_memory_usage>\n\
                       </gpu>\n<gpu id=\"00000000:02:00.0\">\n  <gpu_temp>N/A</gpu_temp>\n</gpu>";

    #[test]
    fn blocks_finds_each_element_of_a_name_and_not_longer_names() {
        let gpus = blocks(GPU, "gpu");
        assert_eq!(gpus.len(), 2, "{gpus:?}");
        assert_eq!(value(gpus[0], "gpu_temp").as_deref(), Some("33 C"));
        assert_eq!(value(gpus[1], "gpu_temp").as_deref(), Some("N/A"));
        assert_eq!(value(gpus[1], "total"), None);
        assert_eq!(block(gpus[1], "fb_memory_usage"), "");
    }

    #[test]
    fn without_drops_a_block_so_that_a_later_one_of_the_same_child_is_first() {
        let gpu = blocks(GPU, "gpu")[0];
        assert_eq!(value(gpu, "total").as_deref(), Some("81559 MiB"));
        let rest = without(gpu, "fb_memory_usage");
        assert_eq!(value(&rest, "total").as_deref(), Some("131072 MiB"));
    }

    #[test]
    fn placeholders_are_nvidia_smis_texts_for_no_value() {
        for v in [
            "",
            "N/A",
            "[N/A]",
            "[Not Supported]",
            "Not available in WDDM",
            "deprecated",
        ] {
            assert!(is_placeholder(v), "{v:?}");
        }
        for v in ["0", "33 C", "Enabled", "Disabled"] {
            assert!(!is_placeholder(v), "{v:?}");
        }
    }
}
