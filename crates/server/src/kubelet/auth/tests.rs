use super::*;
use k8s_openapi::api::authentication::v1::TokenReviewStatus;
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
use std::collections::BTreeSet;

/// The API server's reviews: tokens it knows, users it allows; what was asked is counted.
#[derive(Default)]
pub(crate) struct FakeReviews {
    users: Mutex<HashMap<String, UserInfo>>,
    allowed: Mutex<BTreeSet<String>>,
    tokens_asked: Mutex<usize>,
    access_asked: Mutex<Vec<SubjectAccessReviewSpec>>,
}

impl FakeReviews {
    pub(crate) fn new() -> Arc<FakeReviews> {
        Arc::new(FakeReviews::default())
    }

    pub(crate) fn user(&self, token: &str, name: &str, groups: &[&str]) {
        let info = UserInfo {
            username: Some(name.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            ..Default::default()
        };
        self.users.lock().unwrap().insert(token.into(), info);
    }

    /// `user` may do everything; `user/subresource`, only that subresource.
    pub(crate) fn allow(&self, user: &str) {
        self.allowed.lock().unwrap().insert(user.into());
    }

    /// (token reviews, access reviews) made.
    pub(crate) fn asked(&self) -> (usize, usize) {
        (*self.tokens_asked.lock().unwrap(), self.access_asked.lock().unwrap().len())
    }

    pub(crate) fn last_access(&self) -> Option<SubjectAccessReviewSpec> {
        self.access_asked.lock().unwrap().last().cloned()
    }
}

#[async_trait]
impl Reviews for FakeReviews {
    async fn token_review(&self, review: TokenReview) -> Result<TokenReview, String> {
        *self.tokens_asked.lock().unwrap() += 1;
        let token = review.spec.token.clone();
        if token == "error" {
            return Err("connection refused".into());
        }
        let user = self.users.lock().unwrap().get(&token).cloned();
        let status = TokenReviewStatus { authenticated: Some(user.is_some()), user, ..Default::default() };
        Ok(TokenReview { status: Some(status), ..review })
    }

    async fn access_review(&self, review: SubjectAccessReview) -> Result<SubjectAccessReview, String> {
        self.access_asked.lock().unwrap().push(review.spec.clone());
        let user = review.spec.user.clone().unwrap_or_default();
        if user == "error" {
            return Err("connection refused".into());
        }
        let subresource = review.spec.resource_attributes.as_ref().and_then(|a| a.subresource.clone());
        let allowed = self.allowed.lock().unwrap();
        let allowed =
            allowed.contains(&user) || allowed.contains(&format!("{user}/{}", subresource.unwrap_or_default()));
        Ok(SubjectAccessReview { status: Some(SubjectAccessReviewStatus { allowed, ..Default::default() }), ..review })
    }
}

fn headers(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    h
}

#[test]
fn attributes_follow_the_kubelets_mapping() {
    let of = |m: Method, p: &str| {
        let a = Attributes::of(&m, p);
        (a.verb, a.subresources)
    };
    let proxy: &[&str] = &["proxy"];
    assert_eq!(of(Method::GET, "/stats/summary"), ("get", &["stats"][..]));
    assert_eq!(of(Method::GET, "/stats"), ("get", &["stats"][..]));
    assert_eq!(of(Method::GET, "/metrics"), ("get", &["metrics"][..]));
    assert_eq!(of(Method::GET, "/metrics/resource"), ("get", &["metrics"][..]));
    assert_eq!(of(Method::GET, "/metricsfoo"), ("get", proxy));
    assert_eq!(of(Method::GET, "/logs/messages"), ("get", &["log"][..]));
    assert_eq!(of(Method::GET, "/spec/"), ("get", &["spec"][..]));
    assert_eq!(of(Method::POST, "/checkpoint/ns/p/c"), ("create", &["checkpoint"][..]));
    assert_eq!(of(Method::POST, "/exec/ns/p/c"), ("create", proxy));
    assert_eq!(of(Method::GET, "/containerLogs/ns/p/c"), ("get", proxy));
    // KubeletFineGrainedAuthz: their own subresource first, then proxy.
    assert_eq!(of(Method::GET, "/pods"), ("get", &["pods", "proxy"][..]));
    assert_eq!(of(Method::GET, "/runningpods/"), ("get", &["pods", "proxy"][..]));
    assert_eq!(of(Method::GET, "/configz"), ("get", &["configz", "proxy"][..]));
    assert_eq!(of(Method::PUT, "/pods"), ("update", &["pods", "proxy"][..]));
    assert_eq!(of(Method::DELETE, "/pods"), ("delete", &["pods", "proxy"][..]));
    assert_eq!(of(Method::HEAD, "/healthz"), ("", &["healthz", "proxy"][..]));
    assert_eq!(of(Method::GET, "/healthzfoo"), ("get", proxy));
}

#[tokio::test]
async fn a_fine_grained_subresource_is_asked_first_then_proxy() {
    let reviews = FakeReviews::new();
    // An API server that knows nodes/pods, and one (1.20's RBAC) that grants only proxy.
    reviews.allow("new/pods");
    reviews.allow("old/proxy");
    let auth = Auth::new("n", AuthSettings::default(), reviews.clone(), Clock::new());
    let user = |name: &str| User { name: name.into(), ..Default::default() };
    let pods = Attributes::of(&Method::GET, "/pods");
    let asked = |from: usize| -> Vec<String> {
        reviews.access_asked.lock().unwrap()[from..]
            .iter()
            .map(|s| s.resource_attributes.as_ref().and_then(|a| a.subresource.clone()).unwrap_or_default())
            .collect()
    };
    auth.authorize(&user("new"), &pods).await.unwrap();
    assert_eq!(asked(0), ["pods"]);
    auth.authorize(&user("old"), &pods).await.unwrap();
    assert_eq!(asked(1), ["pods", "proxy"]);
    let e = auth.authorize(&user("none"), &pods).await.unwrap_err();
    assert_eq!(asked(3), ["pods", "proxy"]);
    assert_eq!(e.message, "Forbidden (user=none, verb=get, resource=nodes, subresource(s)=[pods proxy])");
    // Only proxy grants what has no subresource of its own.
    let exec = Attributes::of(&Method::POST, "/exec/a/b/c");
    assert!(auth.authorize(&user("new"), &exec).await.is_err());
    assert_eq!(asked(5), ["proxy"]);
}

#[test]
fn bearer_tokens_are_read_as_the_kubelet_reads_them() {
    assert_eq!(bearer_token(&headers("abc")), Some("abc"));
    let mut h = HeaderMap::new();
    h.insert(header::AUTHORIZATION, "bearer  abc ".parse().unwrap());
    assert_eq!(bearer_token(&h), Some("abc"));
    h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
    assert_eq!(bearer_token(&h), None);
    h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
    assert_eq!(bearer_token(&h), None);
}

#[tokio::test]
async fn without_credentials_it_is_401_unless_anonymous_requests_are_allowed() {
    let reviews = FakeReviews::new();
    let auth = Auth::new("n", AuthSettings::default(), reviews.clone(), Clock::new());
    assert_eq!(auth.authenticate(None, &HeaderMap::new()).await, Err(unauthorized()));
    let anonymous = AuthSettings { anonymous: true, ..Default::default() };
    let auth = Auth::new("n", anonymous, reviews.clone(), Clock::new());
    let user = auth.authenticate(None, &HeaderMap::new()).await.unwrap();
    assert_eq!(
        (user.name.as_str(), user.groups.as_slice()),
        ("system:anonymous", &["system:unauthenticated".to_string()][..])
    );
    // A token the API server does not accept is not anonymous.
    assert_eq!(auth.authenticate(None, &headers("bad")).await, Err(unauthorized()));
    // Without the token webhook, a token is no credential.
    let no_webhook = AuthSettings { token_webhook: None, ..Default::default() };
    let auth = Auth::new("n", no_webhook, reviews.clone(), Clock::new());
    assert_eq!(auth.authenticate(None, &headers("bad")).await, Err(unauthorized()));
    assert_eq!(reviews.asked(), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn token_reviews_are_cached_for_the_ttl_and_errors_not_at_all() {
    let reviews = FakeReviews::new();
    reviews.user("t", "u", &[]);
    let auth = Auth::new("n", AuthSettings::default(), reviews.clone(), Clock::new());
    for _ in 0..3 {
        assert_eq!(auth.authenticate(None, &headers("t")).await.unwrap().name, "u");
        assert_eq!(auth.authenticate(None, &headers("bad")).await, Err(unauthorized()));
    }
    assert_eq!(reviews.asked(), (2, 0));
    tokio::time::advance(Duration::from_secs(121)).await;
    auth.authenticate(None, &headers("t")).await.unwrap();
    assert_eq!(reviews.asked(), (3, 0));
    for _ in 0..2 {
        assert_eq!(auth.authenticate(None, &headers("error")).await, Err(unauthorized()));
    }
    assert_eq!(reviews.asked(), (5, 0));
}

#[tokio::test(start_paused = true)]
async fn decisions_are_cached_five_minutes_allowed_and_thirty_seconds_denied() {
    let reviews = FakeReviews::new();
    reviews.allow("yes");
    let auth = Auth::new("n", AuthSettings::default(), reviews.clone(), Clock::new());
    let yes = User { name: "yes".into(), ..Default::default() };
    let no = User { name: "no".into(), ..Default::default() };
    let get = Attributes::of(&Method::GET, "/containerLogs/a/b/c");
    for _ in 0..3 {
        assert_eq!(auth.authorize(&yes, &get).await, Ok(()));
        assert_eq!(auth.authorize(&no, &get).await, Err(forbidden(&no, &get)));
    }
    assert_eq!(reviews.asked(), (0, 2));
    // Another verb is another question.
    auth.authorize(&yes, &Attributes::of(&Method::POST, "/exec/a/b/c")).await.unwrap();
    assert_eq!(reviews.asked(), (0, 3));
    tokio::time::advance(Duration::from_secs(31)).await;
    auth.authorize(&yes, &get).await.unwrap();
    auth.authorize(&no, &get).await.unwrap_err();
    assert_eq!(reviews.asked(), (0, 4));
    tokio::time::advance(Duration::from_secs(270)).await;
    auth.authorize(&yes, &get).await.unwrap();
    assert_eq!(reviews.asked(), (0, 5));
    // The API server unreachable: a 500 naming the request.
    let error = User { name: "error".into(), ..Default::default() };
    let e = auth.authorize(&error, &get).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "Authorization error (user=error, verb=get, resource=nodes, subresource(s)=[proxy])"
        )
    );
    // AlwaysAllow asks nobody.
    let always = AuthSettings { authorization: Authorization::AlwaysAllow, ..Default::default() };
    let auth = Auth::new("n", always, reviews.clone(), Clock::new());
    assert_eq!(auth.authorize(&no, &get).await, Ok(()));
    assert_eq!(reviews.asked(), (0, 6));
}

#[test]
fn a_certificate_without_a_common_name_is_no_user() {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:masters");
    let der = params.self_signed(&key).unwrap().der().to_vec();
    assert_eq!(User::of_certificate(&der), None);
    assert_eq!(User::of_certificate(b"not a certificate"), None);
}
