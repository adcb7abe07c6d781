//! A container's requests and limits as `ValidateContainerResourceRequirements` checks their
//! amounts: none below zero, and no request above its limit. Which resource names a container
//! may use is `honoured_fields`' (the API server's own names pass there).

use k8s_openapi::api::core::v1::ResourceRequirements;

use super::{Errors, IS_NEGATIVE};
use crate::field_error::{FieldError, FieldPath};
use crate::quantity::{self, Quantity};

/// `Quantity.String()` of an amount as written, or the text itself if it is no quantity.
fn shown(written: &str) -> String {
    quantity::canonical(written).unwrap_or_else(|_| written.to_string())
}

pub(super) fn validate_resources(r: Option<&ResourceRequirements>, path: &FieldPath, errs: &mut Errors) {
    let Some(r) = r else { return };
    let amount = |written: &str| Quantity::parse(written).ok();
    let negative = |written: &str| amount(written).is_some_and(|q| q < Quantity::default());
    let (limits, requests) = (r.limits.as_ref(), r.requests.as_ref());
    for (name, q) in limits.into_iter().flatten() {
        if negative(&q.0) {
            errs.push(FieldError::invalid(path.child("limits").key(name), shown(&q.0), IS_NEGATIVE));
        }
    }
    for (name, q) in requests.into_iter().flatten() {
        if negative(&q.0) {
            errs.push(FieldError::invalid(path.child("requests").key(name), shown(&q.0), IS_NEGATIVE));
        }
        let Some(limit) = limits.and_then(|l| l.get(name)) else { continue };
        if let (Some(want), Some(most)) = (amount(&q.0), amount(&limit.0))
            && want > most
        {
            let detail = format!("must be less than or equal to {name} limit of {}", shown(&limit.0));
            errs.push(FieldError::invalid(path.child("requests"), shown(&q.0), detail));
        }
    }
}
