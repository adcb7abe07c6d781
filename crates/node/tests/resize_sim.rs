//! In-place resize in virtual time: a container's memory limit not lowered below what it uses
//! (the kubelet's per-container check), and a resize of the pod-level resources given to the
//! containers that take their limits from them, the others left alone.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use podwright_node::PodWorkers;
use podwright_runtime::FakeUsage;
use podwright_runtime::fake::Call;
use serde_json::{Value, json};
use std::time::Duration;

const MI: i64 = 1024 * 1024;

fn update(p: Pod) -> Step {
    Box::new(move |w: &PodWorkers| w.update(p).unwrap())
}

/// `p` with the container `name`'s resources set to `resources`, resized in place.
fn resources(p: &Pod, name: &str, resources: Value) -> Pod {
    let mut p = p.clone();
    let c = p.spec.as_mut().unwrap().containers.iter_mut().find(|c| c.name == name).unwrap();
    c.resources = Some(serde_json::from_value(resources).unwrap());
    c.resize_policy =
        serde_json::from_value(json!([{"resourceName": "memory", "restartPolicy": "NotRequired"}])).unwrap();
    p
}

fn resize_conditions(p: &Pod) -> Vec<PodCondition> {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().filter(|c| c.type_.starts_with("PodResize")).collect()
}

/// The last status published before virtual second `t`.
fn at(history: &[(f64, Pod)], t: f64) -> &Pod {
    &history.iter().rev().find(|(s, _)| *s < t).expect("a status before then").1
}

fn updates(sim: &Sim) -> Vec<(f64, String, i64, i64)> {
    let calls = sim.fake.calls().into_iter();
    calls
        .filter_map(|(t, c)| match c {
            Call::UpdateContainerResources { name, cpu_quota, memory_limit, .. } => {
                Some((sim.at(t), name, cpu_quota, memory_limit))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_containers_memory_limit_is_not_lowered_below_what_it_uses() {
    let sim = Sim::new();
    // `b` has no memory limit: the pod cgroup has none, and only the container's check applies.
    let p = resources(&pod(&[], &["a", "b"], "Always"), "a", json!({"limits": {"memory": "64Mi"}}));
    sim.fake.set_usage("a", FakeUsage { millicores: 0, working_set_bytes: 40 << 20 });
    let lowered = resources(&p, "a", json!({"limits": {"memory": "20Mi"}}));
    let fake = sim.fake.clone();
    let steps = vec![
        (5.0, update(lowered)),
        (
            20.0,
            Box::new(move |_: &PodWorkers| {
                fake.set_usage("a", FakeUsage { millicores: 0, working_set_bytes: 10 << 20 })
            }) as Step,
        ),
    ];
    let history = sim.run_steps(p, Duration::from_secs(40), steps).await;

    let refused = resize_conditions(at(&history, 20.0));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0].type_.as_str(), refused[0].reason.as_deref(), refused[0].message.as_deref()),
        (
            "PodResizeInProgress",
            Some("Error"),
            Some(
                "cannot decrease memory limits: attempting to set container \"a\" memory limit (20971520) below current usage (41943040)"
            )
        )
    );
    // Nothing was applied while it used more, and nothing restarted; once it uses less, the
    // next attempt (every 10 s) lowers it.
    let done = updates(&sim);
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(done[0].0 >= 20.0 && done[0].0 <= 30.0, "{done:?}");
    assert_eq!((done[0].1.as_str(), done[0].3), ("a", 20 * MI));
    assert_eq!(sim.starts().len(), 2, "no container restarted");
    assert!(resize_conditions(at(&history, 40.0)).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_pod_level_resize_reaches_the_containers_that_take_the_pods_limits() {
    let sim = Sim::new();
    let mut p = resources(&pod(&[], &["a", "b"], "Always"), "b", json!({"limits": {"cpu": "100m", "memory": "32Mi"}}));
    let pod_level = |cpu: &str, memory: &str| {
        serde_json::from_value(
            json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}),
        )
        .unwrap()
    };
    p.spec.as_mut().unwrap().resources = Some(pod_level("500m", "128Mi"));
    let mut bigger = p.clone();
    bigger.spec.as_mut().unwrap().resources = Some(pod_level("800m", "160Mi"));
    let history = sim.run_steps(p, Duration::from_secs(20), vec![(5.0, update(bigger))]).await;

    // `a` has no limits of its own: it follows the pod's; `b` keeps its own.
    assert_eq!(updates(&sim), [(5.0, "a".to_string(), 80_000, 160 * MI)]);
    assert_eq!(sim.starts().len(), 2, "no container restarted");
    let resized = at(&history, 20.0);
    assert!(resize_conditions(resized).is_empty(), "{:?}", resize_conditions(resized));
    assert!(resize_conditions(at(&history, 5.0)).is_empty(), "nothing in progress before");
    // The allocation is written down with the pod-level resources.
    let uid = resized.metadata.uid.as_deref().unwrap();
    let checkpoint = std::fs::read_to_string(sim.root().join("pods").join(uid).join("checkpoint.json")).unwrap();
    let saved: Value = serde_json::from_str(&checkpoint).unwrap();
    assert_eq!(saved["allocated"]["spec.resources"]["limits"], json!({"cpu": "800m", "memory": "160Mi"}));
    assert_eq!(saved["actuated"]["spec.resources"]["limits"], json!({"cpu": "800m", "memory": "160Mi"}));
}
