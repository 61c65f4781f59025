//! The `--json` streams of a real provision (the rebuild after a destroy: its steps, the guest's
//! finishing log, `done`) and of the real destroy, pinned by snapshots. What differs from run to
//! run is redacted — times, durations, addresses, MACs, digests, the test's guest and pool names,
//! temporary paths, this machine's free resources — and what a program relies on is kept: the
//! event kinds and their order, the step names and numbers, `succeeded`, the exit status.

use super::support::{test_image, text};
use super::Installation;
use serde_json::Value;

/// Every line of a run's stdout as an event, each checked to carry the schema version: with
/// `--json`, stdout holds nothing else.
pub fn events(output: &std::process::Output) -> Vec<Value> {
    text(&output.stdout)
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not a JSON event ({error}): {line}"));
            assert_eq!(event["schema"], 1, "{line}");
            assert!(event["event"].is_string(), "{line}");
            event
        })
        .collect()
}

/// The first event of kind `kind`.
pub fn first<'e>(events: &'e [Value], kind: &str) -> &'e Value {
    events
        .iter()
        .find(|event| event["event"] == kind)
        .unwrap_or_else(|| panic!("no `{kind}` event in {events:#?}"))
}

/// Pins a run's exit status and events as the snapshot `name`.
pub fn pin(name: &str, installation: &Installation, code: Option<i32>, events: &[Value]) {
    let redacted = redacted(installation, events);
    insta::with_settings!({
        filters => vec![
            // Durations first: `seconds` and `total_seconds`, and the seconds in a report's
            // steps (a fraction's digits, 0.123456789012, would otherwise pass for hex).
            (r#""(seconds|total_seconds)": [0-9.e+-]+"#, r#""$1": "[SECONDS]""#),
            (r"(?m)^(\s+)[0-9]+\.[0-9]+(e[+-]?[0-9]+)?$", "$1[SECONDS]"),
            // Digests (a key is new in every run, and so is all that carries it), then shorter
            // hex runs: the base image volume's name holds a digest's prefix.
            (r"\b[0-9a-f]{64}\b", "[SHA256]"),
            (r"\b[0-9a-f]{12,63}\b", "[HEX]"),
            (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "[UUID]"),
            (r"\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b", "[MAC]"),
            (r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", "[ADDRESS]"),
            (r"\[ADDRESS\]:\d+", "[ADDRESS]:[PORT]"),
            // A backup's name is the time it was taken.
            (r"\b\d{8}T\d{6}Z\b", "[TIME]"),
            // A backup archive's size (gzip of files with times in them).
            (r#""bytes": \d+"#, r#""bytes": "[BYTES]""#),
            // The filters refreshed for every tenant with guests on the shared libvirtd: other
            // tests' tenants come and go.
            (r#""network filters [^"]*""#, r#""network filters [the hypervisor's tenants]""#),
        ],
    }, {
        insta::assert_snapshot!(name, format!("exit status {code:?}\n{redacted}"));
    });
}

/// The events, pretty, with the runs' own names and this machine's figures taken out. The
/// guest's finishing log comes in as many pieces as its reads happened to return: each run of
/// `guest_output` events is pinned as one, its text replaced (the recipes' logs carry times and
/// generated names).
fn redacted(installation: &Installation, events: &[Value]) -> String {
    let mut kept: Vec<Value> = Vec::new();
    for event in events {
        let mut event = event.clone();
        if event["event"] == "message"
            && event["text"].as_str().is_some_and(|text| {
                text.starts_with("waiting up to ") && text.ends_with(" holds it")
            })
        {
            // A lock of the libvirtd the tests share (its set of network filters) held at that
            // moment by another test's run, or README's first command's: whether this run had to
            // wait for it depends on them, not on this run.
            continue;
        }
        if event["event"] == "guest_output" {
            assert!(event["text"].is_string(), "{event}");
            if kept
                .last()
                .is_some_and(|last| last["event"] == "guest_output")
            {
                continue;
            }
            event["text"] = "[the guest's finishing log]".into();
        }
        if event["event"] == "plan" {
            // Free memory, disk and the guests of others on this machine's libvirtd: the row
            // keeps its hypervisor and verdict.
            if let Some(rows) = event["placement"]["rows"].as_array_mut() {
                for row in rows {
                    row["checks"] = "[this machine's figures]".into();
                    row["score"] = "[this machine's figures]".into();
                }
            }
        }
        if event["event"] == "destroyed" {
            // libvirt promises no order for a guest's snapshots (it keeps them in a hash
            // table): they are pinned sorted, each in a place the others held.
            if let Some(removed) = event["outcome"]["removed"].as_array_mut() {
                // A network filter goes only when no domain on the libvirtd uses it any more,
                // and other tests' guests share this libvirtd: whether one is listed depends on
                // them, so filters are left out of the pin.
                removed.retain(|item| {
                    !item
                        .as_str()
                        .is_some_and(|item| item.starts_with("network filter "))
                });
                let mut snapshots: Vec<Value> = removed
                    .iter()
                    .filter(|item| {
                        item.as_str()
                            .is_some_and(|item| item.starts_with("snapshot "))
                    })
                    .cloned()
                    .collect();
                snapshots.sort_by_key(|item| item.as_str().unwrap_or_default().to_string());
                let mut sorted = snapshots.into_iter();
                for item in removed.iter_mut() {
                    if item
                        .as_str()
                        .is_some_and(|item| item.starts_with("snapshot "))
                    {
                        *item = sorted.next().expect("as many as were taken out");
                    }
                }
            }
        }
        kept.push(event);
    }
    let pretty = serde_json::to_string_pretty(&kept).unwrap();
    pretty
        .replace(
            &installation.dir.path().display().to_string(),
            "[INSTALLATION]",
        )
        .replace(&test_image().display().to_string(), "[TEST_IMAGE]")
        .replace(&installation.pool, "[POOL]")
        .replace(installation.domain.as_str(), "[GUEST]")
}
