//! Who may use the kubelet port, decided as the kubelet decides it (`pkg/kubelet/server/auth.go`,
//! `server.go` `InstallAuthFilter`, `cmd/kubelet/app/auth.go`):
//!
//! 1. **Authentication.** A client certificate the TLS handshake verified against the
//!    `clientCAFile` is the user of its subject (CN the name, each O a group); otherwise a bearer
//!    token is checked with a TokenReview (the decision cached for `webhook.cacheTTL`); otherwise
//!    the request is anonymous, which is `system:anonymous` when `anonymous.enabled` and a 401
//!    `Unauthorized` when not. A token the API server does not accept is a 401 either way.
//! 2. **Authorization.** A SubjectAccessReview of the user for `resource: nodes`, `name: <node>`,
//!    a verb from the method and a subresource from the path ([`Attributes::of`]): as newer
//!    kubelets do (`KubeletFineGrainedAuthz`, on by default from 1.33, GA in 1.36), `/pods`,
//!    `/runningpods`, `/healthz` and `/configz` ask for their own subresource first and `proxy`
//!    after, which any API server answers (one that knows no `nodes/pods` denies it, and
//!    `proxy` decides). Allowed decisions are cached 5 minutes and denials 30 seconds (or as
//!    configured). A denial is a 403
//!    `Forbidden (user=<u>, verb=<v>, resource=nodes, subresource(s)=[<s> ...])`.

use crate::errors::KubeletError;
use async_trait::async_trait;
use axum::http::{HeaderMap, Method, StatusCode, header};
use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use podwright_runtime::Clock;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The group every authenticated user is in, and the anonymous user's.
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const ANONYMOUS: &str = "system:anonymous";

/// The KubeletConfiguration v1beta1 defaults of `authentication.webhook.cacheTTL`,
/// `authorization.webhook.cacheAuthorizedTTL` and `cacheUnauthorizedTTL`.
pub const TOKEN_TTL: Duration = Duration::from_secs(120);
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
pub const DENIED_TTL: Duration = Duration::from_secs(30);

/// How many decisions a cache keeps before it drops the expired ones.
const CACHE_PRUNE_AT: usize = 1024;

/// The API server's reviews, made with the node's own credentials (the `system:node` role may
/// create both).
#[async_trait]
pub trait Reviews: Send + Sync + 'static {
    /// `POST /apis/authentication.k8s.io/v1/tokenreviews`.
    async fn token_review(&self, review: TokenReview) -> Result<TokenReview, String>;
    /// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`.
    async fn access_review(&self, review: SubjectAccessReview) -> Result<SubjectAccessReview, String>;
}

/// How the kubelet port authenticates and authorizes (the KubeletConfiguration's
/// `authentication` and `authorization`, with the v1beta1 defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// Bearer tokens are checked with TokenReviews, their results cached this long; `None` when
    /// `authentication.webhook.enabled` is false.
    pub token_webhook: Option<Duration>,
    /// `authentication.anonymous.enabled`: a request with no credentials is `system:anonymous`
    /// (then authorized as any other) instead of a 401.
    pub anonymous: bool,
    pub authorization: Authorization,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings { token_webhook: Some(TOKEN_TTL), anonymous: false, authorization: Authorization::default() }
    }
}

/// `authorization.mode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    AlwaysAllow,
    /// SubjectAccessReviews, decisions cached this long (`cacheAuthorizedTTL`,
    /// `cacheUnauthorizedTTL`).
    Webhook {
        allowed_ttl: Duration,
        denied_ttl: Duration,
    },
}

impl Default for Authorization {
    fn default() -> Self {
        Authorization::Webhook { allowed_ttl: ALLOWED_TTL, denied_ttl: DENIED_TTL }
    }
}

/// Who is asking.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn anonymous() -> User {
        User { name: ANONYMOUS.into(), groups: vec![UNAUTHENTICATED.into()], ..Default::default() }
    }

    /// The user of a client certificate's subject (`x509.CommonNameUserConversion`): CN is the
    /// name and each O a group; none without a CN.
    pub fn of_certificate(der: &[u8]) -> Option<User> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
        if name.is_empty() {
            return None;
        }
        let groups = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
        Some(User { name, groups, ..Default::default() }.authenticated())
    }

    fn of_review(info: UserInfo) -> User {
        User {
            name: info.username.unwrap_or_default(),
            uid: info.uid.unwrap_or_default(),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default(),
        }
        .authenticated()
    }

    /// With `system:authenticated` among its groups (`group.AuthenticatedGroupAdder`).
    fn authenticated(mut self) -> User {
        if !self.groups.iter().any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED) {
            self.groups.push(AUTHENTICATED.into());
        }
        self
    }
}

/// What a request asks of the node, for its SubjectAccessReviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: &'static str,
    /// Asked for in turn until one is allowed.
    pub subresources: &'static [&'static str],
}

impl Attributes {
    /// The kubelet's `GetRequestAttributes`: the verb from the method; the subresource `stats`,
    /// `metrics`, `log`, `spec` or `checkpoint` for those paths and below; `pods`, `healthz` or
    /// `configz`, then `proxy`, for theirs; `proxy` for every other path.
    pub fn of(method: &Method, path: &str) -> Attributes {
        let verb = match *method {
            Method::POST => "create",
            Method::GET => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        };
        const PATHS: [(&str, &[&str]); 9] = [
            ("/stats/", &["stats"]),
            ("/metrics", &["metrics"]),
            ("/logs/", &["log"]),
            ("/spec/", &["spec"]),
            ("/checkpoint/", &["checkpoint"]),
            ("/pods/", &["pods", "proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/healthz", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
        ];
        let subresources =
            PATHS.into_iter().find(|(base, _)| is_subpath(path, base)).map_or(&["proxy"][..], |(_, s)| s);
        Attributes { verb, subresources }
    }

    /// `[a b]`, as Go prints a list of strings.
    fn listed(&self) -> String {
        format!("[{}]", self.subresources.join(" "))
    }
}

/// `path` is `base` (without its trailing slash) or below it.
fn is_subpath(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base || path.strip_prefix(base).is_some_and(|rest| rest.starts_with('/'))
}

/// 401, in the kubelet's words.
pub fn unauthorized() -> KubeletError {
    KubeletError::new(StatusCode::UNAUTHORIZED, "Unauthorized")
}

/// 403, in the kubelet's words.
pub fn forbidden(user: &User, attrs: &Attributes) -> KubeletError {
    KubeletError::new(
        StatusCode::FORBIDDEN,
        format!(
            "Forbidden (user={}, verb={}, resource=nodes, subresource(s)={})",
            user.name,
            attrs.verb,
            attrs.listed()
        ),
    )
}

/// 500 when the API server could not be asked.
fn authorization_error(user: &User, attrs: &Attributes) -> KubeletError {
    KubeletError::internal(format!(
        "Authorization error (user={}, verb={}, resource=nodes, subresource(s)={})",
        user.name,
        attrs.verb,
        attrs.listed()
    ))
}

/// The bearer token of `Authorization: Bearer <token>` (`bearertoken.Authenticator`).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Decisions kept until they expire.
struct Cache<T> {
    entries: Mutex<HashMap<String, (Timestamp, T)>>,
}

impl<T: Clone> Cache<T> {
    fn new() -> Self {
        Cache { entries: Mutex::default() }
    }

    fn get(&self, key: &str, now: Timestamp) -> Option<T> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|(until, _)| *until > now).map(|(_, v)| v.clone())
    }

    fn put(&self, key: String, value: T, now: Timestamp, ttl: Duration) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_PRUNE_AT {
            entries.retain(|_, (until, _)| *until > now);
        }
        entries.insert(key, (now + ttl, value));
    }
}

/// The kubelet port's authenticator and authorizer.
pub struct Auth {
    node: String,
    settings: AuthSettings,
    reviews: Arc<dyn Reviews>,
    clock: Clock,
    /// TokenReview answers by the token's SHA-256: the user, or `None` for a token not accepted.
    tokens: Cache<Option<User>>,
    /// SubjectAccessReview answers by their spec.
    decisions: Cache<bool>,
}

impl Auth {
    pub fn new(node: &str, settings: AuthSettings, reviews: Arc<dyn Reviews>, clock: Clock) -> Auth {
        Auth { node: node.to_string(), settings, reviews, clock, tokens: Cache::new(), decisions: Cache::new() }
    }

    /// The user making a request that came with the (verified) client certificate `cert` and
    /// `headers`, or the 401.
    pub async fn authenticate(&self, cert: Option<&[u8]>, headers: &HeaderMap) -> Result<User, KubeletError> {
        if let Some(user) = cert.and_then(User::of_certificate) {
            return Ok(user);
        }
        if let (Some(ttl), Some(token)) = (self.settings.token_webhook, bearer_token(headers)) {
            return self.review_token(token, ttl).await.ok_or_else(unauthorized);
        }
        if self.settings.anonymous { Ok(User::anonymous()) } else { Err(unauthorized()) }
    }

    async fn review_token(&self, token: &str, ttl: Duration) -> Option<User> {
        // Kept by digest: the cache holds no credential.
        let key = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let key: String = key.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        if let Some(known) = self.tokens.get(&key, self.clock.now()) {
            return known;
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), ..Default::default() },
            ..Default::default()
        };
        let answer = match self.reviews.token_review(review).await {
            Ok(answer) => answer,
            Err(e) => {
                // Not cached: the next request asks again.
                tracing::warn!(%e, "Unable to authenticate the request due to an error");
                return None;
            }
        };
        let status = answer.status.unwrap_or_default();
        let user = if status.authenticated == Some(true) { status.user.map(User::of_review) } else { None };
        self.tokens.put(key, user.clone(), self.clock.now(), ttl);
        user
    }

    /// Whether `user` may do what `attrs` say on this node: `Ok`, or the 403 (500 when the API
    /// server could not be asked).
    pub async fn authorize(&self, user: &User, attrs: &Attributes) -> Result<(), KubeletError> {
        let Authorization::Webhook { allowed_ttl, denied_ttl } = self.settings.authorization else {
            return Ok(());
        };
        for subresource in attrs.subresources {
            let spec = self.access_spec(user, attrs.verb, subresource);
            let key = serde_json::to_string(&spec).unwrap_or_default();
            let allowed = match self.decisions.get(&key, self.clock.now()) {
                Some(allowed) => allowed,
                None => {
                    let review = SubjectAccessReview { spec, ..Default::default() };
                    let answer = self.reviews.access_review(review).await.map_err(|e| {
                        tracing::warn!(%e, "Failed to make webhook authorizer request");
                        authorization_error(user, attrs)
                    })?;
                    let status = answer.status.unwrap_or_default();
                    let allowed = status.allowed && status.denied != Some(true);
                    let ttl = if allowed { allowed_ttl } else { denied_ttl };
                    self.decisions.put(key, allowed, self.clock.now(), ttl);
                    allowed
                }
            };
            if allowed {
                return Ok(());
            }
        }
        tracing::debug!(user = user.name, verb = attrs.verb, subresources = attrs.listed(), "forbidden");
        Err(forbidden(user, attrs))
    }

    /// The review's spec, as the kubelet's webhook authorizer writes it.
    fn access_spec(&self, user: &User, verb: &str, subresource: &str) -> SubjectAccessReviewSpec {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        SubjectAccessReviewSpec {
            user: some(&user.name),
            uid: some(&user.uid),
            groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            resource_attributes: Some(ResourceAttributes {
                verb: some(verb),
                version: Some("v1".into()),
                resource: Some("nodes".into()),
                subresource: some(subresource),
                name: some(&self.node),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
