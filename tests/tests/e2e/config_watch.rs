//! `--watch-config` on a Kubernetes ConfigMap volume: the kubelet never edits the file; it writes
//! a new timestamped directory, points a `..data_tmp` symlink at it and renames that over
//! `..data`, through which `hangar.yaml` is a symlink. The supervisor sees each swap and reloads,
//! as SIGHUP would; a bad config swapped in is refused and the running one stays.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use hangar_tests::{Hangar, poll};

const FIRST: &str = "mcp_servers:\n  one:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n";
const SECOND: &str = "mcp_servers:\n  one:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n  two:\n    command: [\"{fake}\", \"--tools\", \"echo\"]\n";
const THIRD: &str = "mcp_servers:\n  three:\n    command: [\"{fake}\", \"--tools\", \"echo\"]\n";

/// What the kubelet's atomic writer does for one update: a new data directory, `..data`
/// swapped to it by a rename, the old directory removed.
fn kubelet_update(dir: &Path, version: &str, yaml: &str) {
    let fake = hangar_tests::bin("hangar-upstream-fake").display().to_string();
    let data = dir.join(version);
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hangar.yaml"), yaml.replace("{fake}", &fake)).unwrap();
    let old = std::fs::read_link(dir.join("..data")).ok();
    symlink(version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

fn ids(hangar: &Hangar) -> Vec<String> {
    let listed = hangar.get("/api/mcp_servers").body;
    listed["mcp_servers"].as_array().unwrap().iter().map(|s| s["mcp_server_id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_configmap_update_is_reloaded_without_a_signal() {
    let hangar = Hangar::start_with(FIRST, &["--watch-config"]);
    assert_eq!(ids(&hangar), ["one"]);
    // Turn the harness's plain file into a ConfigMap volume's layout, holding the same text.
    let dir = hangar.dir.path();
    kubelet_update(dir, "..2026_12_01_06_00_00.1", FIRST);
    symlink("..data/hangar.yaml", dir.join("hangar.yaml.tmp")).unwrap();
    std::fs::rename(dir.join("hangar.yaml.tmp"), dir.join("hangar.yaml")).unwrap();

    kubelet_update(dir, "..2026_12_01_06_01_00.2", SECOND);
    poll("the second version's servers", Duration::from_secs(10), || (ids(&hangar) == ["one", "two"]).then_some(()));

    kubelet_update(dir, "..2026_12_01_06_02_00.3", "mcp_servers: [not, a, map]\n");
    poll("the bad version to be refused", Duration::from_secs(10), || {
        hangar.log().contains("config file changed: reload refused").then_some(())
    });
    assert_eq!(ids(&hangar), ["one", "two"], "the running config stays");

    kubelet_update(dir, "..2026_12_01_06_03_00.4", THIRD);
    poll("the third version's servers", Duration::from_secs(10), || (ids(&hangar) == ["three"]).then_some(()));
}
