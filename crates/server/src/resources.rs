//! The resources the local API serves, with the names discovery and errors use.

/// A served resource of the core `v1` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Namespaces,
    Pods,
    Events,
    ConfigMaps,
    Secrets,
    Services,
}

impl Resource {
    pub const ALL: [Resource; 6] = [
        Resource::Namespaces,
        Resource::Pods,
        Resource::Events,
        Resource::ConfigMaps,
        Resource::Secrets,
        Resource::Services,
    ];

    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespaces => "namespaces",
            Resource::Pods => "pods",
            Resource::Events => "events",
            Resource::ConfigMaps => "configmaps",
            Resource::Secrets => "secrets",
            Resource::Services => "services",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Resource::Namespaces => "Namespace",
            Resource::Pods => "Pod",
            Resource::Events => "Event",
            Resource::ConfigMaps => "ConfigMap",
            Resource::Secrets => "Secret",
            Resource::Services => "Service",
        }
    }

    pub fn singular(self) -> &'static str {
        match self {
            Resource::Namespaces => "namespace",
            Resource::Pods => "pod",
            Resource::Events => "event",
            Resource::ConfigMaps => "configmap",
            Resource::Secrets => "secret",
            Resource::Services => "service",
        }
    }

    pub fn namespaced(self) -> bool {
        self != Resource::Namespaces
    }

    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Resource::Namespaces => &["ns"],
            Resource::Pods => &["po"],
            Resource::Events => &["ev"],
            Resource::ConfigMaps => &["cm"],
            Resource::Secrets => &[],
            Resource::Services => &["svc"],
        }
    }

    /// `kubectl get all` lists the resources in category `all`.
    pub fn categories(self) -> &'static [&'static str] {
        match self {
            Resource::Pods | Resource::Services => &["all"],
            _ => &[],
        }
    }

    pub fn from_plural(s: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.plural() == s)
    }

    pub fn verbs(self) -> &'static [&'static str] {
        &["create", "delete", "get", "list", "patch", "update", "watch"]
    }

    /// The subresources served, with the kind each returns and its verbs.
    pub fn subresources(self) -> &'static [(&'static str, &'static str, &'static [&'static str])] {
        match self {
            Resource::Pods => &[
                ("attach", "PodAttachOptions", &["create", "get"]),
                ("exec", "PodExecOptions", &["create", "get"]),
                ("log", "Pod", &["get"]),
                ("portforward", "PodPortForwardOptions", &["create", "get"]),
                ("status", "Pod", &["get", "patch", "update"]),
            ],
            _ => &[],
        }
    }
}
