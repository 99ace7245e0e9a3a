//! paywatch's gRPC API (tonic): `paywatch.v1.Payments` — `GetPayment`, `BatchGetPayments`,
//! `GetHistory`, `ListPayments`, `GetTotals`, `GetReview`, `ListReviews`, `ListTransfers`,
//! the `WatchPayments` stream, `GetAuthorization`, `GetProof` and `GetEvidence` — answered
//! by `paywatch-query`, as the HTTP API is, with the standard gRPC health service (tracking
//! the store) and server reflection. Refusals carry the queries' reason codes as a
//! `google.rpc.ErrorInfo` detail.

mod convert;
mod serve;
mod service;
mod status;

pub use serve::serve;
pub use service::PaymentsService;
pub use status::{ERROR_DOMAIN, status_of};

/// The messages, the server and the client generated from `proto/paywatch/v1/payments.proto`
/// (generated code: the workspace's style lints do not apply).
#[allow(missing_docs, unused_qualifications, unreachable_pub, clippy::use_self)]
pub mod proto {
    tonic::include_proto!("paywatch.v1");
}

/// The encoded descriptor set of the proto, as the reflection service serves it.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/payments_descriptor.bin"));

#[cfg(test)]
mod tests {
    use paywatch_core::PaymentMethod;
    use paywatch_core::listing::TransferRole;
    use paywatch_core::records::EscrowEventKind;
    use paywatch_core::refunds::RefundRule;
    use paywatch_core::state::{EventKind, HistoryCause, PaymentState};
    use paywatch_core::vocabulary::spellings;

    /// The proto's source, whose opening comment lists the vocabulary.
    const PROTO: &str = include_str!("../proto/paywatch/v1/payments.proto");

    /// The words the proto's vocabulary comment lists for `field`.
    fn listed(field: &str) -> Vec<&'static str> {
        let prefix = format!("//   {field}: ");
        let line = PROTO
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("the proto's vocabulary lists no {field}"));
        line.split(", ").collect()
    }

    #[test]
    fn the_protos_vocabulary_is_cores() {
        assert_eq!(listed("method"), spellings::<PaymentMethod>());
        assert_eq!(listed("payment_state"), spellings::<PaymentState>());
        assert_eq!(listed("event kind"), spellings::<EventKind>());
        assert_eq!(listed("transfer role"), spellings::<TransferRole>());
        assert_eq!(listed("refund rule"), spellings::<RefundRule>());
        assert_eq!(listed("cause"), spellings::<HistoryCause>());
        assert_eq!(listed("escrow event kind"), spellings::<EscrowEventKind>());
    }
}
