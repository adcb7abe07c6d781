//! The resources the local API serves, with the names discovery and errors use.

/// The `node.k8s.io` group, of RuntimeClasses.
pub const NODE_GROUP: &str = "node.k8s.io";

/// A served resource: of the core `v1` group, or `node.k8s.io/v1`'s RuntimeClasses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Namespaces,
    Pods,
    Events,
    ConfigMaps,
    Secrets,
    Services,
    ServiceAccounts,
    RuntimeClasses,
}

impl Resource {
    pub const ALL: [Resource; 8] = [
        Resource::Namespaces,
        Resource::Pods,
        Resource::Events,
        Resource::ConfigMaps,
        Resource::Secrets,
        Resource::Services,
        Resource::ServiceAccounts,
        Resource::RuntimeClasses,
    ];

    /// The API group: empty for the core group.
    pub fn group(self) -> &'static str {
        match self {
            Resource::RuntimeClasses => NODE_GROUP,
            _ => "",
        }
    }

    /// The objects' `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::RuntimeClasses => "node.k8s.io/v1",
            _ => "v1",
        }
    }

    /// The resources of a group, in [`Resource::ALL`]'s order.
    pub fn of_group(group: &str) -> impl Iterator<Item = Resource> + '_ {
        Resource::ALL.into_iter().filter(move |r| r.group() == group)
    }

    /// `pods`, or `runtimeclasses.node.k8s.io` for a resource of a named group, as errors
    /// name it.
    pub fn qualified(self) -> String {
        match self.group() {
            "" => self.plural().to_string(),
            group => format!("{}.{group}", self.plural()),
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespaces => "namespaces",
            Resource::Pods => "pods",
            Resource::Events => "events",
            Resource::ConfigMaps => "configmaps",
            Resource::Secrets => "secrets",
            Resource::Services => "services",
            Resource::ServiceAccounts => "serviceaccounts",
            Resource::RuntimeClasses => "runtimeclasses",
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
            Resource::ServiceAccounts => "ServiceAccount",
            Resource::RuntimeClasses => "RuntimeClass",
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
            Resource::ServiceAccounts => "serviceaccount",
            Resource::RuntimeClasses => "runtimeclass",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Resource::Namespaces | Resource::RuntimeClasses)
    }

    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Resource::Namespaces => &["ns"],
            Resource::Pods => &["po"],
            Resource::Events => &["ev"],
            Resource::ConfigMaps => &["cm"],
            Resource::Secrets => &[],
            Resource::Services => &["svc"],
            Resource::ServiceAccounts => &["sa"],
            Resource::RuntimeClasses => &[],
        }
    }

    /// `kubectl get all` lists the resources in category `all`.
    pub fn categories(self) -> &'static [&'static str] {
        match self {
            Resource::Pods | Resource::Services => &["all"],
            _ => &[],
        }
    }

    /// The resource of `group` with this plural name.
    pub fn from_plural(group: &str, s: &str) -> Option<Resource> {
        Resource::of_group(group).find(|r| r.plural() == s)
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
                ("resize", "Pod", &["get", "patch", "update"]),
                ("status", "Pod", &["get", "patch", "update"]),
            ],
            _ => &[],
        }
    }
}
