//! The `hangar.yaml` the Kubernetes base ships (`deploy/kubernetes/configmap.yaml`) is a config
//! the hangar accepts: a key renamed in `Config` but not in the manifest fails here, not in a pod.

use hangar_core::config::Config;

const CONFIGMAP: &str = include_str!("../../deploy/kubernetes/configmap.yaml");

fn shipped_hangar_yaml() -> String {
    let configmap: serde_norway::Value =
        serde_norway::from_str(CONFIGMAP).unwrap_or_else(|err| panic!("the ConfigMap is not YAML: {err}"));
    let text = configmap["data"]["hangar.yaml"].as_str();
    text.unwrap_or_else(|| panic!("the ConfigMap carries no data.hangar.yaml")).to_owned()
}

#[test]
fn the_shipped_configmap_is_a_hangar_config() {
    let config = Config::parse(&shipped_hangar_yaml()).unwrap_or_else(|err| panic!("{}: {}", err.key, err.message));
    assert!(config.cluster.is_some(), "the base runs every pod as one of a fleet");
}

#[test]
fn a_renamed_key_in_it_would_be_refused() {
    // The check above can fail: the same text with one key renamed is not a config.
    let renamed = shipped_hangar_yaml().replace("grace_s:", "grace_seconds:");
    assert!(Config::parse(&renamed).is_err(), "an unknown key is refused");
}
