//! Pod deletion as the API server and the kubelet do it together: the pod gets a
//! `deletionTimestamp` (STATUS `Terminating`), its containers are stopped within the grace
//! period, and then the object is gone (`pkg/registry/core/pod/strategy.go`,
//! `pkg/kubelet/status/status_manager.go`).

use crate::errors::{ApiError, ApiResult};
use crate::mirror::mirrored_uid;
use crate::request::Params;
use crate::resources::Resource;
use crate::server::ApiServer;
use crate::store::meta_str;
use axum::http::HeaderMap;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde_json::{Value, json};

/// The grace period when neither the request nor the pod gives one.
const DEFAULT_GRACE: i64 = 30;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

/// `DeleteOptions`, from the body (kubectl) or the query.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    grace_period_seconds: Option<i64>,
    preconditions: Option<Preconditions>,
}

impl DeleteOptions {
    pub fn parse(_headers: &HeaderMap, body: &[u8], p: &Params) -> ApiResult<DeleteOptions> {
        let mut o: DeleteOptions = if body.iter().all(u8::is_ascii_whitespace) {
            DeleteOptions::default()
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
        };
        if o.grace_period_seconds.is_none() {
            o.grace_period_seconds = p.grace_period_seconds;
        }
        Ok(o)
    }

    pub fn check_preconditions(&self, r: Resource, obj: &Value) -> ApiResult<()> {
        let Some(pre) = &self.preconditions else { return Ok(()) };
        let name = meta_str(obj, "name").unwrap_or_default();
        if let Some(uid) = &pre.uid
            && Some(uid.as_str()) != meta_str(obj, "uid")
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(obj, "uid").unwrap_or_default()
            );
            return Err(ApiError {
                message: format!("Operation cannot be fulfilled on {} \"{name}\": {why}", r.plural()),
                ..ApiError::conflict(r, name)
            });
        }
        if let Some(rv) = &pre.resource_version
            && Some(rv.as_str()) != meta_str(obj, "resourceVersion")
        {
            return Err(ApiError::conflict(r, name));
        }
        Ok(())
    }
}

fn phase(obj: &Value) -> &str {
    obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default()
}

/// Deletes a pod: at once when the grace period is 0 or the pod has finished; otherwise the
/// pod is marked and stopped, and its object goes when the node reports it stopped. Returns the
/// pod as it is after the request.
pub fn delete(s: &ApiServer, ns: &str, name: &str, options: &DeleteOptions, dry_run: bool) -> ApiResult<Value> {
    let obj = s.store().get(Resource::Pods, ns, name)?;
    options.check_preconditions(Resource::Pods, &obj)?;
    if let Some(mirrored) = mirrored_uid(&obj) {
        // The kubelet deletes a mirror pod marked for deletion at once and creates it again;
        // its static pod never stops.
        if dry_run {
            return Ok((*obj).clone());
        }
        let gone = delete_mirror(s, ns, name, &obj)?;
        s.statics().mirror_deleted(mirrored, serde_json::from_value(gone["status"].clone()).ok());
        return Ok(gone);
    }
    let uid = meta_str(&obj, "uid").unwrap_or_default().to_string();
    let spec_grace =
        obj.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_GRACE);
    let mut grace = options.grace_period_seconds.unwrap_or(spec_grace);
    if grace < 0 {
        grace = 1;
    }
    if matches!(phase(&obj), "Succeeded" | "Failed") || s.link().is_finished(&uid) {
        grace = 0;
    }
    // A second deletion may only shorten the grace period.
    let earlier = obj.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
    if let Some(earlier) = earlier {
        grace = grace.min(earlier);
    }
    if dry_run {
        return Ok((*obj).clone());
    }
    if grace == 0 {
        let gone = s.store().delete(Resource::Pods, ns, name)?;
        s.link().delete(&uid, 0);
        return Ok(gone);
    }
    if earlier == Some(grace) {
        return Ok((*obj).clone());
    }
    let at = Time(s.now() + SignedDuration::from_secs(grace));
    let marked = s.store().update(Resource::Pods, ns, name, |old| {
        let mut new = old.clone();
        new["metadata"]["deletionTimestamp"] = serde_json::to_value(&at).unwrap_or(Value::Null);
        new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        new["metadata"]["generation"] =
            json!(old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1) + 1);
        Ok(Some(new))
    })?;
    // The node stops the pod as marked, its generation bumped, as the kubelet takes a graceful
    // deletion as an update of the pod: the statuses it writes while stopping observe it.
    if let Ok(pod) = serde_json::from_value::<Pod>(marked.clone()) {
        s.link().upsert(pod);
    }
    if s.link().delete(&uid, grace) {
        // Finished in the meantime: nothing to wait for.
        return s.store().delete(Resource::Pods, ns, name);
    }
    Ok(marked)
}

/// Deletes mirror pod `obj` at once, without making it again (as its namespace goes); the
/// static pod goes on.
pub fn delete_mirror(s: &ApiServer, ns: &str, name: &str, obj: &Value) -> ApiResult<Value> {
    let uid = meta_str(obj, "uid");
    s.store().delete_if(Resource::Pods, ns, name, |stored| meta_str(stored, "uid") == uid)
}
