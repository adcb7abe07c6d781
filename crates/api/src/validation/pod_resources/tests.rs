use crate::defaults::apply_defaults;
use crate::manifest::parse_manifests;
use crate::validation::validate_pod;

/// The errors of a pod whose spec is `spec` (YAML lines indented by two spaces), defaulted.
fn errors_of(spec: &str) -> Vec<String> {
    let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n{spec}");
    let mut pod = parse_manifests("t.yaml", &yaml).unwrap_or_else(|e| panic!("{e}")).remove(0);
    apply_defaults(&mut pod);
    validate_pod(&pod).iter().map(|e| e.to_string()).collect()
}

#[test]
fn pod_level_resources_as_the_api_server_validates_them() {
    // (case, spec lines, errors)
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "limits only",
            "  resources: {limits: {cpu: 500m, memory: 128Mi}}\n  containers: [{name: a, image: b}]\n",
            &[],
        ),
        (
            "containers within the pod's budget",
            "  resources: {requests: {cpu: 500m}, limits: {cpu: \"1\", memory: 1Gi}}\n  containers:\n  - {name: a, image: b, resources: {requests: {cpu: 200m, memory: 64Mi}, limits: {memory: 1Gi}}}\n  - {name: b, image: b, resources: {requests: {cpu: \"0.3\"}}}\n",
            &[],
        ),
        (
            "the containers' requests above the pod's",
            "  resources: {requests: {cpu: 500m, memory: 64Mi}}\n  containers:\n  - {name: a, image: b, resources: {requests: {cpu: 400m, memory: 32Mi}}}\n  - {name: b, image: b, resources: {requests: {cpu: 200m, memory: 32Mi}}}\n",
            &[
                "spec.resources.requests[cpu]: Invalid value: \"500m\": must be greater than or equal to aggregate container requests of 600m",
            ],
        ),
        (
            "an init container counts with the sidecars before it",
            "  resources: {requests: {cpu: \"1\"}}\n  initContainers:\n  - {name: s, image: b, restartPolicy: Always, resources: {requests: {cpu: 500m}}}\n  - {name: i, image: b, resources: {requests: {cpu: 600m}}}\n  containers: [{name: a, image: b}]\n",
            &[
                "spec.resources.requests[cpu]: Invalid value: \"1\": must be greater than or equal to aggregate container requests of 1100m",
            ],
        ),
        (
            "a container's limit above the pod's",
            "  resources: {limits: {memory: 128Mi}}\n  containers: [{name: a, image: b, resources: {limits: {memory: 256Mi}}}]\n",
            &[
                // The pod's request defaults to the containers' aggregate, above the pod's limit.
                "spec.resources.requests: Invalid value: \"256Mi\": must be less than or equal to memory limit of 128Mi",
                "spec.resources.containers[0][memory].limits: Invalid value: \"256Mi\": must be less than or equal to pod limits of 128Mi",
            ],
        ),
        (
            "a request above its limit",
            "  resources: {requests: {cpu: \"2\"}, limits: {cpu: \"1\"}}\n  containers: [{name: a, image: b}]\n",
            &["spec.resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"],
        ),
        (
            "names pod-level resources do not support",
            "  resources: {requests: {ephemeral-storage: 1Gi, example.com/gpu: \"1\", foo: \"1\"}}\n  containers: [{name: a, image: b}]\n",
            &[
                "spec.resources.requests[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
                "spec.resources.requests[example.com/gpu]: Unsupported value: \"example.com/gpu\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
                // An extended resource is not overcommittable.
                "spec.resources.limits: Required value: Limit must be set for non overcommitable resources",
                "spec.resources.requests[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified",
            ],
        ),
        (
            "a negative quantity",
            "  resources: {limits: {cpu: \"-1\"}}\n  containers: [{name: a, image: b}]\n",
            &[
                "spec.resources.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            ],
        ),
        (
            "hugepages alone",
            "  resources: {limits: {hugepages-2Mi: 2Mi}}\n  containers: [{name: a, image: b}]\n",
            &["spec.resources: Forbidden: HugePages require cpu or memory"],
        ),
        (
            "claims",
            "  resources: {claims: [], limits: {cpu: \"1\"}}\n  containers: [{name: a, image: b}]\n",
            &["spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level"],
        ),
    ];
    let mut failures = Vec::new();
    for (case, spec, want) in cases {
        let got = errors_of(spec);
        if got != *want {
            failures.push(format!("case {case}:\n  got:  {got:#?}\n  want: {want:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
