//! paywatch's gRPC API (tonic): `paywatch.v1.Payments` — `GetPayment`, `ListPayments`,
//! the `WatchPayments` stream and `GetAuthorization` — answered by `paywatch-query`, as the
//! HTTP API is, with the standard gRPC health service (tracking the store) and server
//! reflection. Refusals carry the queries' reason codes as a `google.rpc.ErrorInfo` detail.

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
