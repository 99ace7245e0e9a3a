//! The gRPC server: the payments service behind the API's bearer tokens and rate limits,
//! the health service (serving while the store answers) and reflection, until shutdown.

use std::sync::Arc;
use std::time::Duration;

use paywatch_query::Queries;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::service::Interceptor;
use tonic::transport::Server;
use tonic::{Request, Status};
use tonic_health::server::HealthReporter;

use crate::FILE_DESCRIPTOR_SET;
use crate::proto::payments_server::PaymentsServer;
use crate::service::PaymentsService;
use crate::status::{status_of, throttled};

/// How often the health service asks the store whether it answers.
const HEALTH_PROBE: Duration = Duration::from_secs(5);

/// Authenticates each call by its `authorization` metadata and counts it against its
/// client's rate limit, exactly as the HTTP API does.
#[derive(Clone)]
struct Guard {
    queries: Arc<Queries>,
}

impl Interceptor for Guard {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let client = self
            .queries
            .access
            .authenticate(authorization)
            .map_err(status_of)?;
        self.queries
            .access
            .count_request(&client)
            .map_err(|(refusal, seconds)| throttled(refusal, seconds))?;
        Ok(request)
    }
}

/// Keeps the health status of the payments service (and of the server, the empty
/// service name) in step with whether the store answers.
async fn track_store_health(queries: Arc<Queries>, reporter: HealthReporter) {
    loop {
        let status = if queries.store.ping().await.is_ok() {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        reporter.set_service_status("", status).await;
        reporter.set_service_status("paywatch.v1.Payments", status).await;
        tokio::select! {
            () = tokio::time::sleep(HEALTH_PROBE) => {}
            () = queries.shutdown.cancelled() => return,
        }
    }
}

/// Serves the gRPC API on `listener` until `shutdown`.
pub async fn serve(
    queries: Arc<Queries>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(track_store_health(queries.clone(), reporter));
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the descriptor set compiled by build.rs is valid");
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .expect("the descriptor set compiled by build.rs is valid");
    let guard = Guard {
        queries: queries.clone(),
    };
    let payments = PaymentsServer::with_interceptor(PaymentsService::new(queries), guard);
    Server::builder()
        .add_service(health)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(payments)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown.cancelled_owned())
        .await
}
