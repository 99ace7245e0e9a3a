//! Query refusals as gRPC statuses: the reason's kind picks the gRPC code, the reason code
//! travels as a `google.rpc.ErrorInfo` detail (and a 429's wait as `RetryInfo`).

use std::time::Duration;

use paywatch_core::ReasonKind;
use paywatch_query::QueryError;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The `domain` of every `ErrorInfo` paywatch sends.
pub const ERROR_DOMAIN: &str = "paywatch";

/// The gRPC code of each kind of refusal.
fn code_of(kind: ReasonKind) -> Code {
    match kind {
        ReasonKind::BadInput | ReasonKind::Conflict | ReasonKind::TooLarge | ReasonKind::Rejected => {
            Code::InvalidArgument
        }
        ReasonKind::Verdict => Code::FailedPrecondition,
        ReasonKind::Unauthorized => Code::Unauthenticated,
        ReasonKind::NotFound => Code::NotFound,
        ReasonKind::RateLimited => Code::ResourceExhausted,
        ReasonKind::Unavailable => Code::Unavailable,
    }
}

/// `error` as a gRPC status carrying its reason code; what failed inside paywatch (the
/// store) is logged here, where the refusal leaves, and never sent.
pub fn status_of(error: QueryError) -> Status {
    if let Some(internal) = &error.internal {
        tracing::error!(reason = %error.reason, error = %internal, "a gRPC call failed inside paywatch");
    }
    let details = ErrorDetails::with_error_info(error.reason.code(), ERROR_DOMAIN, []);
    Status::with_error_details(code_of(error.reason.kind()), error.message, details)
}

/// A rate-limit refusal, with how long to wait.
pub(crate) fn throttled(error: QueryError, seconds: u64) -> Status {
    let mut details = ErrorDetails::with_error_info(error.reason.code(), ERROR_DOMAIN, []);
    details.set_retry_info(Some(Duration::from_secs(seconds)));
    Status::with_error_details(code_of(error.reason.kind()), error.message, details)
}

#[cfg(test)]
mod tests {
    use paywatch_core::Reason;

    use super::*;

    #[test]
    fn the_reason_code_survives_as_error_info() {
        let status = status_of(QueryError::new(Reason::PaymentNotFound, "no such payment"));
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "no such payment");
        let info = status.get_details_error_info().expect("an ErrorInfo");
        assert_eq!(info.reason, "payment_not_found");
        assert_eq!(info.domain, ERROR_DOMAIN);
    }

    #[test]
    fn a_rate_limit_says_when_to_retry() {
        let status = throttled(QueryError::new(Reason::RateLimited, "slow down"), 2);
        assert_eq!(status.code(), Code::ResourceExhausted);
        let retry = status.get_details_retry_info().expect("a RetryInfo");
        assert_eq!(retry.retry_delay, Some(Duration::from_secs(2)));
    }
}
